// What a backend compiles and runs: a kernel (declared once, by name, per backend), a parameter set,
// a shape, a dtype. Backends know these and nothing of sweeps (harness/case.h adds the sweep's Case).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kb {


enum class DType { f32, f16, bf16 };
std::string to_string(DType d);
DType parse_dtype(const std::string& s);  // throws InputError
size_t dtype_bytes(DType d);

struct Shape {
  int64_t M = 0, N = 0, K = 0;
  // A user kernel's shape (backends/triton/user_kernel.h) is named, not MxNxK: its label and the values its
  // grid and arguments are stated in. M, N and K stay 0 and it has no GEMM flop count.
  std::string label;
  std::map<std::string, int64_t> values;
  double flops() const { return label.empty() ? 2.0 * double(M) * double(N) * double(K) : 0.0; }
  std::string str() const;  // "MxNxK", or the label
};

// Python's None as a parameter value (a Triton constexpr `ACTIVATION: tl.constexpr = None`).
struct NoneValue {
  bool operator==(const NoneValue&) const { return true; }
  bool operator<(const NoneValue&) const { return false; }
};
// A Triton dtype passed as a constexpr (`OUT_DTYPE: tl.constexpr` given tl.float16): its attribute name in
// triton.language ("float16"); the compile driver resolves it in the toolchain's own Triton.
struct DtypeValue {
  std::string name;
  bool operator==(const DtypeValue& o) const { return name == o.name; }
  bool operator<(const DtypeValue& o) const { return name < o.name; }
};

// A parameter value, typed (nvbench-style typed axes, and every kind of value Triton's JIT specializes a
// constexpr on): integer (64-bit), float (a double: Python's float, bit for bit), string, bool, None, or a
// Triton dtype.
using ParamValue = std::variant<int64_t, double, std::string, bool, NoneValue, DtypeValue>;
// The canonical text of a value, which parse_param_value reads back to the same value and type: 64; floats
// as the shortest text that reads back to the same double, with ".0" when it would read as an integer
// (0.01, 1.0, 1e-05, inf, nan); True / False; None; tl.float16; a string as written, or double-quoted
// (Python-style escapes) when it would read back as another kind or holds ',', '=' or '"'.
std::string to_string(const ParamValue& v);
// The kind's name, as Python calls it: int, float, str, bool, None, dtype.
std::string value_kind(const ParamValue& v);
// Reads a value as written in YAML (plain) or on a command line: decimal (or 0x/0o/0b) integers, floats
// (1e-05, .5, inf, nan, .inf), True/False/true/false, None/null/~, tl.<name> (a Triton dtype), a quoted
// "..." or '...' string, anything else a string. Throws InputError, naming the text, for an integer
// outside 64 bits or a float that does not fit a double (never a rounded or truncated value).
ParamValue parse_param_value(const std::string& s);

// Named parameters of one kernel instance, ordered by name (stable hashes and output).
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, ParamValue>> init) : values_(init) {}

  void set(const std::string& name, ParamValue v) { values_[name] = std::move(v); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  int64_t get_int(const std::string& name) const;           // throws InputError if missing/not int
  double get_float(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  int64_t get_int_or(const std::string& name, int64_t fallback) const;

  const std::map<std::string, ParamValue>& values() const { return values_; }
  std::string str() const;  // "BM=64,BN=64"  (canonical, used in keys and names)
  bool operator==(const Params& o) const { return values_ == o.values_; }
  bool operator<(const Params& o) const { return values_ < o.values_; }

 private:
  std::map<std::string, ParamValue> values_;
};

// Any: a constexpr of a user's Triton kernel, whose value is carried with the kind it was written in.
enum class ParamKind { Int, Float, String, Any };

struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::Int;
  ParamValue default_value;
  std::string help;
};

// Where a kernel's arithmetic differs from "fp32 accumulation with round-to-nearest, fp32 output"
// (KernelDecl::tolerance; harness/check.h derives the bound).
struct ToleranceSpec {
  // Rounding error per accumulation step, in units of fp32's unit roundoff u = 2^-24. 1 for IEEE
  // round-to-nearest adds and FMAs; tensor-core block FMAs that truncate their addends need 2.
  double accumulate_ulps = 1;
  // The dtype the kernel rounds its output to, when it is not fp32 (adds one rounding of that dtype).
  std::optional<DType> output;
};

// One tunable parameter and the values `kbisect tune` may give it (KernelDecl::space). A range is
// stored as its listed values. Which combinations are valid is still check_params' and check_shape's
// call: the space lists, the checks constrain.
struct TunableParam {
  std::string name;
  std::vector<ParamValue> values;
};

// A kernel declaration: the one place that says what a kernel is (docs/design.md, rule 1).
struct KernelDecl {
  std::string name;     // "matmul_tiled"
  std::string backend;  // "cpu", "cuda", "hip"
  std::string source;   // path relative to the kernel directory, e.g. "cpu/matmul_tiled.cpp"
  // The source language when it is not the backend's own (C++ / CUDA C++ / HIP): "triton" kernels are
  // compiled only by toolchains of kind "triton", and those compile nothing else.
  std::string language;
  std::vector<std::string> extra_sources;  // headers it includes (hashed into the cache key)
  std::string description;
  std::vector<ParamSpec> params;
  std::vector<DType> dtypes;
  // Named built-in configurations (a sweep can say `config: best`). The first is the default.
  std::vector<std::pair<std::string, Params>> configs;
  // Why (params, dtype, target) cannot be compiled, or nullopt if fine. target may be empty (CPU).
  std::function<std::optional<std::string>(const Params&, DType, const std::string& target)> check_params;
  // How its arithmetic rounds, when it is not plain fp32 accumulation (tensor cores); with the reason.
  ToleranceSpec tolerance;
  std::string tolerance_reason;
  // Why the shape cannot be run with these params and this dtype, or nullopt (alignment rules can depend
  // on the element size: a 16-byte copy holds 8 bf16 but 4 fp32 elements).
  std::function<std::optional<std::string>(const Params&, DType, const Shape&)> check_shape;
  // The tunable space, one entry per tuned parameter (the others keep their defaults); empty when the
  // kernel declares none. The built-in configs are starting points inside it, not "the best".
  std::vector<TunableParam> space;

  // Fills in defaults for missing params; throws InputError for unknown names / wrong kinds.
  Params complete(const Params& given) const;
  // Why toolchain kind `kind` cannot compile this kernel (the languages differ), or nullopt.
  std::optional<std::string> language_mismatch(const std::string& toolchain, const std::string& kind) const;
  bool supports(DType d) const;
};

// Params <-> JSON object: every kind keeps its type (integers and floats as JSON numbers, 1.0 stays a float;
// bool, null and strings as themselves; a dtype as {"dtype": "float16"}; a non-finite float as
// {"float": "inf"}).
nlohmann::json params_to_json(const Params& p);
Params params_from_json(const nlohmann::json& j);  // throws InputError for unsupported value types

int64_t ceil_div(int64_t a, int64_t b);

}  // namespace kb
