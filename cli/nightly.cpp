// kbisect nightly CONFIG --scheduler slurm|local: the nightly pipeline (nightly/nightly.h): plan tonight's
// compiler, run the sweep's shards (one sbatch --array job, or local processes), then the finish step
// (merge, history, compare, change points, alerts, auto-bisect, report).
// kbisect nightly-finish RUNDIR: the finish step alone (what the dependent Slurm job runs).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "nightly/nightly.h"
#include "bisect/slurm.h"

namespace kb::cli {
namespace {

struct Opts {
  std::string config, scheduler = "local", date;
  double wait_s = 0;
  int jobs = 0;
  bool quiet = false;
};

nightly::Log make_log(bool quiet) {
  if (quiet) return nullptr;
  return [](const std::string& s) { std::cerr << "nightly: " << s << "\n"; };
}

int print_finish(const nightly::FinishResult& fr) {
  std::cout << fmt::format("report: {}\nreport: {}\n{}\n", fr.report_md, fr.report_html, fr.summary);
  return exit_code_for(fr.outcome);
}

int run(const Opts& o) {
  if (o.scheduler != "local" && o.scheduler != "slurm")
    throw InputError(fmt::format("--scheduler '{}' must be slurm or local", o.scheduler));
  if (o.wait_s < 0) throw InputError(fmt::format("--wait-s {} must be >= 0", o.wait_s));
  if (o.jobs < 0) throw InputError(fmt::format("--jobs {} must be >= 1", o.jobs));
  const auto log = make_log(o.quiet);
  nightly::NightlyConfig cfg = nightly::load_nightly_config(o.config);
  const std::string date = o.date.empty() ? nightly::today_utc() : o.date;
  nightly::check_date(date);
  if (o.scheduler == "slurm") {
    std::string why;
    if (!slurm::available(&why)) throw EnvError("--scheduler slurm: " + why);
  }
  nightly::Plan plan = nightly::make_plan(cfg, date, o.scheduler, executable_path(), log);
  std::cout << fmt::format("plan: {}/plan.json\n", plan.run_dir);
  if (o.scheduler == "local") {
    nightly::run_shards_local(cfg, plan, o.jobs > 0 ? o.jobs : cfg.jobs, log);
    return print_finish(nightly::finish(plan.run_dir, log));
  }
  const nightly::Submission sub = nightly::submit_slurm(cfg, plan);
  std::cout << fmt::format("submitted: array job {} ({} shard(s)), finish job {} (afterany)\n", sub.array_job, plan.shards,
                           sub.finish_job);
  if (o.wait_s == 0) return kExitOk;
  if (!slurm::wait_gone({sub.array_job, sub.finish_job}, o.wait_s, cfg.slurm_poll_s))
    throw EnvError(fmt::format("timed out after {} s waiting for Slurm jobs {} and {} (still queued; left alone: the finish "
                               "job writes {}/report.md when it runs)",
                               o.wait_s, sub.array_job, sub.finish_job, plan.run_dir));
  const std::string nj = plan.run_dir + "/nightly.json";
  if (!file_exists(nj)) {
    const std::string out = plan.run_dir + "/slurm/finish.out";
    throw EnvError(fmt::format("finish job {} left the queue without writing {}{}", sub.finish_job, nj,
                               file_exists(out) ? "; its output ends with:\n" + tail(read_file(out), 1500) : ""));
  }
  const nlohmann::json j = nlohmann::json::parse(read_file(nj));
  nightly::FinishResult fr;
  fr.outcome = nightly::parse_outcome(j.value("outcome", "incomplete"));
  fr.summary = j.value("summary", "");
  fr.report_md = plan.run_dir + "/report.md";
  fr.report_html = plan.run_dir + "/report.html";
  fr.nightly_json = nj;
  return print_finish(fr);
}

Registrar reg("nightly", "Nightly pipeline: sharded sweep on Slurm or locally, history, alerts, auto-bisect, report",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("config", o->config, "nightly config YAML")->required();
                app->add_option("--scheduler", o->scheduler, "slurm (sbatch --array + a dependent finish job) or local")
                    ->default_val("local");
                app->add_option("--date", o->date, "nightly date (names ROOT/<date>; default today, UTC)");
                app->add_option("--wait-s", o->wait_s,
                                "slurm: wait up to N seconds for the jobs and return the nightly's exit code (0: submit and return)");
                app->add_option("--jobs", o->jobs, "local: shards at a time (default: the config's jobs, else 1)");
                app->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
                app->footer(
                    "Exit codes: 0 no alert (or submitted without --wait-s), 1 alerts, 2 bad input or an incomplete "
                    "nightly (a shard missing or failed), 3 environment missing (no Slurm, a wait timed out, the "
                    "finish job died).");
                return [o] { return run(*o); };
              });

struct FinishOpts {
  std::string run_dir;
  bool quiet = false;
};

Registrar reg_finish("nightly-finish",
                     "Finish a nightly run directory: merge shards, record history, compare, change points, alerts, "
                     "auto-bisect, report",
                     [](CLI::App* app) {
                       auto o = std::make_shared<FinishOpts>();
                       app->add_option("rundir", o->run_dir, "ROOT/<date> of a planned nightly")->required();
                       app->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
                       app->footer("Exit codes: 0 no alert, 1 alerts, 2 incomplete nightly or bad input, 3 environment missing.");
                       return [o] { return print_finish(nightly::finish(o->run_dir, make_log(o->quiet))); };
                     });

}  // namespace
}  // namespace kb::cli
