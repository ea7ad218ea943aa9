// RealLab: the Lab (bisect/oracle.h) that builds the toolchain at a commit (the provider), compiles the
// cases with it (the compile cache), and times the commits' executables interleaved (harness/measure).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cache.h"
#include "bisect/builds.h"
#include "bisect/config.h"
#include "bisect/oracle.h"
#include "bisect/provider.h"
#include "bisect/run_job.h"
#include "harness/reference.h"
#include "harness/sweep.h"

namespace kb::bisect {

// probe() may be called from several threads at once (parallel rounds): the toolchains are fetched or
// built concurrently (the provider builds each commit in its own worktree and cache directory), the
// compiles and everything else run one at a time. With builders > 1 the builds go through a BuildPool
// (bisect/builds.h) that builds ahead of the loop's questions.
class RealLab : public Lab {
 public:
  // `workdir`: where run jobs keep their scripts and output (WORKDIR/slurm/runs), with measure.slurm.
  RealLab(const BisectConfig& cfg, Provider& provider, std::string workdir = "");
  ~RealLab() override;
  Probe probe(const std::string& sha) override;
  Measured measure(const std::vector<std::string>& shas, const MeasureAsk& ask, const RoundsStop& stop) override;
  void want(const std::vector<std::string>& needs, const std::vector<std::string>& ahead,
            const std::vector<std::string>& useless) override;
  bool ready(const std::string& sha) override;
  std::vector<nlohmann::json> build_events() override;
  void stop_builds() override;
  void reference(const std::string& sha) override { reference_sha_ = sha; }
  // Expensive samples (an external metric): each run of the command on a thread of its own, locally or as a
  // Slurm job (measure.slurm; bisect/run_job.h).
  int start_run(const std::string& sha, int ordinal) override;
  RunDone wait_run() override { return runs_.wait(); }
  void cancel_runs() override { runs_.cancel(); }

 private:
  struct Loaded;
  Loaded& load(const std::string& sha, Probe* probe_out, const ToolchainAtCommit* fetched = nullptr);
  // Parses the cases with the commit's toolchain and compiles (or prepares to run) each one; a failure
  // leaves the probe not ok with its reason.
  void prepare(Loaded& L, const std::string& sha, const ToolchainAtCommit& tc);
  // One case of a probe; "" when added, else why the commit cannot be used.
  std::string add_run_case(Loaded& L, const std::string& key, const PlannedCase& pc);
  std::string add_compiled_case(Loaded& L, const std::string& key, const PlannedCase& pc);
  // Timed metrics: the loaded executables, one load per commit or fresh loads per block.
  Measured measure_loaded(const std::vector<Loaded*>& ls, const MeasureAsk& ask, const RoundsStop& stop);
  std::mutex mu_;
  const BisectConfig& cfg_;
  Provider& provider_;
  CompileCache cache_;
  ReferenceCache refs_;
  std::map<std::string, std::unique_ptr<Loaded>> loaded_;
  std::vector<std::string> lru_;
  size_t keep_ = 6;  // commits kept loaded (at least those of the current measurement)
  std::unique_ptr<BuildPool> pool_;  // builders > 1: builds ahead as Slurm jobs
  // Users' kernels are checked against the first commit that runs them: the reference commit is loaded
  // before any other (when the config has user kernels and the metric runs the cases).
  std::string reference_sha_;
  bool user_kernels_ = false;
  std::string workdir_;
  RunPool runs_;  // last: its destructor joins the runs' threads, which use the members above
};

}  // namespace kb::bisect
