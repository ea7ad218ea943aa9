// provider.build.store: builds shared by every run that names the store. Two bisections of the same range
// started together (different workdirs) build each commit once between them (the per-commit lock makes the
// second wait and take the first's build), and a third one later builds nothing.
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bisect/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"

using json = nlohmann::json;

namespace {

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

TEST(BuildStore, RunsNamingTheStoreBuildEachCommitOnce) {
  if (kb::which("clang++-19").empty()) GTEST_SKIP() << "needs clang++-19";
  kbtest::GitRepo r;
  const std::string done = r.tmp() + "/completed.txt";
  const std::string build = R"SH(#!/bin/sh
set -e
sleep 1
printf '#!/bin/sh\nexec clang++-19 %s "$@"\n' "$(cat flags.txt)" > "$KBISECT_OUT/cc"
chmod +x "$KBISECT_OUT/cc"
echo "$KBISECT_COMMIT" >> ')SH" + done + "'\n";
  std::vector<std::string> s;
  s.push_back(r.commit({{"build.sh", build}, {"flags.txt", "-O3"}}, "good"));
  for (int i = 1; i <= 8; ++i)
    s.push_back(i == 5 ? r.commit({{"flags.txt", "-O0"}}, "switch to -O0")
                       : r.commit({{"README", std::to_string(i) + "\n"}}, "docs " + std::to_string(i)));
  // A store given relative to the config file.
  const std::string cfg = kbtest::write_tmp(
      r, kbtest::bisect_config(r, s.front(), s.back(),
                               "{build: {command: 'sh build.sh', store: store, toolchain: {name: cc, backend: cpu, "
                               "kind: clang, compiler: '{out}/cc'}}}",
                               "code_bytes", "10%"));
  EXPECT_EQ(kb::bisect::load_bisect_config(cfg).provider.store, r.tmp() + "/store");
  kb::RunOptions o;
  o.timeout_s = 300;
  auto args = [&](const std::string& wd) {
    return std::vector<std::string>{kbtest::kKbisect, "bisect", cfg, "--workdir", r.tmp() + "/" + wd, "-q"};
  };
  kb::StartedProcess a(args("w1"), o), b(args("w2"), o);
  const kb::RunResult ra = a.finish(), rb = b.finish();
  ASSERT_TRUE(ra.ok()) << ra.status_text() << "\n" << kb::tail(ra.err, 2000);
  ASSERT_TRUE(rb.ok()) << rb.status_text() << "\n" << kb::tail(rb.err, 2000);
  const std::string culprit = "culprit: " + s[5] + " switch to -O0";
  EXPECT_EQ(last_line(ra.out), culprit);
  EXPECT_EQ(last_line(rb.out), culprit);
  const std::string text = kb::read_file(done);
  const std::map<std::string, int> completed = kbtest::count_lines(text);
  for (const auto& [sha, k] : completed) EXPECT_EQ(k, 1) << sha << " built " << k << " times";
  const int builds = json::parse(kb::read_file(r.tmp() + "/w1/result.json"))["spent"]["builds"].get<int>() +
                     json::parse(kb::read_file(r.tmp() + "/w2/result.json"))["spent"]["builds"].get<int>();
  EXPECT_EQ(builds, int(completed.size()));  // a build taken from the store costs the taker nothing

  // Later, a third bisection of the range builds nothing.
  const kb::RunResult rc = kb::run_process(args("w3"), o);
  ASSERT_TRUE(rc.ok()) << rc.status_text() << "\n" << kb::tail(rc.err, 2000);
  EXPECT_EQ(last_line(rc.out), culprit);
  EXPECT_EQ(json::parse(kb::read_file(r.tmp() + "/w3/result.json"))["spent"]["builds"].get<int>(), 0);
  EXPECT_EQ(kb::read_file(done), text);
  EXPECT_TRUE(kb::file_exists(r.tmp() + "/store/" + s.front() + "/.kbisect-built.json"));
}
