// Integer expressions over named values, the way a Triton launch states its grid and scalar arguments:
// "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)", "min(NUM_SMS, cdiv(M, BLOCK_M))", "K". Integers (64-bit), names,
// + - * / (floor division, as Python's //) // % and parentheses, and the functions cdiv, min and max.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kb::triton {

using Bindings = std::map<std::string, int64_t>;

// Evaluates `text`; throws InputError naming the expression and what is wrong (an unknown name lists
// the names bound, a division by zero names the divisor). Names may be dotted: opt.num_warps.
int64_t eval_int(const std::string& text, const Bindings& names);

// The names an expression refers to (for checking a declaration before any value is known).
std::vector<std::string> expr_names(const std::string& text);

}  // namespace kb::triton
