#include "bisect/provider.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "bisect/build_job.h"
#include "bisect/slurm.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

namespace kb::bisect {

namespace fs = std::filesystem;
using json = nlohmann::json;
using git::short_sha;

std::string toolchain_to_yaml(const Toolchain& tc) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << tc.name;
  e << YAML::Key << "backend" << YAML::Value << YAML::DoubleQuoted << tc.backend;
  e << YAML::Key << "kind" << YAML::Value << YAML::DoubleQuoted << tc.kind;
  if (!tc.compiler.empty()) e << YAML::Key << "compiler" << YAML::Value << YAML::DoubleQuoted << tc.compiler;
  e << YAML::Key << "flags" << YAML::Value << YAML::BeginSeq;
  for (const auto& f : tc.flags) e << YAML::DoubleQuoted << f;
  e << YAML::EndSeq;
  if (!tc.target.empty()) e << YAML::Key << "target" << YAML::Value << YAML::DoubleQuoted << tc.target;
  for (const auto* m : {&tc.tools, &tc.env}) {
    if (m->empty()) continue;
    e << YAML::Key << (m == &tc.tools ? "tools" : "env") << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : *m) e << YAML::Key << YAML::DoubleQuoted << k << YAML::Value << YAML::DoubleQuoted << v;
    e << YAML::EndMap;
  }
  if (!tc.description.empty()) e << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << tc.description;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

Provider::Provider(const BisectConfig& cfg, const git::Repo& repo, std::string workdir)
    : cfg_(cfg), repo_(repo), workdir_(std::move(workdir)) {}

namespace {
std::string dir_for(const std::string& workdir, const std::string& sha) { return workdir + "/toolchains/" + sha; }

// A commit-level failure, kept in the commit's cache directory so that a later get() does not retry it;
// `full`: with the build time and log tail.
ToolchainAtCommit failed(const std::string& d, ToolchainAtCommit r, const std::string& reason, bool full) {
  make_dirs(d);
  r.ok = false;
  r.reason = reason;
  json j = {{"reason", r.reason}};
  if (full) {
    j["build_s"] = r.build_s;
    j["log_tail"] = r.log_tail;
  }
  write_file_atomic(d + "/failed.json", j.dump(2) + "\n");
  return r;
}

}  // namespace

bool Provider::cached(const std::string& sha) const {
  const std::string d = dir_for(workdir_, sha);
  return file_exists(d + "/toolchain.yaml") || file_exists(d + "/failed.json");
}

ToolchainAtCommit Provider::finish(const std::string& sha, const std::string& yaml_text, const std::string& origin,
                                   const std::map<std::string, std::string>& vars, ToolchainAtCommit r) {
  const std::string d = dir_for(workdir_, sha);
  make_dirs(d);
  auto fail = [&](const std::string& why) { return failed(d, r, why, true); };
  std::vector<Toolchain> tcs;
  try {
    tcs = parse_toolchains(yaml_text, origin, vars);
  } catch (const InputError& e) {
    return fail(fmt::format("toolchain spec at {}: {}", short_sha(sha), e.what()));
  }
  const Toolchain* pick = nullptr;
  if (cfg_.provider.name.empty()) {
    if (tcs.size() != 1)
      return fail(fmt::format("{} holds {} toolchains; name one with provider name:", origin, tcs.size()));
    pick = &tcs[0];
  } else {
    for (const auto& t : tcs)
      if (t.name == cfg_.provider.name) pick = &t;
    if (!pick) return fail(fmt::format("{}: no toolchain named '{}'", origin, cfg_.provider.name));
  }
  Toolchain tc = *pick;
  tc.description = fmt::format("{} at {}", tc.name, sha);
  r.ok = true;
  r.toolchain_file = d + "/toolchain.yaml";
  write_file_atomic(r.toolchain_file, toolchain_to_yaml(tc));
  return r;
}


ToolchainAtCommit Provider::get(const std::string& sha, const std::atomic<bool>* cancel) {
  const std::string d = dir_for(workdir_, sha);
  ToolchainAtCommit r;
  if (file_exists(d + "/toolchain.yaml")) {
    r.ok = true;
    r.toolchain_file = d + "/toolchain.yaml";
    return r;
  }
  if (file_exists(d + "/failed.json")) {
    json j = json::parse(read_file(d + "/failed.json"));
    r.reason = j.value("reason", std::string("failed"));
    r.build_s = j.value("build_s", 0.0);
    r.log_tail = j.value("log_tail", std::string());
    return r;
  }
  std::map<std::string, std::string> vars = {{"sha", sha}, {"repo", repo_.dir()}};
  switch (cfg_.provider.kind) {
    case ProviderSpec::Kind::in_tree: return get_in_tree(sha, vars);
    case ProviderSpec::Kind::prebuilt: return get_prebuilt(sha, vars);
    case ProviderSpec::Kind::build: return get_built(sha, vars, cancel);
  }
  return r;
}

