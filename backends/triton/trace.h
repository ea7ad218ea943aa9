// tritonparse traces (`kbisect import-trace`, docs/triton.md "Importing a kernel from a tritonparse trace"):
// reading the NDJSON that tritonparse's structured logging writes (plain, or gzip members one per event),
// its `compilation` events (kernel, hash, target, num_warps, num_stages, constants, Python source, IRs)
// and `launch` events (grid, arguments with shape, dtype and strides), and writing the chosen compilation
// as a `triton_kernel:` YAML file with its Python source beside it. Pure parsing and file writing: the
// warnings (skipped lines) are returned, never printed.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kb::triton {

// One argument of a launch, as tritonparse's extract_arg_info logged it.
struct TraceArg {
  std::string name;
  std::string kind;                  // "tensor", "int", "float", "bool", or what else tritonparse wrote
  std::vector<int64_t> shape, stride;  // tensors
  std::string dtype;                 // tensors: Triton's name (fp16, bf16, fp32, i32, ...), from torch.float16
  std::string value;                 // scalars, as text
};

// Launches with the same grid and arguments (shapes, dtypes, strides, scalar values) are one entry.
struct TraceLaunch {
  size_t line = 0;  // the first launch event with these shapes (1-based)
  std::array<int64_t, 3> grid{1, 1, 1};
  std::vector<TraceArg> args;  // every argument tritonparse logged, constexprs included
  size_t count = 1;            // launch events with these shapes
};

struct TraceCompilation {
  size_t line = 0;   // the compilation event (1-based)
  size_t index = 0;  // among this kernel's compilations, in trace order
  std::string kernel, hash, target;  // target: "cuda sm_90", "hip gfx942"
  int num_warps = 0, num_stages = 0;
  // Specialized arguments (src_constants): the parameter's name (or "#5" when the source cannot name it)
  // and the value as tritonparse wrote it, in JSON (1024, 0.01, true, null, "leaky_relu",
  // "triton.language.core.dtype('fp16')").
  std::vector<std::pair<std::string, std::string>> constants;
  // Compile options the compile did not take at their usual default (num_ctas, maxnreg, enable_fp_fusion,
  // ...): name and JSON value.
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> params;  // the function's parameters, from its source
  std::string python_source;        // the function (or the whole file, when tritonparse captured it)
  bool full_file = false;
  std::string ttir;                 // the TTIR, where the event has it: the compiled argument types
  // Every stage the event carries (file_content), by stage: ttir, ttgir, llir, ptx, amdgcn; and the
  // compile's metadata (the kernel JSON) as JSON text, and its Triton release ("" before 3.3's metadata).
  std::map<std::string, std::string> stages;
  std::string metadata_json, triton_version;
  std::vector<TraceLaunch> launches;
  size_t launch_events = 0;
};

struct Trace {
  std::string path;
  std::vector<TraceCompilation> compilations;
  size_t launch_events = 0, unmatched_launches = 0;
  std::vector<std::string> warnings;  // "PATH:LINE: ..." for each skipped line
};

// Reads a trace; InputError naming the file (and line) for a file that is empty, unreadable or holds no
// compilation event. Truncated or malformed lines are skipped with a warning.
Trace read_trace(const std::string& path);

// The compilation `kernel` (by kernel name; may be empty when the trace has one kernel) at `index` among
// its compilations (may be absent when it has one). InputError listing the choices otherwise.
const TraceCompilation& choose_compilation(const Trace& t, const std::string& kernel, std::optional<size_t> index);

struct ImportedKernel {
  std::string yaml_path, py_path, name;
  size_t shapes = 0;  // 0: compile-only (the trace has no launch of this compilation)
};

// The name import gives a compilation: the function's name, `_INDEX` when the trace compiled it several
// times, `_user` when that is the exact name of a kernel kbisect ships.
std::string imported_name(const Trace& t, const TraceCompilation& c);

// Writes DIR/<function>.yaml (the `triton_kernel:` file, docs/triton.md) and DIR/<function>.py (the
// kernel's source as a module that imports triton and triton.language as tl). Atomic writes.
ImportedKernel write_kernel_files(const Trace& t, const TraceCompilation& c, const std::string& out_dir);

// The pieces write_kernel_files uses, for tests: a TTIR's entry arguments as Triton types (*fp16, i32,
// fp32, ...) with their divisibility, and the pointer arguments the kernel stores through.
struct TtirArg {
  std::string name, type;
  bool divisible = false;
  bool pointer_range32 = false;  // tt.pointer_range = 32: AMD buffer ops, a tensor whose storage fits 2 GiB
};
std::vector<TtirArg> ttir_signature(const std::string& ttir, const std::string& kernel);
std::vector<std::string> ttir_stored_pointers(const std::string& ttir, const std::vector<TtirArg>& args);
// The .py module text for a compilation: the function with `@triton.jit` and the imports it needs.
std::string kernel_module_source(const TraceCompilation& c);

}  // namespace kb::triton
