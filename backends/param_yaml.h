// A typed parameter value (backends/kernel.h) read from a YAML node: the one reader for sweeps' axes,
// users' `triton_kernel:` constexprs and spaces, so that every file reads values the same way.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "backends/kernel.h"
#include "core/text.h"

namespace kb {

// A scalar node's value with its kind: a quoted scalar ("1", 'None') is always a string; a plain one reads
// as parse_param_value does (64, 0.01, true, null, tl.float16, leaky_relu). InputError at the node's
// file:line:col naming `field` for a list or mapping, or for a value that cannot be carried exactly (an
// integer outside 64 bits, a float outside a double).
ParamValue yaml_param_value(const YamlCtx& cx, const YAML::Node& n, const std::string& field);

}  // namespace kb
