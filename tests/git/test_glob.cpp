// Path globs: fnmatch(3) with FNM_PATHNAME per segment, plus "**" for any number of segments.
#include <gtest/gtest.h>

#include "git/glob.h"

using kb::glob_match;

TEST(Glob, SingleSegmentWildcardsStopAtSlash) {
  EXPECT_TRUE(glob_match("*.td", "X86.td"));
  EXPECT_FALSE(glob_match("*.td", "lib/X86.td"));
  EXPECT_TRUE(glob_match("lib/*/isel.cpp", "lib/X86/isel.cpp"));
  EXPECT_FALSE(glob_match("lib/*/isel.cpp", "lib/a/b/isel.cpp"));
  EXPECT_TRUE(glob_match("lib/?86/*.[ch]", "lib/X86/a.h"));
  EXPECT_FALSE(glob_match("lib/?86/*.[ch]", "lib/X86/a.cpp"));
  EXPECT_FALSE(glob_match("lib", "lib/a"));
}

TEST(Glob, DoubleStar) {
  EXPECT_TRUE(glob_match("lib/Target/**", "lib/Target/X86/isel.cpp"));
  EXPECT_TRUE(glob_match("lib/Target/**", "lib/Target"));
  EXPECT_FALSE(glob_match("lib/Target/**", "lib/TargetParser/a.cpp"));
  EXPECT_TRUE(glob_match("**/codegen/**", "codegen/a.c"));
  EXPECT_TRUE(glob_match("**/codegen/**", "src/x/codegen/b/c.c"));
  EXPECT_FALSE(glob_match("**/codegen/**", "src/codegenx/c.c"));
  EXPECT_TRUE(glob_match("**/*.td", "a.td"));
  EXPECT_TRUE(glob_match("**/*.td", "lib/Target/X86/X86.td"));
  EXPECT_TRUE(glob_match("a/**/b", "a/b"));
  EXPECT_TRUE(glob_match("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(glob_match("a/**/b", "a/x/y/c"));
  EXPECT_TRUE(glob_match("**", "anything/at/all"));
  EXPECT_TRUE(glob_match("lib/Tar**", "lib/Target"));  // inside a segment: like '*'
  EXPECT_FALSE(glob_match("lib/Tar**", "lib/Target/x"));
}

TEST(Glob, LeadingAndTrailingSlash) {
  EXPECT_TRUE(glob_match("/lib/Target/**", "lib/Target/a.cpp"));
  EXPECT_TRUE(glob_match("third_party/nvidia/", "third_party/nvidia/backend/compiler.py"));
  EXPECT_FALSE(glob_match("", "a"));
}
