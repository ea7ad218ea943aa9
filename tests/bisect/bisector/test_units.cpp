// The bisector's pure parts: strategy (midpoints, skips, weights), the journal, config errors.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/journal.h"
#include "bisect/report.h"
#include "bisect/strategy.h"
#include "tests/common/bisect_fixture.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::cpu_toolchain;
using kbtest::GitRepo;

using kbtest::write_tmp;

TEST(Strategy, MidpointsSkipsAndAmbiguity) {
  Strategy s(9);  // 0 good .. 8 bad
  ASSERT_EQ(s.next(), 4);
  s.record(4, Side::skip);
  const int nb = *s.next();
  EXPECT_TRUE(nb == 3 || nb == 5) << nb;  // a neighbour of the skipped midpoint
  s.record(nb, Side::good);
  while (auto n = s.next()) s.record(*n, *n < 6 ? Side::good : Side::bad);
  EXPECT_TRUE(s.found());
  EXPECT_EQ(s.hi(), 6);

  Strategy a(5);
  a.record(2, Side::skip);
  a.record(3, Side::skip);
  a.record(1, Side::good);
  EXPECT_FALSE(a.next().has_value());
  EXPECT_FALSE(a.found());
  EXPECT_EQ(a.candidates(), (std::vector<int>{2, 3, 4}));
  EXPECT_THROW(a.record(1, Side::bad), std::logic_error);
}

TEST(Strategy, WeightsMoveTheSplit) {
  std::vector<double> w(11, 1.0);
  for (int i = 8; i <= 10; ++i) w[size_t(i)] = 20;  // almost all prior mass near the end
  Strategy s(11, w);
  EXPECT_GE(*s.next(), 8);
}

TEST(Journal, TornLastLineIsDroppedAndResumeIndexes) {
  const std::string d = kb::temp_dir("kb-journal");
  const std::string p = d + "/journal.jsonl";
  {
    Journal j(p, false);
    j.append({{"ev", "start"}, {"shas", {"a", "b"}}});
    j.append({{"ev", "build_end"}, {"sha", "a"}, {"probe", {{"ok", true}}}, {"wall_s", 1.5}});
  }
  {
    std::ofstream f(p, std::ios::app);
    f << "{\"ev\": \"measure\", \"key\": \"repro";  // killed mid-write
  }
  EXPECT_THROW(Journal(p, false), kb::InputError);
  Journal j(p, true);
  EXPECT_EQ(j.events().size(), 2u);
  EXPECT_NE(j.probe("a"), nullptr);
  EXPECT_EQ(j.measurement("reproduce"), nullptr);
  EXPECT_DOUBLE_EQ(j.replayed_wall_s(), 1.5);
  j.append({{"ev", "decision"}, {"key", "step:x"}});
  EXPECT_EQ(read_journal(p).size(), 3u);
  kb::remove_tree(d);
}

TEST(Config, ErrorsNameFileLineAndField) {
  GitRepo r;
  r.commit({{"tc.yaml", cpu_toolchain("-O2")}}, "init");
  const std::string base = bisect_config(r, "HEAD", "HEAD", "{in_tree: tc.yaml}", "time", "0.5%");
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    const std::string p = write_tmp(r, text, "c.yaml");
    try {
      load_bisect_config(p);
      ADD_FAILURE() << "no error for: " << needle;
    } catch (const kb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("c.yaml"), std::string::npos) << e.what();
    }
  };
  expect_error(base + "colour: red\n", "unknown field 'colour'");
  expect_error(base + "first_parent: maybe\n", "first_parent");
  expect_error(std::string(base).replace(base.find("measure: {"), 10, "measure: {block_rounds: 1, "),
               "'measure.block_rounds' = '1' must be 0 (one load) or an integer in 2..4096");
  {
    const auto dc = load_bisect_config(write_tmp(r, base, "c.yaml"));
    EXPECT_EQ(dc.measure.placement, "process");  // the default: a worker per block
    EXPECT_EQ(dc.measure.block_rounds, 4);
    // No measure section at all: the same defaults.
    std::string bare = base;
    const auto at = bare.find("measure: {");
    bare.erase(at, bare.find('\n', at) - at + 1);
    const auto nc = load_bisect_config(write_tmp(r, bare, "c.yaml"));
    EXPECT_EQ(nc.measure.placement, "process");
    EXPECT_EQ(nc.measure.block_rounds, 4);
  }
  expect_error(std::string(base).replace(base.find("measure: {"), 10, "measure: {placement: elsewhere, "),
               "'measure.placement' = 'elsewhere' must be loads or process");
  const std::string loads8 = std::string(base).replace(base.find("measure: {"), 10,
                                                       "measure: {placement: loads, block_rounds: 8, ");
  const auto lc = load_bisect_config(write_tmp(r, loads8, "c.yaml"));
  EXPECT_EQ(lc.measure.placement, "loads");
  EXPECT_EQ(lc.measure.block_rounds, 8);  // an explicit value
  expect_error(std::string(base).replace(base.find("metric: time"), 12, "metric: speed"), "metric 'speed'");
  expect_error(std::string(base).replace(base.find("threshold: 0.5%"), 15, "threshold: lots"), "threshold");
  expect_error(std::string(base).replace(base.find("{in_tree: tc.yaml}"), 18, "{build: {command: make}}"),
               "missing field 'toolchain'");
  // Line and column of the offending node.
  try {
    load_bisect_config(write_tmp(r, std::string(base).replace(base.find("max_builds: 20"), 14, "max_builds: -3"), "c.yaml"));
    ADD_FAILURE();
  } catch (const kb::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("budgets.max_builds"), std::string::npos) << e.what();
  }
}

