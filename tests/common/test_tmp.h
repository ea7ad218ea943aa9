// Where the tests' temporary files go, and when they stay. Every test executable runs with its own
// directory under $TMPDIR (or /tmp) as TMPDIR, made by tests/common/test_main.cpp and removed when the
// tests end, however they end; kb::temp_dir, the compilers and every program a test starts put their temp
// files there. KBISECT_KEEP_TEST_TMP=1 keeps it (and the fixtures' own directories) when a test failed.
#pragma once
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/fsutil.h"

namespace kbtest {

// KBISECT_KEEP_TEST_TMP is set (and not "0").
inline bool keep_tmp_requested() {
  const char* k = getenv("KBISECT_KEEP_TEST_TMP");
  return k && *k && std::string(k) != "0";
}

// What a test made stays: asked for, and the running test (or an earlier one in this process) failed.
inline bool keep_test_tmp() {
  return keep_tmp_requested() && (::testing::Test::HasFailure() || ::testing::UnitTest::GetInstance()->Failed());
}

// A fixture's directory, removed when the fixture ends unless keep_test_tmp().
inline void remove_test_dir(const std::string& dir) {
  if (!dir.empty() && !keep_test_tmp()) kb::remove_tree(dir);
}

// A fresh directory (kb::temp_dir) for as long as the object lives.
struct TestDir {
  std::string path;
  explicit TestDir(const std::string& prefix) : path(kb::temp_dir(prefix)) {}
  ~TestDir() { remove_test_dir(path); }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
};

}  // namespace kbtest
