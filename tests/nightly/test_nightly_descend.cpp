// The nightly's auto-bisect descends into a pin bump (bisect.descend), as `kbisect bisect` does: the
// nightly's compiler is an outer repository whose build reads the flags of the inner commit named in
// pin.txt; between two nightlies one outer commit bumps the pin across an inner -O3 -> -O0 switch. The
// auto-bisect names the bump, then the inner commit. Real git repositories, CPU compiles and timings (an
// effect far beyond the 20% threshold), the local scheduler.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "nightly/nightly.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

using json = nlohmann::json;
using kbtest::GitRepo;

namespace {

const std::string kTiny = KBISECT_SOURCE_DIR "/tests/data/nightly/tiny.yaml";


std::string nightly_config(const std::string& root, const std::string& outer, const std::string& descend_repo) {
  return fmt::format(
      "name: descend-nightly\nsweep: {}\nshards: 2\noutput: {}\njobs: 2\ncompare: {{threshold: 50%}}\n"
      "compiler:\n  repo: {}\n  ref: main\n"
      "  provider: {{build: {{command: 'sh build.sh', timeout_s: 60, toolchain: {{name: outer, backend: cpu, kind: clang, "
      "compiler: '{{out}}/cc'}}}}}}\n"
      "bisect:\n  threshold: 20%\n  budgets: {{max_builds: 20, max_samples_per_step: 64}}\n"
      "  measure: {{min_samples: 8, max_step_s: 20, warmup_s: 0.01}}\n"
      "  descend: {{pin_file: pin.txt, repo: {}, provider: {{in_tree: tc.yaml}}}}\n",
      kTiny, root, outer, descend_repo);
}

std::string why(const kb::RunResult& r) { return r.status_text() + "\nstdout: " + r.out + "\nstderr: " + kb::tail(r.err, 3000); }

}  // namespace

TEST(NightlyDescend, ConfigErrorsNameTheField) {
  GitRepo inner, outer;
  outer.commit({{"build.sh", kbtest::pin_build_script(inner.path())}, {"pin.txt", "x\n"}}, "outer");
  const std::string path = outer.tmp() + "/nightly.yaml";
  const std::string ok = nightly_config(outer.tmp() + "/out", outer.path(), inner.path());
  const auto c = kb::nightly::parse_nightly_config(ok, path);
  ASSERT_EQ(c.bisect.passthrough.back().first, "descend");
  EXPECT_NE(c.bisect.passthrough.back().second.find(inner.path()), std::string::npos);
  auto expect_error = [&](const std::string& text, const std::vector<std::string>& needles) {
    try {
      kb::nightly::parse_nightly_config(text, path);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const kb::InputError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " lacks " << n;
    }
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = ok;
    return t.replace(t.find(from), from.size(), to);
  };
  const std::string at = path + ":15:";  // the descend line
  expect_error(edit("repo: " + inner.path(), "repo: nowhere"), {at, "bisect.descend", "descend.repo", "nowhere"});
  expect_error(edit("pin_file: pin.txt, ", ""), {at, "bisect.descend", "pin_file"});
  expect_error(edit("provider: {in_tree: tc.yaml}}", "provider: {in_tree: tc.yaml}, depth: 2}"), {at, "depth"});
  expect_error(ok.substr(0, ok.find("  descend:")) + "  descend: [pin.txt]\n", {at, "'bisect.descend' must be a mapping"});
}

TEST(NightlyDescend, AutoBisectDescendsIntoThePinBump) {
  GitRepo inner, outer;
  std::vector<std::string> in;
  in.push_back(inner.commit(kbtest::pin_inner_files("-O3 -march=x86-64-v3"), "inner good: -O3"));
  in.push_back(inner.commit({{"README", "docs\n"}}, "inner docs"));
  in.push_back(inner.commit(kbtest::pin_inner_files("-O0"), "switch to -O0"));
  in.push_back(inner.commit({{"README", "more docs\n"}}, "inner docs again"));
  std::vector<std::string> out;
  out.push_back(outer.commit({{"build.sh", kbtest::pin_build_script(inner.path())}, {"pin.txt", in[0] + "\n"}, {"src.txt", "a\n"}},
                             "outer good"));
  // The nightly config sits beside the outer repository and names the inner one relatively.
  const std::string root = outer.tmp() + "/out";
  const std::string cfg = outer.tmp() + "/nightly.yaml";
  kb::write_file_atomic(cfg, nightly_config(root, outer.path(), "../" + std::filesystem::path(inner.tmp()).filename().string() + "/repo"));
  auto run_nightly = [&](const std::string& date) {
    kb::RunOptions o;
    o.timeout_s = 600;
    return kb::run_process({kbtest::kKbisect, "nightly", cfg, "--scheduler", "local", "--date", date, "-q"}, o);
  };
  auto r1 = run_nightly("2026-12-01");
  ASSERT_EQ(r1.exit_code, 0) << why(r1);

  out.push_back(outer.commit({{"src.txt", "b\n"}}, "outer: unrelated change"));
  out.push_back(outer.commit({{"pin.txt", in[3] + "  # llvm main\n"}}, "Bump LLVM"));
  out.push_back(outer.commit({{"README", "x\n"}}, "outer: docs"));
  auto r2 = run_nightly("2026-12-02");
  ASSERT_EQ(r2.exit_code, 1) << why(r2);
  const std::string run = root + "/2026-12-02";
  const json nj = json::parse(kb::read_file(run + "/nightly.json"));
  ASSERT_EQ(nj["bisections"].size(), 1u) << nj.dump(2);
  const auto& b = nj["bisections"][0];
  ASSERT_EQ(b["status"], "ran") << b.dump(2);
  EXPECT_EQ(b["final_line"], "culprit: " + out[2] + " Bump LLVM") << b.dump(2);
  EXPECT_EQ(b["descent_line"], "inner culprit: " + in[2] + " switch to -O0") << b.dump(2);
  const json& d = b["result"]["descend"];
  EXPECT_EQ(d["status"], "descended") << b["result"].dump(2);
  EXPECT_EQ(d["old_sha"], in[0]);
  EXPECT_EQ(d["new_sha"], in[3]);
  EXPECT_EQ(d["culprit"]["sha"], in[2]);
  EXPECT_TRUE(kb::file_exists(run + "/bisect/1/work/descend/result.json"));
  // The generated bisect config carries the descent with the inner repository's absolute path.
  const std::string bcfg = kb::read_file(run + "/bisect/1/bisect.yaml");
  EXPECT_NE(bcfg.find("descend:"), std::string::npos) << bcfg;
  EXPECT_NE(bcfg.find(inner.path()), std::string::npos) << bcfg;
  // Both reports name the inner culprit.
  EXPECT_NE(kb::read_file(run + "/report.md").find("inner culprit: " + in[2]), std::string::npos);
  EXPECT_NE(kb::read_file(run + "/report.html").find("inner culprit: " + in[2]), std::string::npos);
}
