// Reading a @triton.jit function's parameter list from its Python source, as far as kbisect needs it: the
// names in order (import-trace names a trace's constants by index), and the defaults that are literals (a
// `triton_kernel:` file that omits a constexpr gets its default, as the JIT applies it).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/kernel.h"

namespace kb::triton {

struct PyParam {
  std::string name;
  std::string annotation;    // "tl.constexpr", "" when none
  std::string default_text;  // the default's source text, "" when none
};

// The parameters of `def NAME(...)` in `src` (the first such def); empty when there is none.
std::vector<PyParam> python_signature(const std::string& src, const std::string& function);

// A default's value when it is a literal kbisect can carry exactly (an integer, a float, a string, True,
// False, None, tl.float16 / triton.language.float16); nullopt otherwise (an expression, a name).
std::optional<ParamValue> python_literal(const std::string& text);

}  // namespace kb::triton
