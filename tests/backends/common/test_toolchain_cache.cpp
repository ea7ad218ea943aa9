#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "tests/backends/compile_request.h"

using namespace kb;

namespace {

Toolchain preset(const std::string& name) {
  Toolchain t = find_toolchain(name);
  resolve_identity(t);
  return t;
}

CompileRequest request(const KernelDecl& k, const Toolchain& tc, Params p = {}, DType d = DType::f32) {
  return test::compile_request(k, tc, p, d);
}

}  // namespace

TEST(Toolchain, IdentityHashesCompilerVersionAndFlags) {
  Toolchain a = preset("g++"), b = preset("clang-19");
  EXPECT_EQ(a.identity.size(), 64u);
  EXPECT_NE(a.identity, b.identity);
  EXPECT_NE(b.version_text.find("clang version 19"), std::string::npos) << b.version_text;
  Toolchain c = find_toolchain("g++");
  c.flags.push_back("-fno-unroll-loops");
  resolve_identity(c);
  EXPECT_NE(a.identity, c.identity);
  Toolchain again = preset("g++");
  EXPECT_EQ(a.identity, again.identity);
}

TEST(Toolchain, YamlFormAndErrors) {
  auto v = parse_toolchains(R"(
toolchains:
  - name: mine
    backend: cpu
    kind: clang
    compiler: clang++-19
    flags: -O2 -march=x86-64-v3
)",
                            "tc.yaml");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flags, (std::vector<std::string>{"-O2", "-march=x86-64-v3"}));
  try {
    parse_toolchains("name: x\nbackend: cpu\nkind: rustc\n", "tc.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tc.yaml:3:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kind 'rustc'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_toolchains("name: x\nbackend: fpga\nkind: clang\n", "tc.yaml"), InputError);
  EXPECT_THROW(parse_toolchains("name: x\nbackend: cpu\n", "tc.yaml"), InputError);
  EXPECT_THROW(parse_toolchains("name: x\nbackend: cpu\nkind: clang\ncolour: red\n", "tc.yaml"), InputError);
  // A compiler that does not exist is an environment problem (exit 3), named in the message.
  auto missing = parse_toolchains("name: gone\nbackend: cpu\nkind: clang\ncompiler: /nonexistent/clang++\n", "tc.yaml");
  try {
    resolve_identity(missing[0]);
    FAIL();
  } catch (const EnvError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/clang++"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_toolchain("no-such-toolchain"), InputError);
}

TEST(CompileCache, KeysSeparateEverythingThatChangesCode) {
  const KernelDecl& k = find_kernel("cpu", "matmul_tiled");
  Toolchain g = preset("g++"), c = preset("clang-19");
  CompileCache cache(temp_dir("kbisect-cache-"));
  auto base = cache.key(request(k, g));
  EXPECT_EQ(base, cache.key(request(k, g)));
  EXPECT_NE(base, cache.key(request(k, c)));
  EXPECT_NE(base, cache.key(request(k, g, {{"BK", int64_t(128)}})));
  EXPECT_NE(base, cache.key(request(k, g, {}, DType::bf16)));
  const KernelDecl& p = find_kernel("cpu", "matmul_pipelined");
  EXPECT_NE(base, cache.key(request(p, g)));
  remove_tree(cache.dir());
}

TEST(CompileCache, SecondCompileIsAHitAndCodeHashIsStable) {
  const KernelDecl& k = find_kernel("cpu", "matmul_tiled");
  Toolchain g = preset("g++");
  std::string dir = temp_dir("kbisect-cache-");
  CompileCache cache(dir);
  Params small{{"BM", int64_t(32)}, {"BN", int64_t(64)}, {"BK", int64_t(64)}, {"MR", int64_t(4)}, {"NR", int64_t(16)}};
  Artifact a = cache.compile(*find_backend("cpu"), request(k, g, small));
  EXPECT_FALSE(a.cache_hit);
  EXPECT_GT(a.code_bytes, 0);
  EXPECT_EQ(a.code_hash.size(), 64u);
  Artifact b = cache.compile(*find_backend("cpu"), request(k, g, small));
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(a.code_hash, b.code_hash);
  EXPECT_EQ(a.binary_path, b.binary_path);
  // A fresh cache compiles again and gets the same code hash (the build is deterministic).
  CompileCache other(temp_dir("kbisect-cache-"));
  Artifact c = other.compile(*find_backend("cpu"), request(k, g, small));
  EXPECT_FALSE(c.cache_hit);
  EXPECT_EQ(a.code_hash, c.code_hash);
  // Different flags give different code.
  Toolchain o1 = find_toolchain("g++");
  o1.flags = {"-O1"};
  resolve_identity(o1);
  Artifact d = cache.compile(*find_backend("cpu"), request(k, o1, small));
  EXPECT_NE(a.code_hash, d.code_hash);
  remove_tree(dir);
  remove_tree(other.dir());
}
