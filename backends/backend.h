// One Backend interface (docs/design.md, rule 2): compile -> Artifact, load -> Executable, available().
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/digest.h"
#include "backends/triton/user_args.h"
#include "backends/toolchain.h"
#include "backends/kernel.h"

namespace kb {

class Hasher;

// The result of compiling one kernel instance with one toolchain.
struct Artifact {
  std::string kernel, backend;
  Params params;
  DType dtype = DType::f32;
  std::string toolchain, toolchain_identity, target;
  std::string binary_path;   // the compiled object in the cache directory (.so / .cubin / .hsaco)
  std::string entry;         // symbol / kernel function name to load
  std::string code_hash;     // over code sections only, so "same machine code" is detectable
  int64_t code_bytes = 0;
  double compile_s = 0;
  bool cache_hit = false;
  std::string cache_key;
  // Backend-specific static metrics by name: registers, spill_stores, spill_loads, stack_bytes,
  // smem_bytes, vgprs, sgprs, agprs, lds_bytes, scratch_bytes, occupancy, ...
  std::map<std::string, double> metrics;
  std::string log;           // compiler output (warnings, -v resource lines)
};

// Per-sample conditions a backend can report (GPU clocks); unset fields are omitted in output.
struct TimedSample {
  double seconds = 0;          // time per kernel execution
  double clock_mhz = 0;        // SM clock during the sample, 0 if unknown
  bool throttled = false;      // backend says: discard (NVBench: clock < 75% of default)
};

// A user's Triton kernel's outputs after a run, kept where they live (device memory for a GPU backend), as
// the reference the same kernel built by other toolchains is checked against (docs/triton.md). Only the
// backend that made it can read it.
class OutputSnapshot {
 public:
  virtual ~OutputSnapshot() = default;
  virtual int64_t bytes() const = 0;
};

// The outputs compared with a snapshot: each output's difference (backends/triton/user_args.h), by name.
struct OutputCheck {
  std::string where = "host";  // or the device that compared them
  std::vector<std::pair<std::string, triton::OutputDiff>> outputs;
  bool ok() const {
    for (const auto& [name, d] : outputs)
      if (d.mismatches) return false;
    return true;
  }
};
using ToleranceOf = std::function<triton::OutputTolerance(const std::string& dtype)>;

// A loaded, launchable kernel in this process, bound to one shape at a time.
class Executable {
 public:
  virtual ~Executable() = default;
  // Allocate buffers for the shape and upload inputs (row-major A: MxK, B: KxN, already rounded to
  // the artifact's dtype). Throws Error if the shape cannot run.
  virtual void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) = 0;
  // Runs `batch` back-to-back executions and returns the time per execution. Blocks until done.
  virtual TimedSample run(int batch) = 0;
  // Evicts caches so that the next run is cold (CPU: touch a buffer >= 2x LLC; GPU: L2 flush).
  virtual void flush_caches() = 0;
  // C (MxN, row-major) as fp32, after at least one run.
  virtual std::vector<float> result() = 0;
  // The digest of C for the fast correctness check (backends/digest.h), after at least one run. The
  // default computes it on the host from result(); a device backend computes it where C lives.
  virtual ResultDigest digest(const Shape& shape, const DigestRequest& req) { return host_digest(result(), shape, req); }
  // A user's Triton kernel (prepared by its shape's label, A and B unused): its outputs after the last run,
  // and the comparison of this run's outputs with another build's snapshot on the same inputs. A backend
  // that cannot run user kernels never loads one; the defaults say so.
  virtual std::shared_ptr<const OutputSnapshot> snapshot_outputs();
  virtual OutputCheck compare_outputs(const OutputSnapshot& reference, const ToleranceOf& tolerance);
  // What the timer measures with ("steady_clock", "cuda-events", ...).
  virtual std::string clock_name() const = 0;
  // Where this load's code and operands landed (after prepare()), as "name=0x... " pairs: fresh-load
  // blocks record it so anyone can check that placement moved between blocks. "" when the backend
  // cannot say.
  virtual std::string placement() const { return ""; }
};

