// The toolchain at a commit: built in a git worktree (/bin/sh -c COMMAND, commit data in the environment,
// never in the command text), taken from a prebuilt location, or read from a toolchain YAML inside the
// repository at that commit. Results are cached by sha under WORKDIR/toolchains/<sha>/: a later call (or a
// resumed run) never builds the same commit again. With provider.build.store, a build goes to STORE/<sha>
// (its Slurm job's files to STORE/.slurm/, the job named after the store) and is marked finished there, so
// that every run naming the store — another bisection, tonight's nightly — takes it instead of building it
// again; a per-commit lock file (flock) makes a second run wanting the same commit wait for the first. Each result is a normalized one-toolchain YAML file that
// the sweep loader takes as a toolchain override.
#pragma once
#include <atomic>
#include <string>

#include "backends/toolchain.h"
#include "bisect/config.h"
#include "git/git.h"

namespace kb::bisect {

struct ToolchainAtCommit {
  bool ok = false;
  std::string reason;          // why not (build failed / timed out / missing prebuilt / bad in-tree spec)
  std::string toolchain_file;  // WORKDIR/toolchains/<sha>/toolchain.yaml when ok
  bool built = false;          // a build ran in this call (false: cached, prebuilt or in-tree)
  double build_s = 0;
  std::string log_tail;        // build output tail
  bool cancelled = false;      // the build was cancelled (not ok, nothing cached: a later get() builds it)
};

// A toolchain as a one-toolchain YAML document that parse_toolchains reads back identically.
std::string toolchain_to_yaml(const Toolchain& tc);

class Provider {
 public:
  Provider(const BisectConfig& cfg, const git::Repo& repo, std::string workdir);
  // Never throws for a commit-level failure (that is a skip); throws for environment problems. `cancel`
  // (may be null) cancels a Slurm build job while it is queued or running (bisect/build_job.h): the result
  // is then `cancelled` and nothing about the commit is cached.
  ToolchainAtCommit get(const std::string& sha, const std::atomic<bool>* cancel = nullptr);
  // True when a result for `sha` is already cached (a get() will not build).
  bool cached(const std::string& sha) const;

 private:
  // One provider kind each; vars: the substitutions for the toolchain spec ({sha}, {repo}, ...).
  ToolchainAtCommit get_in_tree(const std::string& sha, std::map<std::string, std::string>& vars);
  ToolchainAtCommit get_prebuilt(const std::string& sha, std::map<std::string, std::string>& vars);
  ToolchainAtCommit get_built(const std::string& sha, std::map<std::string, std::string>& vars,
                              const std::atomic<bool>* cancel);
  ToolchainAtCommit finish(const std::string& sha, const std::string& yaml_text, const std::string& origin,
                           const std::map<std::string, std::string>& vars, ToolchainAtCommit r);
  const BisectConfig& cfg_;
  const git::Repo& repo_;
  std::string workdir_;
};

}  // namespace kb::bisect
