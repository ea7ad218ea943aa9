// CPU backend: a kernel source -> shared object (host compiler of the toolchain under test), loaded
// with dlopen(RTLD_LOCAL) so several builds of one kernel live in one process.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/placement.h"
#include "backends/elf.h"
#include "backends/half_bits.h"
#include "core/error.h"
#include "core/process.h"

#include "kernels/cpu/kb_cpu_kernel.h"

namespace kb {

namespace fs = std::filesystem;

namespace {

constexpr size_t kOperandSkipPages = 1024;  // up to 4 MiB of address space after each operand array
constexpr size_t kCodeGapPages = 1 << 18;   // the code lands at a random page of a 1 GiB region
constexpr size_t kCodeSlotMargin = 2 << 20;  // the slot for the code: its file size and room for alignment
constexpr size_t kHeapGapPages = 256;       // up to 1 MiB of heap held before the kernel's scratch

std::atomic<bool> skip_crash_probe{false};

// A load's operand array in its own anonymous mapping, starting a random multiple of 64 bytes into it and
// followed by a random number of unused pages. A new mapping after the previous one was unmapped lands at the
// same address, so without the skipped pages every load would see the same virtual placement and the same
// 4 KiB aliasing between A, B and C; the skipped pages are never touched and cost nothing
// (backends/cpu/placement.h).
template <typename T>
class LoadArray {
 public:
  LoadArray() = default;
  LoadArray(const LoadArray&) = delete;
  LoadArray& operator=(const LoadArray&) = delete;
  ~LoadArray() { release(); }

  void assign(size_t n, T value) {
    release();
    const size_t page = page_bytes();
    const size_t offset = 64 * size_t(placement_draw(page / 64));
    // The skipped pages go after the data: a new mapping ends where the hole it takes ends.
    static FreshDraws skips(kOperandSkipPages + 1);
    len_ = offset + n * sizeof(T) + page * size_t(skips.draw());
    len_ = std::max<size_t>(len_, 1);  // an empty array still gets a (one-page) mapping
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw EnvError(fmt::format("mmap of {} bytes failed: {}", len_, strerror(errno)));
    base_ = m;
    data_ = reinterpret_cast<T*>(static_cast<char*>(m) + offset);
    n_ = n;
    for (size_t i = 0; i < n; ++i) data_[i] = value;
  }
  T* data() { return data_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  void release() {
    if (base_) munmap(base_, len_);
    base_ = nullptr;
    data_ = nullptr;
    n_ = 0;
  }
  void* base_ = nullptr;
  size_t len_ = 0;
  T* data_ = nullptr;
  size_t n_ = 0;
};

size_t last_level_cache_bytes() {
  long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (s <= 0) s = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (s <= 0) s = 32L << 20;
  return size_t(s);
}

class CpuExecutable : public Executable {
 public:
  CpuExecutable(const Artifact& art) : art_(art), heap_gap_(kHeapGapPages) {
    std::error_code ec;
    const auto bytes = fs::file_size(art.binary_path, ec);
    code_gap_ = CodeGap((ec ? 0 : size_t(bytes)) + kCodeSlotMargin, kCodeGapPages);
    handle_ = open_private_copy(art.binary_path);
    if (!handle_) handle_ = dlopen(art.binary_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw Error(fmt::format("dlopen {}: {}", art.binary_path, dlerror()));
    fn_ = reinterpret_cast<int (*)(const kb_gemm_args*)>(dlsym(handle_, art.entry.c_str()));
    if (!fn_) {
      dlclose(handle_);
      throw Error(fmt::format("{}: entry symbol '{}' not found", art.binary_path, art.entry));
    }
    code_gap_.release();
  }
  ~CpuExecutable() override {
    if (handle_) dlclose(handle_);
  }

  void prepare(const Shape& shape, const std::vector<float>& A, const std::vector<float>& B) override {
    shape_ = shape;
    if (art_.dtype == DType::bf16) {
      a16_.assign(A.size(), 0);
      b16_.assign(B.size(), 0);
      for (size_t i = 0; i < A.size(); ++i) a16_[i] = bf16_bits(A[i]);
      for (size_t i = 0; i < B.size(); ++i) b16_[i] = bf16_bits(B[i]);
      args_.A = a16_.data();
      args_.B = b16_.data();
    } else {
      a32_.assign(A.size(), 0.f);
      b32_.assign(B.size(), 0.f);
      std::copy(A.begin(), A.end(), a32_.data());
      std::copy(B.begin(), B.end(), b32_.data());
      args_.A = a32_.data();
      args_.B = b32_.data();
    }
    c_.assign(size_t(shape.M * shape.N), std::nanf(""));
    args_.C = c_.data();
    args_.M = shape.M;
    args_.N = shape.N;
    args_.K = shape.K;
    probe();
    placement_.entry = reinterpret_cast<uintptr_t>(fn_);
    placement_.a = reinterpret_cast<uintptr_t>(args_.A);
    placement_.b = reinterpret_cast<uintptr_t>(args_.B);
    placement_.c = reinterpret_cast<uintptr_t>(args_.C);
    void* next = std::malloc(64);  // where the kernel's next small allocation would start
    placement_.heap = reinterpret_cast<uintptr_t>(next);
    std::free(next);
  }

  const Placement& where() const { return placement_; }
  std::string placement() const override { return placement_.str(); }

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

  std::vector<float> result() override { return std::vector<float>(c_.data(), c_.data() + c_.size()); }
  std::string clock_name() const override { return "steady_clock"; }

 private:
  // Runs the kernel once in a forked child first, so a kernel that crashes or hangs fails its case
  // (with the signal) instead of taking the whole sweep down. Once per binary and shape in a process:
  // a reload of the same code (ab and bisect blocks reload for every block) skips it, because a fork
  // makes every writable page of this process copy-on-write and the next timed rounds would pay the
  // page faults (docs/statistics.md, "What a fresh load must renew").
  void probe() {
    if (skip_crash_probe) return;
    static std::mutex mu;
    static std::set<std::string> probed;
    const std::string key = art_.binary_path + "|" + art_.cache_key + "|" + art_.entry + "|" + shape_.str();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (probed.count(key)) return;
    }
    run_in_child();
    std::lock_guard<std::mutex> lock(mu);
    probed.insert(key);
  }

