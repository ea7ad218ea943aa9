// CPU backend: a kernel source -> shared object (host compiler of the toolchain under test), loaded
// with dlopen(RTLD_LOCAL) so several builds of one kernel live in one process.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/elf.h"
#include "harness/error.h"
#include "harness/process.h"

#include "kernels/cpu/kb_cpu_kernel.h"

namespace kb {

namespace {

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);  // inputs are already rounded to bf16 by the harness
}

size_t last_level_cache_bytes() {
  long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (s <= 0) s = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (s <= 0) s = 32L << 20;
  return size_t(s);
}

class CpuExecutable : public Executable {
 public:
  CpuExecutable(const Artifact& art) : art_(art) {
    handle_ = dlopen(art.binary_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw Error(fmt::format("dlopen {}: {}", art.binary_path, dlerror()));
    fn_ = reinterpret_cast<int (*)(const kb_gemm_args*)>(dlsym(handle_, art.entry.c_str()));
    if (!fn_) {
      dlclose(handle_);
      throw Error(fmt::format("{}: entry symbol '{}' not found", art.binary_path, art.entry));
    }
  }
  ~CpuExecutable() override {
    if (handle_) dlclose(handle_);
  }

  void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) override {
    shape_ = shape;
    if (art_.dtype == DType::bf16) {
      a16_.resize(A.size());
      b16_.resize(B.size());
      for (size_t i = 0; i < A.size(); ++i) a16_[i] = f32_to_bf16_bits(A[i]);
      for (size_t i = 0; i < B.size(); ++i) b16_[i] = f32_to_bf16_bits(B[i]);
      args_.A = a16_.data();
      args_.B = b16_.data();
    } else {
      a32_ = A;
      b32_ = B;
      args_.A = a32_.data();
      args_.B = b32_.data();
    }
    c_.assign(size_t(shape.M * shape.N), std::nanf(""));
    args_.C = c_.data();
    args_.M = shape.M;
    args_.N = shape.N;
    args_.K = shape.K;
    probe();
  }

  TimedSample run(int batch) override {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) {
      if (int rc = fn_(&args_)) throw Error(fmt::format("kernel {} returned {}", art_.kernel, rc));
    }
    auto t1 = std::chrono::steady_clock::now();
    TimedSample s;
    s.seconds = std::chrono::duration<double>(t1 - t0).count() / batch;
    return s;
  }

  void flush_caches() override {
    if (flush_.empty()) flush_.assign(2 * last_level_cache_bytes() / sizeof(uint64_t), 1);
    uint64_t acc = 0;
    for (size_t i = 0; i < flush_.size(); i += 8) {
      flush_[i] += acc;
      acc += flush_[i];
    }
    sink_ = acc;
  }

  std::vector<float> result() override { return c_; }
  std::string clock_name() const override { return "steady_clock"; }

 private:
  // Runs the kernel once in a forked child first, so a kernel that crashes or hangs fails its case
  // (with the signal) instead of taking the whole sweep down.
  void probe() {
    pid_t pid = fork();
    if (pid < 0) throw EnvError(fmt::format("fork failed: {}", strerror(errno)));
    if (pid == 0) {
      alarm(120);
      int rc = fn_(&args_);
      _exit(rc == 0 ? 0 : 3);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      throw Error(sig == SIGALRM ? std::string("kernel hung (no return within 120 s)")
                                 : fmt::format("kernel crashed: signal {} ({})", sig, strsignal(sig)));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
      throw Error(fmt::format("kernel rejected shape {}", shape_.str()));
  }

  Artifact art_;
  void* handle_ = nullptr;
  int (*fn_)(const kb_gemm_args*) = nullptr;
  Shape shape_;
  kb_gemm_args args_{};
  std::vector<float> a32_, b32_, c_;
  std::vector<uint16_t> a16_, b16_;
  std::vector<uint64_t> flush_;
  volatile uint64_t sink_ = 0;
};

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Availability available() override { return {true, ""}; }
  const std::vector<KernelDecl>& kernels() const override { return cpu_kernels(); }
  std::vector<std::string> kinds() const override { return {"gcc", "clang"}; }

  std::vector<Toolchain> presets() const override {
    std::vector<Toolchain> out;
    auto add = [&](const std::string& name, const std::string& kind, const std::string& prog) {
      if (which(prog).empty()) return;
      Toolchain t;
      t.name = name;
      t.backend = "cpu";
      t.kind = kind;
      t.compiler = prog;
      t.flags = {"-O3", "-march=native"};
      t.origin = "preset";
      t.description = prog + " -O3 -march=native";
      out.push_back(t);
    };
    add("g++", "gcc", "g++");
    for (int v : {14, 15, 16, 17, 18, 19, 20}) add(fmt::format("clang-{}", v), "clang", fmt::format("clang++-{}", v));
    return out;
  }

  Artifact compile(const CompileRequest& req) override {
    const auto& k = *req.kernel;
    const auto& tc = *req.toolchain;
    if (auto why = k.check_params ? k.check_params(req.params, req.dtype, tc.target) : std::nullopt)
      throw InputError(fmt::format("{}[{}]: {}", k.name, req.params.str(), *why));
    std::string out = req.out_dir + "/kernel.so";
    std::vector<std::string> argv = {tc.compiler, "-std=c++17", "-shared", "-fPIC", "-pthread",
                                     "-I" + req.kernel_dir, "-I" + req.kernel_dir + "/cpu"};
    for (const auto& [n, v] : req.params.values()) argv.push_back(fmt::format("-DKB_{}={}", n, to_string(v)));
    argv.push_back(req.dtype == DType::bf16 ? "-DKB_DTYPE_BF16=1" : "-DKB_DTYPE_F32=1");
    for (const auto& f : tc.flags) argv.push_back(f);
    argv.insert(argv.end(), {"-o", out, req.kernel_dir + "/" + k.source});
    RunOptions o;
    o.timeout_s = req.timeout_s;
    o.env_set = tc.env;
    auto r = run_process(argv, o);
    std::string log = r.out + r.err;
    if (!r.ok())
      throw CompileError(fmt::format("{} failed ({}) compiling {}", tc.name, r.status_text(), k.source), tail(log));
    Artifact a;
    a.kernel = k.name;
    a.backend = "cpu";
    a.params = req.params;
    a.dtype = req.dtype;
    a.toolchain = tc.name;
    a.toolchain_identity = tc.identity;
    a.target = tc.target;
    a.binary_path = out;
    a.entry = "kb_gemm";
    a.compile_s = r.wall_s;
    a.log = tail(log, req.log_limit);
    auto elf = ElfFile::open(out);
    auto is_text = [](const ElfSection& s) { return s.name == ".text"; };
    a.code_hash = elf.hash_sections(is_text);
    a.code_bytes = int64_t(elf.total_size(is_text));
    for (const auto& s : elf.symbols())
      if (s.name == a.entry) a.metrics["entry_bytes"] = double(s.size);
    return a;
  }

  std::unique_ptr<Executable> load(const Artifact& art) override { return std::make_unique<CpuExecutable>(art); }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kb
