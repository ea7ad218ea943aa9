// The local scheduler: the shards as processes on this machine, at most `jobs` at a time.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "nightly/context.h"

namespace kb::nightly {

using json = nlohmann::json;

namespace {

// Runs shard i (1-based), writes RUN/shard-I.log; its entry of RUN/shards.json.
json run_one_shard(const NightlyConfig& cfg, const Plan& plan, int i) {
  RunOptions ro;
  ro.timeout_s = cfg.shard_timeout_s;
  json st = {{"shard", fmt::format("{}/{}", i, plan.shards)}};
  try {
    RunResult r = run_process(shard_argv(plan, i), ro);
    write_file_atomic(fmt::format("{}/shard-{}.log", plan.run_dir, i), r.out + r.err);
    st["exit_code"] = r.exit_code;
    st["status"] = r.status_text();
    st["ok"] = r.ok();
    st["wall_s"] = r.wall_s;
    if (!r.ok()) st["stderr_tail"] = tail(r.err, 1500);
  } catch (const Error& e) {
    st["ok"] = false;
    st["status"] = e.what();
  }
  return st;
}

}  // namespace

void run_shards_local(const NightlyConfig& cfg, const Plan& plan, int jobs, const Log& log) {
  const int n = plan.shards;
  std::vector<json> status(size_t(n), json::object());
  std::atomic<int> next{1};
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      const int i = next++;
      if (i > n) return;
      {
        std::lock_guard<std::mutex> lk(mu);
        say(log, fmt::format("shard {}/{}: {}", i, n, argv_to_display(shard_argv(plan, i))));
      }
      json st = run_one_shard(cfg, plan, i);
      std::lock_guard<std::mutex> lk(mu);
      say(log, fmt::format("shard {}/{}: {}", i, n, st["status"].get<std::string>()));
      status[size_t(i - 1)] = st;
    }
  };
  std::vector<std::thread> pool;
  for (int k = 0; k < std::max(1, std::min(jobs, n)); ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  write_file_atomic(plan.run_dir + "/shards.json", json(status).dump(2) + "\n");
}

}  // namespace kb::nightly