ToolchainAtCommit Provider::get_in_tree(const std::string& sha, std::map<std::string, std::string>& vars) {
  const ProviderSpec& p = cfg_.provider;
  const std::string d = dir_for(workdir_, sha);
  ToolchainAtCommit r;
  std::string text;
  try {
    text = repo_.show_file(sha, p.path);
  } catch (const InputError& e) {
    return failed(d, r, fmt::format("no toolchain file '{}' at {}", p.path, short_sha(sha)), false);
  }
  make_dirs(d);
  write_file_atomic(d + "/in-tree.yaml", text);
  if (text.find("{dir}") != std::string::npos) {
    // The spec names files beside it ({dir}: a wrapper script, a flags file): export the spec's
    // directory as it is at this commit (git archive, no checkout) and point {dir} there.
    const std::string sub = fs::path(p.path).parent_path().string();
    const std::string tree = d + "/tree", tar = d + "/tree.tar";
    std::vector<std::string> args = {"archive", "--format=tar", "-o", tar, sha};
    if (!sub.empty()) args.push_back(sub);
    RunResult ar = repo_.run(args);
    if (ar.ok()) {
      make_dirs(tree);
      ar = run_process({"tar", "-xf", tar, "-C", tree}, {});
    }
    std::error_code ec;
    fs::remove(tar, ec);
    if (!ar.ok())
      return failed(d, r,
                    fmt::format("exporting '{}' at {} for {{dir}}: {}", sub.empty() ? "." : sub, short_sha(sha),
                                tail(ar.err, 300)),
                    false);
    vars["dir"] = fs::absolute(sub.empty() ? tree : tree + "/" + sub).string();
  }
  return finish(sha, text, fmt::format("{}:{}", short_sha(sha), p.path), vars, r);
}

ToolchainAtCommit Provider::get_prebuilt(const std::string& sha, std::map<std::string, std::string>& vars) {
  const ProviderSpec& p = cfg_.provider;
  ToolchainAtCommit r;
  std::string path = p.path;
  for (size_t at; (at = path.find("{sha}")) != std::string::npos;) path.replace(at, 5, sha);
  if (!fs::exists(path))
    return failed(dir_for(workdir_, sha), r, fmt::format("prebuilt toolchain not found: {}", path), false);
  if (p.toolchain_yaml.empty()) {
    vars["dir"] = fs::absolute(path).parent_path().string();
    return finish(sha, read_file(path), path, vars, r);
  }
  vars["out"] = fs::absolute(path).string();
  return finish(sha, p.toolchain_yaml, p.toolchain_origin, vars, r);
}

namespace {
// One process's git worktree bookkeeping at a time (the builds themselves run concurrently).
std::mutex& worktree_mu() {
  static std::mutex mu;
  return mu;
}

// In a store's build directory once the build succeeded: any run naming the store takes it as it is.
constexpr const char* kBuiltMarker = ".kbisect-built.json";

// An exclusive flock on a store's per-commit lock file, held while this process builds that commit into the
// store (Linux flock also locks across NFSv4 clients), released when it ends or the process dies. Waits while
// another run holds it, and gives up (held() false) when `cancel` turns true.
class StoreLock {
 public:
  StoreLock(const std::string& path, const std::atomic<bool>* cancel) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw EnvError(fmt::format("cannot open the build store's lock {}: {}", path, std::strerror(errno)));
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR)
        throw EnvError(fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
      if (cancel && cancel->load()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    held_ = true;
  }
  ~StoreLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};
}  // namespace

