// The Slurm scheduler's side of the nightly: the batch scripts of the shard array and the finish step,
// and their submission (the driver of sbatch/squeue/scancel is nightly/slurm).
#include <fmt/format.h>

#include "core/fsutil.h"
#include "harness/results.h"
#include "nightly/context.h"
#include "bisect/slurm.h"

namespace kb::nightly {

using json = nlohmann::json;

namespace {

// RUN/slurm/shard.sh: the array index (0-based) + 1 is the shard; its exit status lands in shard-I.rc.
void write_shard_script(const Plan& plan, const std::string& path) {
  const std::string marker = "\x01";
  auto quote_with_index = [&](const std::string& word) {
    std::string out;
    size_t i = 0;
    for (;;) {
      size_t j = word.find(marker, i);
      const std::string part = word.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (!part.empty()) out += slurm::sh_quote(part);
      if (j == std::string::npos) break;
      out += "\"$I\"";
      i = j + marker.size();
    }
    return out.empty() ? std::string("''") : out;
  };
  std::string body = "I=$((SLURM_ARRAY_TASK_ID + 1))\n";
  std::string cmd;
  for (const auto& w : sweep_shard_argv(plan, marker)) cmd += (cmd.empty() ? "" : " ") + quote_with_index(w);
  body += cmd + "\nrc=$?\n";
  body += "printf '%s\\n' \"$rc\" > " + quote_with_index(plan.run_dir + "/shard-" + marker + ".rc") + "\n";
  body += "exit \"$rc\"\n";
  slurm::write_script(path, {}, body);
}

}  // namespace

Submission submit_slurm(const NightlyConfig& cfg, const Plan& plan) {
  const std::string sdir = plan.run_dir + "/slurm";
  make_dirs(sdir);
  write_shard_script(plan, sdir + "/shard.sh");
  slurm::write_exec_script(sdir + "/finish.sh", {plan.kbisect, "nightly-finish", plan.run_dir});

  Submission s;
  s.array_job = slurm::submit(slurm::sbatch_argv(cfg.slurm, "kbisect-" + plan.name, sdir + "/shard-%a.out",
                                                 fmt::format("0-{}", plan.shards - 1), ""),
                              sdir + "/shard.sh");
  slurm::SubmitOptions fo = cfg.slurm;
  if (!cfg.slurm_finish_time.empty()) fo.time = cfg.slurm_finish_time;
  try {
    s.finish_job = slurm::submit(slurm::sbatch_argv(fo, "kbisect-" + plan.name + "-finish", sdir + "/finish.out", "",
                                                    "afterany:" + s.array_job),
                                 sdir + "/finish.sh");
  } catch (...) {
    slurm::cancel(s.array_job);  // no shards without the step that reads them
    throw;
  }
  write_file_atomic(sdir + "/jobs.json",
                    json{{"array_job", s.array_job}, {"finish_job", s.finish_job}, {"submitted", now_iso8601()}}.dump(2) + "\n");
  return s;
}

}  // namespace kb::nightly