struct Availability {
  bool ok = false;
  std::string reason;  // why not, when !ok
};

struct CompileRequest {
  const KernelDecl* kernel = nullptr;
  Params params;           // complete (defaults filled)
  DType dtype = DType::f32;
  const Toolchain* toolchain = nullptr;  // identity resolved
  // The case's shape. Only a user's Triton kernel compiles differently per shape: Triton's JIT specializes
  // it on the shape's argument values (docs/triton.md, "Fidelity"); every other kernel ignores it.
  Shape shape;
  std::string kernel_dir;  // where kernel sources live
  std::string out_dir;     // an empty directory for the artifact's files
  double timeout_s = 300;
  // Bytes of compiler output kept in Artifact::log (its tail). `kbisect passes` / `explain` raise it to
  // read every -opt-bisect-limit / -print-changed line.
  size_t log_limit = 8000;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Can kernels run here? Compile-only work is possible even when not.
  virtual Availability available() = 0;
  // Kernels this backend declares.
  virtual const std::vector<KernelDecl>& kernels() const = 0;
  // Toolchains found on this machine.
  virtual std::vector<Toolchain> presets() const = 0;
  // Compile kinds this backend accepts ("gcc", "clang", "nvcc", ...).
  virtual std::vector<std::string> kinds() const = 0;
  // Computes identity + version text for a toolchain of this backend. Default: hashes the
  // compiler binary (symlinks resolved) + `compiler --version` + kind + flags + target + tools.
  virtual void identify(Toolchain& tc) const;
  // Compiles into req.out_dir; sets everything but cache fields. Throws CompileError with the log.
  virtual Artifact compile(const CompileRequest& req) = 0;
  // Loads an artifact (possibly from the cache) into this process. Throws EnvError if unavailable.
  virtual std::unique_ptr<Executable> load(const Artifact& art) = 0;
};

// The registry: backends compiled into this build, by name ("cpu" always; "cuda"/"hip" when built).
std::vector<Backend*> backends();
Backend* find_backend(const std::string& name);  // nullptr if not built in
Backend& backend_for(const Toolchain& tc);        // throws InputError naming the backend
// A kernel declared by a backend; throws InputError listing the kernels of that backend.
const KernelDecl& find_kernel(const std::string& backend, const std::string& name);
std::vector<const KernelDecl*> all_kernels();

// A kernel source's path: `rel` under kernel_dir, or `rel` itself when absolute (a user's own kernel).
std::string kernel_source_path(const std::string& kernel_dir, const std::string& rel);

// Where kernel sources are: $KBISECT_KERNEL_DIR, else <exe>/../share/kbisect/kernels, else the
// source tree's kernels/ (compiled in).
std::string kernel_dir();

// The one toolchain-identity hasher: sets tc.identity to the hash of a preamble every backend shares
// (format version, backend, kind, target, flags, environment) followed by what `add_own` adds (the
// compiler binaries, an in-process library, version text). Compile-cache keys are built on it.
void identify_toolchain(Toolchain& tc, const std::function<void(Hasher&)>& add_own);
// SHA-256 of a file with symlinks resolved (the path itself when it cannot be resolved).
std::string sha256_resolved(const std::string& path);

// Default identity material shared by backends (see Backend::identify): the compiler and tools by
// content, then the output of version_argv (its first line becomes tc.version_text).
void identify_compiler_binary(Toolchain& tc, const std::vector<std::string>& version_argv);

// The Artifact of a finished compile of req: everything but the code hash, size, metrics and cache
// fields; the log is kept to its last req.log_limit bytes.
Artifact make_artifact(const CompileRequest& req, const std::string& binary_path, const std::string& entry,
                       double compile_s, const std::string& log);

// -DKB_<name>=<value> for each parameter, in name order.
std::vector<std::string> param_defines(const Params& params);
// -DKB_DTYPE_F32=1 / -DKB_DTYPE_F16=1 / -DKB_DTYPE_BF16=1
std::string dtype_define(DType d);

}  // namespace kb
