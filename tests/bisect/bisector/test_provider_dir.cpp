// In-tree toolchain specs may name files beside them with {dir} (a compiler wrapper, a flags file): the
// provider exports the spec's directory as it is at the commit and points {dir} there.
#include <filesystem>

#include <gtest/gtest.h>

#include "backends/toolchain.h"
#include "bisect/config.h"
#include "git/git.h"
#include "bisect/provider.h"
#include "tests/common/bisect_fixture.h"
#include "core/fsutil.h"
#include "core/process.h"

using namespace kb;
using namespace kb::bisect;

TEST(Provider, InTreeDirIsTheSpecsDirectoryAtTheCommit) {
  if (which("clang++-19").empty()) GTEST_SKIP() << "needs clang++-19";
  kbtest::GitRepo r;
  const std::string spec = "name: kc\nbackend: cpu\nkind: clang\ncompiler: \"{dir}/cc.sh\"\nflags: [-O2]\n";
  // The fixture writes files 0644; the wrapper must be committed executable (mode 100755).
  auto commit_wrapper = [&](const std::string& flag, const std::string& subject) {
    r.commit({{"toolchains/tc.yaml", spec}, {"toolchains/cc.sh", "#!/bin/sh\nexec clang++-19 " + flag + " \"$@\"\n"}},
             subject + " (files)");
    std::filesystem::permissions(r.path() + "/toolchains/cc.sh", std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    r.git({"add", "toolchains/cc.sh"});
    return r.commit({}, subject);
  };
  const std::string v1 = commit_wrapper("-O1", "wrapper v1");
  const std::string v2 = commit_wrapper("-O3", "wrapper v2");
  const std::string text = fmt::format(
      "name: t\nrepo: {}\ngood: {}\nbad: {}\nprovider: {{in_tree: toolchains/tc.yaml}}\n"
      "benchmarks:\n  - kernel: matmul_tiled\n    backend: cpu\n    dtypes: [f32]\n    shapes: [[64, 64, 64]]\n"
      "metric: code_bytes\nthreshold: 1%\n",
      r.path(), v1, v2);
  BisectConfig cfg = parse_bisect_config(text, "test");
  git::Repo repo(r.path());
  const std::string work = r.tmp() + "/work";
  Provider prov(cfg, repo, work);
  for (const std::string& sha : {v1, v2}) {
    ToolchainAtCommit t = prov.get(sha);
    ASSERT_TRUE(t.ok) << t.reason;
    auto tcs = load_toolchain_file(t.toolchain_file);
    ASSERT_EQ(tcs.size(), 1u);
    const std::string& cc = tcs[0].compiler;
    EXPECT_NE(cc.find(sha), std::string::npos) << cc;  // exported per commit, not the live checkout
    ASSERT_TRUE(file_exists(cc)) << cc;
    EXPECT_NE(read_file(cc).find(sha == v1 ? "-O1" : "-O3"), std::string::npos);
    Toolchain tc = tcs[0];
    resolve_identity(tc);  // runs the wrapper (--version): it must be executable
    EXPECT_NE(tc.version_text.find("clang"), std::string::npos) << tc.version_text;
  }
}
