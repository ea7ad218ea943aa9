// Declaring a kernel, nvbench-style: one chained statement per kernel says its source, parameters
// (with defaults), dtypes, named configurations and constraints.
//
//   KernelDecl k = KernelDeclBuilder("cpu", "matmul_tiled")
//       .source("cpu/matmul_tiled.cpp", {"cpu/gemm_common.h"})
//       .int_param("BM", 96, "rows of A per cache block")
//       .dtypes({DType::f32, DType::bf16})
//       .config("small", {{"BM", 32}});
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/kernel.h"

namespace kb {

class KernelDeclBuilder {
 public:
  using ParamsCheck = decltype(KernelDecl::check_params);
  using ShapeCheck = decltype(KernelDecl::check_shape);

  KernelDeclBuilder(std::string backend, std::string name);
  // The source (relative to the kernel directory) and the headers it includes (hashed into cache keys).
  KernelDeclBuilder& source(std::string path, std::vector<std::string> headers);
  KernelDeclBuilder& description(std::string text);
  KernelDeclBuilder& int_param(std::string name, int64_t default_value, std::string help);
  // A parameter of any kind (ParamKind::Any: a user's Triton constexpr, carried with the kind it has).
  KernelDeclBuilder& param(std::string name, ParamKind kind, ParamValue default_value, std::string help);
  // The output tile every GEMM kernel here has: BM rows and BN columns of C per `unit`, BK deep.
  KernelDeclBuilder& tile_params(int64_t bm, int64_t bn, int64_t bk, const std::string& unit);
  KernelDeclBuilder& dtypes(std::vector<DType> d);
  // The parameter defaults, under this name: the kernel's first (default) configuration.
  KernelDeclBuilder& defaults_config(std::string name);
  // A named configuration: the defaults declared so far with these values replaced.
  KernelDeclBuilder& config(std::string name, std::initializer_list<std::pair<const std::string, ParamValue>> set);
  KernelDeclBuilder& check_params(ParamsCheck f);
  // How the kernel's arithmetic rounds when it is not plain fp32 accumulation, and why.
  KernelDeclBuilder& tolerance(ToleranceSpec spec, std::string reason);
  // A tunable parameter (already declared) and the values `kbisect tune` tries for it.
  KernelDeclBuilder& tunable(const std::string& name, std::vector<int64_t> values);
  // The same with values of any kind (a string or float constexpr's candidates).
  KernelDeclBuilder& tunable_values(const std::string& name, std::vector<ParamValue> values);
  // The same over lo, lo+step, ... <= hi.
  KernelDeclBuilder& tunable_range(const std::string& name, int64_t lo, int64_t hi, int64_t step);
  // Without one, every shape is accepted.
  KernelDeclBuilder& check_shape(ShapeCheck f);

  operator KernelDecl() const { return decl_; }

 private:
  Params defaults() const;
  KernelDecl decl_;
};

// "<name>=<value> must be positive" for the first of these integer parameters that is not.
std::optional<std::string> check_positive(const Params& p, std::initializer_list<const char*> names);

}  // namespace kb
