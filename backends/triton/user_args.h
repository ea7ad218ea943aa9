// The arguments a user's Triton kernel runs with (docs/triton.md, "Your own kernels"), per shape of its
// `triton_kernel:` file: tensors by shape, dtype, strides and an init rule, scalars by value, outputs
// marked. What any backend needs to run one: the storage each tensor spans, its initial bytes (the same on
// every machine and for every toolchain: a counter-based generator seeded by the argument's name and the
// shape's name), and the rule that compares an output with the baseline toolchain's.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace kb {
struct YamlCtx;
}

namespace kb::triton {

struct TensorInit {
  enum class Kind { uniform, zeros, value } kind = Kind::uniform;
  double lo = -1, hi = 1;  // uniform in [lo, hi)
  double value = 0;        // value
};

struct TensorArg {
  std::string dtype;                   // Triton's element type: fp16, bf16, fp32, fp64, i8, i16, i32, i64, u8, ...
  std::vector<int64_t> shape, strides; // strides in elements; contiguous row-major when not given
  TensorInit init;
  bool output = false;
  bool padding_nan = false;            // a tensor descriptor's out-of-bounds fill: NaN (else zeros)
  // Elements of the storage the view spans: 1 + sum((shape_i - 1) * stride_i); 0 for an empty shape.
  int64_t storage_elements() const;
  int64_t element_bytes() const;
  int64_t storage_bytes() const { return storage_elements() * element_bytes(); }
};

// One shape's arguments: tensors and scalars by name (every non-constexpr argument of the signature).
struct LaunchArgs {
  std::map<std::string, TensorArg> tensors;
  std::map<std::string, double> reals;    // fp32 / fp64 scalars
  std::map<std::string, int64_t> ints;    // integer scalars (also in the shape's values)
};

// Bytes per element of a Triton scalar type ("fp16" -> 2); 0 when kbisect does not know it.
int64_t triton_type_bytes(const std::string& type);

// A tensor argument's element type: "fp16" for "*fp16" and for a host tensor descriptor
// "tensordesc<fp16[64, 64]>"; "" for anything else.
std::string tensor_element_type(const std::string& type);
// A host tensor descriptor's block shape ("tensordesc<fp16[64, 64]>" -> {64, 64}); empty when `type` is
// not a tensor descriptor (or is malformed).
std::vector<int64_t> tensordesc_block(const std::string& type);

// Parses `args.NAME` of a tensor argument whose signature type is `pointer_type` ("*fp16", or a host tensor
// descriptor "tensordesc<fp16[64, 64]>": then the shape has the block's rank, the last stride is 1, and
// `padding: nan` may ask for NaN instead of zeros out of bounds): shape, dtype (must match the element
// type), strides, init. Errors name file:line:col and the field.
TensorArg parse_tensor_arg(const YamlCtx& cx, const YAML::Node& n, const std::string& name,
                           const std::string& pointer_type, bool output);

// The tensor's initial storage, element by element in storage order: `init` drawn from a counter-based
// generator (splitmix64 of the seed and the element's index), rounded to the dtype, as its bytes.
std::vector<uint8_t> initial_bytes(const TensorArg& t, uint64_t seed);
// The seed of one argument of one shape: the same for every toolchain and kernel with that argument.
uint64_t arg_seed(const std::string& shape_label, const std::string& arg);

// How outputs are compared with the baseline's: bitwise, or |got - ref| <= atol + rtol * |ref| per element
// for floating types (integers always exactly); NaN equals NaN, a NaN against a number is a mismatch.
struct OutputTolerance {
  bool bitwise = true;
  double atol = 0, rtol = 0;
};
// The user's `tolerance:` of a kernel file: `bitwise`, or a map dtype -> {atol, rtol}.
struct ToleranceRule {
  bool always_bitwise = false;
  std::map<std::string, OutputTolerance> by_dtype;  // the user's; the defaults fill the rest
};
ToleranceRule parse_tolerance(const YamlCtx& cx, const YAML::Node& n);
// The tolerance for an output of `dtype`: bitwise when the rule says so or the two toolchains are the same
// Triton release (`same_release`), else the user's figure for the dtype, else kbisect's default
// (atol/rtol fp16: 1e-5/1e-3, bf16: 1e-5/1.6e-2, as torch.testing's; fp32: 1e-5/1e-4, looser than torch's
// for reductions in another order; fp64: 1e-12/1e-10; integers exact).
OutputTolerance tolerance_for_output(const ToleranceRule& rule, const std::string& dtype, bool same_release);

// One output compared (what a device computes the same way): elements, mismatches, the first mismatch and
// the largest |got - ref| over floating elements that are both finite.
struct OutputDiff {
  std::string dtype;
  int64_t elements = 0, mismatches = 0, first = -1;
  double max_abs_error = 0;
  double first_got = 0, first_ref = 0;
};
// The rule on the host, over `n` elements of `dtype` in storage order (the reference implementation the
// device comparison is tested against).
OutputDiff compare_host(const std::string& dtype, const void* ref, const void* got, int64_t n, const OutputTolerance& tol);
// The element at `i` as a double (fp16, bf16, fp32, fp64, integers).
double element_value(const std::string& dtype, const void* base, int64_t i);

}  // namespace kb::triton