  void run_in_child() {
    pid_t pid = fork();
    if (pid < 0) throw EnvError(fmt::format("fork failed: {}", strerror(errno)));
    if (pid == 0) {
      // The kernel's own faults reach the parent as the signal they are: handlers this process installed
      // (a sanitizer's, a debugger helper's) would otherwise turn a SIGSEGV into their report and an abort.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &dfl, nullptr);
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

  // dlopen maps a file once per process (the same path again returns the same handle), so every load
  // opens a private copy, removed as soon as it is mapped: each load gets its own code pages. The copy
  // goes next to the object (a directory that allows loading code), else to the temp directory; where
  // neither works (read-only cache, noexec /tmp) the caller loads the object itself.
  static void* open_private_copy(const std::string& path) {
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    for (const fs::path& dir : {fs::path(path).parent_path(), tmp}) {
      if (dir.empty()) continue;
      std::string tmpl = (dir / "kb-load-XXXXXX.so").string();
      const int fd = mkstemps(tmpl.data(), 3);
      if (fd < 0) continue;
      close(fd);
      void* h = nullptr;
      if (fs::copy_file(path, tmpl, fs::copy_options::overwrite_existing, ec)) h = dlopen(tmpl.c_str(), RTLD_NOW | RTLD_LOCAL);
      fs::remove(tmpl, ec);
      if (h) return h;
    }
    return nullptr;
  }

  Artifact art_;
  HeapGap heap_gap_;
  CodeGap code_gap_;  // held while the code is mapped
  Placement placement_;
  void* handle_ = nullptr;
  int (*fn_)(const kb_gemm_args*) = nullptr;
  Shape shape_;
  kb_gemm_args args_{};
  LoadArray<float> a32_, b32_, c_;
  LoadArray<uint16_t> a16_, b16_;
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
    for (auto& d : param_defines(req.params)) argv.push_back(d);
    argv.push_back(dtype_define(req.dtype == DType::bf16 ? DType::bf16 : DType::f32));  // f16 builds as f32
    for (const auto& f : tc.flags) argv.push_back(f);
    argv.insert(argv.end(), {"-o", out, req.kernel_dir + "/" + k.source});
    RunOptions o;
    o.timeout_s = req.timeout_s;
    o.env_set = tc.env;
    auto r = run_process(argv, o);
    std::string log = r.out + r.err;
    if (!r.ok())
      throw CompileError(fmt::format("{} failed ({}) compiling {}", tc.name, r.status_text(), k.source), tail(log));
    Artifact a = make_artifact(req, out, "kb_gemm", r.wall_s, log);
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

std::optional<Placement> placement_of(const Executable& exe) {
  if (const auto* cpu = dynamic_cast<const CpuExecutable*>(&exe)) return cpu->where();
  return std::nullopt;
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

void cpu_skip_crash_probe(bool skip) { skip_crash_probe = skip; }

}  // namespace kb