// scheduler / builders: Slurm builds need provider.build, building ahead needs Slurm; the command line's
// spelling is checked the same way and names its flag.
TEST(Config, SchedulerAndBuilders) {
  GitRepo r;
  r.commit({{"tc.yaml", cpu_toolchain("-O2")}}, "init");
  const std::string build = "{build: {command: make, toolchain: {name: t, backend: cpu, kind: clang, compiler: '{out}/cc'}}}";
  const std::string slurm_build = "{build: {command: make, toolchain: {name: t, backend: cpu, kind: clang, compiler: "
                                  "'{out}/cc'}, slurm: {partition: build}}}";
  auto load = [&](const std::string& provider, const std::string& extra) {
    return load_bisect_config(write_tmp(r, bisect_config(r, "HEAD", "HEAD", provider, "time", "0.5%", extra), "c.yaml"));
  };
  auto error_of = [&](const std::string& provider, const std::string& extra) -> std::string {
    try {
      load(provider, extra);
    } catch (const kb::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(load(build, "").scheduler, "local");
  EXPECT_EQ(load(slurm_build, "").scheduler, "slurm");  // provider.build.slurm alone means Slurm
  const auto c = load(build, "scheduler: slurm\nbuilders: 8\n");
  EXPECT_EQ(c.scheduler, "slurm");
  EXPECT_EQ(c.builders, 8);
  ASSERT_TRUE(c.provider.slurm.has_value());  // the cluster's default partition and limits
  EXPECT_EQ(c.provider.slurm->partition, "");
  EXPECT_EQ(load(slurm_build, "builders: 4\n").provider.slurm->partition, "build");
  std::string e = error_of("{in_tree: tc.yaml}", "scheduler: slurm\n");
  EXPECT_NE(e.find("c.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("'scheduler' = 'slurm' needs provider.build"), std::string::npos) << e;
  e = error_of(build, "builders: 4\n");
  EXPECT_NE(e.find("'builders' = '4' needs scheduler slurm"), std::string::npos) << e;
  e = error_of(build, "scheduler: pbs\n");
  EXPECT_NE(e.find("'scheduler' = 'pbs' is not local or slurm"), std::string::npos) << e;
  e = error_of(slurm_build, "scheduler: local\n");
  EXPECT_NE(e.find("provider.build.slurm asks for Slurm builds"), std::string::npos) << e;
  e = error_of(build, "scheduler: slurm\nbuilders: 65\n");
  EXPECT_NE(e.find("'builders' = '65' must be 1 to 64"), std::string::npos) << e;
  // The command line: --builders needs Slurm; --scheduler slurm then --builders; --scheduler local
  // overrides a Slurm config (its options and builders dropped).
  auto cli = load(build, "");
  try {
    set_builders(cli, 4, "--builders");
    ADD_FAILURE();
  } catch (const kb::InputError& x) {
    EXPECT_NE(std::string(x.what()).find("--builders = '4' needs scheduler slurm"), std::string::npos) << x.what();
  }
  set_scheduler(cli, "slurm", "--scheduler", true);
  set_builders(cli, 4, "--builders");
  EXPECT_EQ(cli.builders, 4);
  set_scheduler(cli, "local", "--scheduler", true);
  EXPECT_EQ(cli.scheduler, "local");
  EXPECT_EQ(cli.builders, 1);
  EXPECT_FALSE(cli.provider.slurm.has_value());
}

// ---- (1) runtime effect: a commit that switches -O3 to -O0 --------------------------------------
