// Sweep YAML readers for parameter axes and shapes (used by harness/sweep.cpp): an axis is a scalar,
// a list, {range: [start, stop, step]}, {pow2: [lo, hi]} or {values: [...]}; shapes are [M, N, K],
// {M:, N:, K:} products, zipped groups or named shape sets.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "backends/kernel.h"
#include "core/text.h"

namespace kb::sweep_yaml {

using Row = std::map<std::string, ParamValue>;

ParamValue scalar_value(const YamlCtx& cx, const YAML::Node& n, const std::string& field);

// Cartesian product of plain axes, times a zipped group (equal-length lists that go together).
std::vector<Row> expand_axes(const YamlCtx& cx, const YAML::Node& plain, const YAML::Node& zip,
                             const std::set<std::string>& skip_keys = {});

// A `shapes` field: a list of items, a single [M, N, K] or a single mapping item; `sets` maps the
// sweep's own shape-set names to files.
std::vector<Shape> parse_shapes(const YamlCtx& cx, const YAML::Node& n, const std::string& base_dir,
                                const std::map<std::string, std::string>& sets);

}  // namespace kb::sweep_yaml
