// Descent into a pin bump: an outer repository pins an inner "compiler" repository of in-tree toolchain
// specs; the outer build reads the toolchain of the pinned inner commit. The outer bisection names the
// pin bump, the inner one the inner commit that makes the CPU kernel slower (-O3 -> -O0). Real compiles
// and measurements (an effect far beyond the 20% threshold, so the noisy machine cannot flip it).
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "bisect/descend.h"
#include "tests/common/bisect_fixture.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

using json = nlohmann::json;
using namespace kb::bisect;
using kbtest::cpu_toolchain;
using kbtest::GitRepo;

namespace {



std::string config_text(const GitRepo& outer, const GitRepo& inner, const std::string& good, const std::string& bad,
                        const std::string& descend_extra = "") {
  return fmt::format(
      "name: d\nrepo: {}\ngood: {}\nbad: {}\n"
      "provider: {{build: {{command: 'sh build.sh', timeout_s: 60, toolchain: {{name: outer, backend: cpu, kind: clang, "
      "compiler: '{{out}}/cc'}}}}}}\n"
      "descend:\n  pin_file: pin.txt\n  repo: {}\n  provider: {{in_tree: tc.yaml}}\n{}"
      "{}metric: time\nthreshold: 20%\n{}",
      outer.path(), good, bad, inner.path(), descend_extra, kbtest::kSmallCase, kbtest::budget_lines());
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find('\n', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A finished outer run, made by hand: `culprit` at walk index 1 after `parent` (no measurement).
BisectRun fake_run(const GitRepo& outer, const std::string& parent, const std::string& culprit, const std::string& wd) {
  kb::git::Repo repo(outer.path());
  BisectRun r;
  r.commits = repo.commit_infos({parent, culprit});
  r.outcome.verdict = "culprit";
  r.outcome.culprit = 1;
  r.workdir = wd;
  kb::make_dirs(wd);
  r.result_json = wd + "/result.json";
  r.report_md = wd + "/report.md";
  kb::write_file_atomic(r.result_json, "{\"verdict\": \"culprit\"}\n");
  kb::write_file_atomic(r.report_md, "# bisect\n");
  return r;
}

}  // namespace

TEST(Descend, NamesTheOuterBumpAndTheInnerCommit) {
  GitRepo inner, outer;
  std::vector<std::string> in;
  in.push_back(inner.commit(kbtest::pin_inner_files("-O3 -march=x86-64-v3"), "inner good: -O3"));
  in.push_back(inner.commit({{"README", "docs\n"}}, "inner docs"));
  in.push_back(inner.commit(kbtest::pin_inner_files("-O3 -march=x86-64-v3 -fno-omit-frame-pointer"), "keep frame pointers"));
  in.push_back(inner.commit(kbtest::pin_inner_files("-O0"), "switch to -O0"));
  in.push_back(inner.commit({{"README", "more docs\n"}}, "inner docs again"));
  in.push_back(inner.commit(kbtest::pin_inner_files("-O0 -fno-inline"), "no inlining"));

  const std::string script = kbtest::pin_build_script(inner.path());
  std::vector<std::string> out;
  out.push_back(outer.commit({{"build.sh", script}, {"pin.txt", in[0] + "\n"}, {"src.txt", "a\n"}}, "outer good"));
  out.push_back(outer.commit({{"src.txt", "b\n"}}, "outer: unrelated change"));
  out.push_back(outer.commit({{"pin.txt", in[5] + "  # llvm main\n"}}, "Bump LLVM"));
  out.push_back(outer.commit({{"src.txt", "c\n"}}, "outer: another change"));
  out.push_back(outer.commit({{"README", "x\n"}}, "outer: docs"));

  const std::string cfgp = kbtest::write_tmp(outer, config_text(outer, inner, out.front(), out.back()));
  const std::string wd = outer.tmp() + "/work";
  kb::RunOptions o;
  o.timeout_s = 900;
  kb::RunResult r = kb::run_process({kbtest::kKbisect, "bisect", cfgp, "--workdir", wd, "-q"}, o);
  ASSERT_TRUE(r.ok()) << r.status_text() << "\n" << r.out << "\n" << r.err;
  const auto ls = lines_of(r.out);
  ASSERT_GE(ls.size(), 2u) << r.out;
  EXPECT_EQ(ls.back(), "culprit: " + out[2] + " Bump LLVM") << r.out;
  EXPECT_EQ(ls[ls.size() - 2], "inner culprit: " + in[3] + " switch to -O0") << r.out;

  json res = json::parse(kb::read_file(wd + "/result.json"));
  ASSERT_TRUE(res.contains("descend")) << res.dump(2);
  const json& d = res["descend"];
  EXPECT_EQ(d["status"], "descended");
  EXPECT_EQ(d["old_sha"], in[0]);
  EXPECT_EQ(d["new_sha"], in[5]);
  EXPECT_EQ(d["outer_culprit"], out[2]);
  EXPECT_EQ(d["verdict"], "culprit");
  EXPECT_EQ(d["inner_commits"], 5);
  EXPECT_EQ(d["culprit"]["sha"], in[3]);
  EXPECT_EQ(d["culprit"]["subject"], "switch to -O0");
  EXPECT_GT(d["culprit"].value("effect_pct", 0.0), 20.0);
  EXPECT_TRUE(kb::file_exists(d["reports"]["result_json"].get<std::string>()));
  EXPECT_EQ(json::parse(kb::read_file(wd + "/descend/result.json"))["culprit"]["sha"], in[3]);
  const std::string md = kb::read_file(wd + "/report.md");
  EXPECT_NE(md.find("## Descent into `pin.txt`"), std::string::npos) << md;
  EXPECT_NE(md.find(in[3]), std::string::npos) << md;
  const std::string html = kb::read_file(wd + "/report.html");
  EXPECT_NE(html.find("Descent into"), std::string::npos);
  EXPECT_NE(html.find("inner culprit: " + in[3]), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(Descend, NoDescentWhenTheCulpritLeavesThePinAlone) {
  GitRepo inner, outer;
  const std::string i0 = inner.commit(kbtest::pin_inner_files("-O2"), "i0");
  const std::string a = outer.commit({{"pin.txt", i0 + "\n"}, {"src.txt", "a\n"}}, "a");
  const std::string b = outer.commit({{"src.txt", "b\n"}}, "b: touches src only");
  const BisectConfig cfg = parse_bisect_config(config_text(outer, inner, a, b), outer.tmp() + "/c.yaml");
  ASSERT_TRUE(cfg.descend.has_value());
  BisectRun run = fake_run(outer, a, b, outer.tmp() + "/w");
  DescendResult d = descend(cfg, run, false);
  EXPECT_EQ(d.status, "pin-unchanged");
  EXPECT_NE(d.line.find("does not change pin.txt"), std::string::npos) << d.line;
  EXPECT_FALSE(d.inner.has_value());
  EXPECT_EQ(json::parse(kb::read_file(run.result_json))["descend"]["status"], "pin-unchanged");
  EXPECT_EQ(inner_line(d), "");

  // A config without descend: nothing happens.
  BisectConfig plain = cfg;
  plain.descend.reset();
  EXPECT_EQ(descend(plain, run, false).status, "not-configured");

  // An outer run without a single culprit does not descend.
  BisectRun amb = run;
  amb.outcome.verdict = "ambiguous";
  EXPECT_EQ(descend(cfg, amb, false).status, "outer-not-culprit");
}

TEST(Descend, InvalidPinsAreClearErrors) {
  GitRepo inner, outer;
  const std::string i0 = inner.commit(kbtest::pin_inner_files("-O2"), "i0");
  const std::string a = outer.commit({{"pin.txt", i0 + "\n"}}, "a");
  const std::string bad = outer.commit({{"pin.txt", "0123456789abcdef0123456789abcdef01234567\n"}}, "pin an unknown sha");
  const std::string empty = outer.commit({{"pin.txt", " \n"}}, "empty pin");
  const BisectConfig cfg = parse_bisect_config(config_text(outer, inner, a, empty), outer.tmp() + "/c.yaml");
  try {
    descend(cfg, fake_run(outer, a, bad, outer.tmp() + "/w1"), false);
    FAIL() << "expected an InputError";
  } catch (const kb::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pin.txt"), std::string::npos) << m;
    EXPECT_NE(m.find(bad.substr(0, 12)), std::string::npos) << m;
    EXPECT_NE(m.find("0123456789abcdef"), std::string::npos) << m;
    EXPECT_NE(m.find("not a commit"), std::string::npos) << m;
  }
  try {
    descend(cfg, fake_run(outer, bad, empty, outer.tmp() + "/w2"), false);
    FAIL() << "expected an InputError";
  } catch (const kb::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pin.txt"), std::string::npos) << m;
    EXPECT_NE(m.find(empty.substr(0, 12)), std::string::npos) << m;
    EXPECT_NE(m.find("empty"), std::string::npos) << m;
  }
  EXPECT_THROW(pin_token("--upload-pack=x", "f"), kb::InputError);
  EXPECT_EQ(pin_token("  abc123 # comment\n", "f"), "abc123");
  // Triton's two pin files: cmake/llvm-hash.txt (a sha and a newline) and cmake/llvm-info.json.
  EXPECT_EQ(pin_token("4611156032e1ebac68b2b8f6107b1475a7c60800\n", "cmake/llvm-hash.txt"),
            "4611156032e1ebac68b2b8f6107b1475a7c60800");
  EXPECT_EQ(pin_token("{\n  \"llvm_hash\": \"4611156032e1ebac68b2b8f6107b1475a7c60800\",\n  \"build_number\": 1,\n"
                      "  \"sha256sum\": {\"ubuntu-x64\": \"38a3d119\"}\n}\n", "cmake/llvm-info.json"),
            "4611156032e1ebac68b2b8f6107b1475a7c60800");
  EXPECT_THROW(pin_token("{\"build_number\": 1}", "cmake/llvm-info.json"), kb::InputError);
  EXPECT_THROW(pin_token("{\"llvm_hash\": \"--upload-pack=x\"}", "cmake/llvm-info.json"), kb::InputError);
}

TEST(Descend, ConfigErrorsNameTheField) {
  GitRepo inner, outer;
  const std::string a = outer.commit({{"pin.txt", "x\n"}}, "a");
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    try {
      parse_bisect_config(text, outer.tmp() + "/c.yaml");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const kb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::string t = config_text(outer, inner, a, a);
  expect_error(std::string(t).replace(t.find("  pin_file: pin.txt\n"), 20, ""), "missing field 'pin_file'");
  expect_error(std::string(t).replace(t.find("pin_file: pin.txt"), 17, "pin_file: /etc/passwd"), "inside the outer repository");
  expect_error(std::string(t).replace(t.find("repo: " + inner.path()), 6 + inner.path().size(), "repo: nowhere"),
               "descend.repo");
  expect_error(std::string(t).replace(t.find("provider: {in_tree: tc.yaml}"), 28, "provider: {nope: 1}"), "nope");
  expect_error(std::string(t).replace(t.find("  pin_file"), 0, "  extra: 1\n"), "extra");
  const BisectConfig ok = parse_bisect_config(t, outer.tmp() + "/c.yaml");
  ASSERT_TRUE(ok.descend.has_value());
  EXPECT_EQ(ok.descend->pin_file, "pin.txt");
  EXPECT_EQ(ok.descend->provider.kind, ProviderSpec::Kind::in_tree);
  const BisectConfig in = inner_config(ok, "aaa", "bbb");
  EXPECT_EQ(in.repo, ok.descend->repo);
  EXPECT_EQ(in.good, "aaa");
  EXPECT_EQ(in.bad, "bbb");
  EXPECT_FALSE(in.descend.has_value());
  EXPECT_EQ(in.metric, ok.metric);
  EXPECT_EQ(in.sweep_text, ok.sweep_text);
}