ToolchainAtCommit Provider::get_built(const std::string& sha, std::map<std::string, std::string>& vars,
                                      const std::atomic<bool>* cancel) {
  const ProviderSpec& p = cfg_.provider;
  ToolchainAtCommit r;
  const std::string wt = workdir_ + "/worktrees/" + sha.substr(0, 16);
  // With a store, the build, its Slurm job's files and the job's name belong to the store, not to this run:
  // any run naming the store takes a finished build, waits for one in progress, adopts its job.
  const bool shared = !p.store.empty();
  const std::string out = shared ? p.store + "/" + sha : workdir_ + "/builds/" + sha;
  const std::string job_dir = shared ? p.store + "/.slurm" : workdir_ + "/slurm";
  const std::string job_key = shared ? p.store : workdir_;
  std::optional<StoreLock> lock;
  if (shared) {
    auto finished = [&] { return file_exists(out + "/" + kBuiltMarker); };
    if (!finished()) {
      make_dirs(p.store + "/.locks");
      lock.emplace(p.store + "/.locks/" + sha + ".lock", cancel);
      if (!lock->held()) {
        r.cancelled = true;
        r.reason = "build cancelled while another run was building it into the store";
        return r;
      }
    }
    if (finished()) {  // built by another run (or an earlier one): nothing to build
      vars["out"] = out;
      return finish(sha, p.toolchain_yaml, p.toolchain_origin, vars, r);
    }
    // A failed exit status a job left in the store is not adopted by a later run (the failure may have
    // been the node's, or a build command since fixed): with no job of it running, the commit is built
    // again. A status of 0 (the run that built it died before marking it) is taken as it is.
    if (p.slurm) {
      const std::string rc = build_job_status(job_dir, sha);
      if (!rc.empty() && rc != "0" && slurm::jobs_named(build_job_name(sha, job_key)).empty())
        forget_build_job_status(job_dir, sha);
    }
  }
  make_dirs(workdir_ + "/worktrees");
  // A Slurm build job a killed session left (bisect/build_job.h) is adopted below; it keeps its worktree
  // (this run's, or with a store possibly another run's).
  const bool left = p.slurm && (shared || fs::exists(wt)) && build_job_left(sha, job_key, job_dir);
  if (!left) {
    // Concurrent builds (parallel: P) share the repository's worktree list: a prune beside another build's
    // `worktree add` removed that worktree's half-written entry ("failed to read .git/worktrees/.../commondir").
    std::lock_guard<std::mutex> lock(worktree_mu());
    repo_.run({"worktree", "prune"});
    if (fs::exists(wt)) {
      repo_.run({"worktree", "remove", "--force", wt});
      remove_tree(wt);
    }
    make_dirs(out);
    repo_.worktree_add(wt, sha);
  }
  std::string reason;  // empty: built
  if (p.slurm) {  // a Slurm job on the build partition (bisect/build_job.h)
    const BuildJobResult jr = run_build_job(p, sha, wt, out, job_key, job_dir, cancel);
    r.build_s = jr.wall_s;
    r.log_tail = jr.log;
    r.cancelled = jr.cancelled;
    if (!jr.ok) reason = jr.reason;
  } else {
    RunOptions o;
    o.timeout_s = p.timeout_s;
    o.cwd = wt;
    o.env_set = {{"KBISECT_COMMIT", sha}, {"KBISECT_WORKTREE", wt}, {"KBISECT_OUT", out}};
    // The user's own build command is the one thing run through a shell; commit data reaches it only
    // through the environment above.
    RunResult rr = run_process({"/bin/sh", "-c", p.command}, o);
    r.build_s = rr.wall_s;
    r.log_tail = tail(rr.out + rr.err, 3000);
    if (!rr.ok()) {
      reason = rr.timed_out ? fmt::format("build timed out after {:g} s", p.timeout_s)
                            : fmt::format("build failed ({})", rr.status_text());
      if (!rr.timed_out && !rr.err.empty()) reason += ": " + tail(rr.err, 400);
    }
  }
  r.built = true;
  {
    std::lock_guard<std::mutex> lock(worktree_mu());
    try {
      repo_.worktree_remove(wt, true);
    } catch (const Error&) {
      remove_tree(wt);
      repo_.run({"worktree", "prune"});
    }
  }
  if (r.cancelled) {  // not a result: nothing cached, a later get() builds it again
    r.reason = reason;
    return r;
  }
  if (!reason.empty()) return failed(dir_for(workdir_, sha), r, reason, true);
  if (shared)
    write_file_atomic(out + "/" + kBuiltMarker, json{{"sha", sha}, {"build_s", r.build_s}, {"by", workdir_}}.dump() + "\n");
  vars["out"] = out;
  return finish(sha, p.toolchain_yaml, p.toolchain_origin, vars, r);
}

}  // namespace kb::bisect
