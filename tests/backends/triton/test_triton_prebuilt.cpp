// Compile here, run there: `kbisect prebuild` compiles a sweep's Triton cases with real releases, and the
// same sweep then runs where no Triton exists (KBISECT_TRITON_DIR naming only the prebuilt records,
// KBISECT_CACHE_DIR a copy of the builds in another place): every build is found, nothing is compiled, the
// static metrics are the ones measured at the prebuild, and what is missing or broken says so.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/triton/prebuilt.h"
#include "backends/triton/triton_compile.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

kb::RunResult kbisect(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {kbtest::kKbisect};
  argv.insert(argv.end(), args.begin(), args.end());
  kb::RunOptions o;
  o.timeout_s = 600;
  o.env_set = env;
  return kb::run_process(argv, o);
}

std::string sweep_yaml(const std::string& dtypes) {
  return "name: prebuilt-test\n"
         "toolchains: [triton-3.2.0-sm90a, triton-3.5.1-sm90a]\n"
         "benchmarks:\n"
         "  - {kernel: triton_matmul_tiled, backend: cuda, config: small, dtypes: [" + dtypes + "], shapes: [[256, 256, 128]]}\n"
         "  - {kernel: triton_matmul_persistent, backend: cuda, dtypes: [f16], shapes: [[256, 256, 128]]}\n";
}

const json* find_case(const json& res, const std::string& kernel, const std::string& dtype, const std::string& tc) {
  for (const auto& c : res["cases"])
    if (c["kernel"] == kernel && c["dtype"] == dtype && c["toolchain"]["name"] == tc) return &c;
  return nullptr;
}

TEST(TritonPrebuilt, BuildsMadeHereRunWhereNoTritonIs) {
  for (const char* rel : {"3.2.0", "3.5.1"})
    if (!kb::file_exists(kb::triton::triton_env_root() + "/triton-" + rel + "/bin/python"))
      GTEST_SKIP() << "Triton " << rel << " is not installed under " << kb::triton::triton_env_root()
                   << ": run scripts/install-deps";
  kbtest::TestDir tmp("kb-prebuilt");
  const std::string sweep = tmp.path + "/sweep.yaml";
  kb::write_file_atomic(sweep, sweep_yaml("f16"));
  const std::string pre = tmp.path + "/pre";
  auto r = kbisect({"prebuild", sweep, "-o", pre, "--jobs", "2"});
  ASSERT_TRUE(r.ok()) << r.status_text() << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("prebuilt 3 builds"), std::string::npos) << r.out;  // tiled x 2 releases, persistent on 3.5.1

  // The record of each release: its toolchain with the identity it has here, and what it could not build.
  const json rec = json::parse(kb::read_file(pre + "/triton/triton-3.2.0/" + kb::triton::kPrebuiltRecord));
  ASSERT_EQ(rec["toolchains"].size(), 1u);
  EXPECT_EQ(rec["toolchains"][0]["name"], "triton-3.2.0-sm90a");
  ASSERT_EQ(rec["not_built"].size(), 1u);
  EXPECT_EQ(rec["not_built"][0]["status"], "skipped");
  EXPECT_NE(rec["not_built"][0]["reason"].get<std::string>().find("tensor descriptors"), std::string::npos);

  // Elsewhere: the builds copied to another place, the Triton root holding nothing but the records.
  const std::string there = tmp.path + "/elsewhere/cache";
  fs::create_directories(there);
  fs::copy(pre + "/compile", there + "/compile", fs::copy_options::recursive);
  fs::rename(pre + "/compile", tmp.path + "/builds-moved");  // the entries name where they were made
  const std::map<std::string, std::string> env = {{"KBISECT_CACHE_DIR", there}, {"KBISECT_TRITON_DIR", pre + "/triton"}};
  auto list = kbisect({"list"}, env);
  ASSERT_TRUE(list.ok()) << list.err;
  EXPECT_NE(list.out.find("triton-3.5.1-sm90a cuda  triton     (prebuilt)"), std::string::npos) << list.out;
  auto run = kbisect({"sweep", sweep, "-o", tmp.path + "/run", "--format", "json"}, env);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json res = json::parse(kb::read_file(tmp.path + "/run/results.json"));
  for (const char* tc : {"triton-3.2.0-sm90a", "triton-3.5.1-sm90a"}) {
    const json* c = find_case(res, "triton_matmul_tiled", "f16", tc);
    ASSERT_TRUE(c) << tc;
    EXPECT_TRUE((*c)["static"]["cache_hit"].get<bool>()) << tc;
    // The same registers as the build the prebuild made.
    const std::string key = (*c)["toolchain"]["identity"];
    bool matched = false;
    for (const auto& e : fs::recursive_directory_iterator(tmp.path + "/builds-moved"))
      if (e.path().filename() == "artifact.json") {
        const json a = json::parse(kb::read_file(e.path().string()));
        if (a["toolchain_identity"] == key && a["kernel"] == "triton_matmul_tiled") {
          EXPECT_EQ(a["metrics"]["registers"], (*c)["static"]["registers"]) << tc;
          matched = true;
        }
      }
    EXPECT_TRUE(matched) << tc << ": its identity is the one recorded at the prebuild";
  }
  const json* skipped = find_case(res, "triton_matmul_persistent", "f16", "triton-3.2.0-sm90a");
  ASSERT_TRUE(skipped);
  EXPECT_EQ((*skipped)["status"], "skipped");
  EXPECT_NE((*skipped)["reason"].get<std::string>().find("as prebuilt: made on"), std::string::npos) << (*skipped)["reason"];

  // A case the prebuild did not make fails, and says where to make it.
  kb::write_file_atomic(sweep, sweep_yaml("f16, bf16"));
  auto miss = kbisect({"sweep", sweep, "-o", tmp.path + "/miss", "--format", "json"}, env);
  EXPECT_EQ(miss.exit_code, 1) << miss.out << miss.err;
  const json mres = json::parse(kb::read_file(tmp.path + "/miss/results.json"));
  const json* m = find_case(mres, "triton_matmul_tiled", "bf16", "triton-3.5.1-sm90a");
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["status"], "failed");
  EXPECT_NE((*m)["reason"].get<std::string>().find("is not among the builds of this prebuilt Triton"), std::string::npos)
      << (*m)["reason"];

  // A damaged record is a one-line error naming the file.
  kb::write_file_atomic(pre + "/triton/triton-3.5.1/" + kb::triton::kPrebuiltRecord, "{\"format\": \"something else\"}");
  auto bad = kbisect({"sweep", sweep, "-o", tmp.path + "/bad"}, env);
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("triton-3.5.1/kbisect-prebuilt.json: field 'format'"), std::string::npos) << bad.err;
}

}  // namespace
