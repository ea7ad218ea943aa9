// Integers read from JSON that a user or another tool may have written. nlohmann's get<int64_t>() on the
// number 2.5e20 converts a double out of range (undefined behaviour, found by fuzz_results_json), and
// get<int>() on 3000000000 truncates silently; these readers refuse both as InputError naming the field.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kb {

// `v` as an integer of type T: a JSON integer, or a number written with a fraction part of zero ("96.0"),
// within T's range. InputError "<what> = <v> is not an integer" / "... is out of range" otherwise.
template <class T>
T json_int(const nlohmann::json& v, const std::string& what) {
  static_assert(std::is_integral_v<T>);
  constexpr long double lo = (long double)std::numeric_limits<T>::min();
  constexpr long double hi = (long double)std::numeric_limits<T>::max();
  long double x;
  if (v.is_number_unsigned()) x = (long double)v.get<uint64_t>();
  else if (v.is_number_integer()) x = (long double)v.get<int64_t>();
  else if (v.is_number_float() && std::isfinite(v.get<double>()) && std::trunc(v.get<double>()) == v.get<double>())
    x = (long double)v.get<double>();
  else
    throw InputError(fmt::format("{} = {} is not an integer", what, v.dump()));
  if (x < lo || x > hi) throw InputError(fmt::format("{} = {} is out of range", what, v.dump()));
  return T(x);
}

// Field `name` of object `j` as json_int<T>, or `fallback` when `j` has no such field.
template <class T>
T json_int_or(const nlohmann::json& j, const char* name, T fallback, const std::string& what) {
  if (!j.is_object() || !j.contains(name)) return fallback;
  return json_int<T>(j.at(name), what.empty() ? std::string(name) : what + "." + name);
}

}  // namespace kb
