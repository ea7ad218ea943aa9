// The git wrapper: refs, ancestry, walks, commit info with exact dates, changed files, zero-context
// hunks, patch ids, reading a file at a commit, worktrees, and the diff parser on tricky input.
#include <gtest/gtest.h>

#include "git/git.h"
#include "tests/common/temp_repo.h"
#include "core/error.h"
#include "core/fsutil.h"

using namespace kb;
using kbtest::day;

namespace {

struct Small {
  kbtest::TempRepo repo;
  std::string c0, c1, c2, side, merge, pick;
};

Small& small() {
  static Small* s = [] {
    auto* sm = new Small;
    auto& r = sm->repo;
    r.write_lines("a.txt", "a", 8);
    r.write("dir/with space.txt", "x\n");
    sm->c0 = r.commit("root commit", day(0));
    r.set_line("a.txt", 2, "a line 2 changed");
    r.set_line("a.txt", 7, "+++ b/looks-like-a-header");
    sm->c1 = r.commit("two hunks\n\nBody line.", day(1));
    r.write("b.bin", std::string("\0\1\2\3", 4));
    r.write("dir/with space.txt", "y\n");
    sm->c2 = r.commit("binary and spaces", day(2));
    r.git({"checkout", "-q", "-b", "side", sm->c0});
    r.write("side.txt", "side\n");
    sm->side = r.commit("side work", day(1.5));
    r.git({"checkout", "-q", "up"});
    r.git({"merge", "-q", "--no-ff", "-m", "merge side", "side"}, day(3));
    sm->merge = r.git({"rev-parse", "HEAD"});
    // A cherry-pick of c1's change onto the side branch: new hash, same patch id.
    r.git({"checkout", "-q", "side"});
    r.git({"cherry-pick", sm->c1}, day(4));
    sm->pick = r.git({"rev-parse", "HEAD"});
    r.git({"checkout", "-q", "up"});
    return sm;
  }();
  return *s;
}

}  // namespace

TEST(Git, ResolveAndAncestry) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  EXPECT_EQ(repo.resolve("up"), s.merge);
  EXPECT_EQ(repo.resolve(s.c1.substr(0, 12)), s.c1);
  EXPECT_EQ(repo.resolve("up^1"), s.c2);
  try {
    repo.resolve("nope", "good ref");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "good ref 'nope' is not a commit in repository " + s.repo.path());
  }
  EXPECT_FALSE(repo.try_resolve("--all"));
  EXPECT_TRUE(repo.is_ancestor(s.c0, s.c2));
  EXPECT_FALSE(repo.is_ancestor(s.c2, s.c0));
  EXPECT_EQ(repo.merge_base(s.c2, s.side), s.c0);
  EXPECT_EQ(repo.merge_bases(s.c2, s.side), std::vector<std::string>{s.c0});
}

TEST(Git, WalksOldestFirst) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  EXPECT_EQ(repo.commits_between(s.c0, "up", true), (std::vector<std::string>{s.c1, s.c2, s.merge}));
  auto all = repo.commits_between(s.c0, "up", false);
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(all.back(), s.merge);
  git::RevListOptions o;
  o.no_merges = true;
  o.first_parent = true;
  EXPECT_EQ(repo.rev_list({"up"}, o), (std::vector<std::string>{s.c2, s.c1, s.c0}));
  o.until = day(1);
  o.max_count = 1;
  EXPECT_EQ(repo.rev_list({"up"}, o), std::vector<std::string>{s.c1});
  EXPECT_THROW(repo.rev_list({"-rf"}), InputError);
}

TEST(Git, CommitInfoHasExactDates) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  auto c = repo.commit_info(s.c1);
  EXPECT_EQ(c.sha, s.c1);
  EXPECT_EQ(c.parents, std::vector<std::string>{s.c0});
  EXPECT_EQ(c.subject, "two hunks");
  EXPECT_EQ(c.message, "two hunks\n\nBody line.");
  EXPECT_EQ(c.author_name, "Test Author");
  EXPECT_EQ(c.author_email, "author@example.com");
  EXPECT_EQ(c.author_time, day(1));
  EXPECT_EQ(c.commit_time, day(1));
  auto m = repo.commit_info("up");
  EXPECT_TRUE(m.is_merge());
  EXPECT_EQ(m.parents, (std::vector<std::string>{s.c2, s.side}));
  auto pick = repo.commit_info(s.pick);
  EXPECT_EQ(pick.author_time, day(1));  // cherry-pick keeps the author date
  EXPECT_EQ(pick.commit_time, day(4));
  auto many = repo.commit_infos({s.c2, s.c0, s.c2});
  ASSERT_EQ(many.size(), 3u);
  EXPECT_EQ(many[0].sha, s.c2);
  EXPECT_EQ(many[1].sha, s.c0);
  EXPECT_EQ(many[2].subject, "binary and spaces");
  EXPECT_TRUE(repo.commit_info(s.c0).parents.empty());
}

TEST(Git, ChangedFilesAndHunks) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  auto files = repo.changed_files(s.c2);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "b.bin");
  EXPECT_EQ(files[0].status, 'A');
  EXPECT_EQ(files[1].path, "dir/with space.txt");
  EXPECT_EQ(files[1].status, 'M');
  auto root = repo.changed_files(s.c0);
  EXPECT_EQ(root.size(), 2u);
  auto merge = repo.changed_files("up");  // against the first parent
  ASSERT_EQ(merge.size(), 1u);
  EXPECT_EQ(merge[0].path, "side.txt");

  auto d = repo.diff(s.c1);
  ASSERT_EQ(d.files.size(), 1u);
  EXPECT_EQ(d.files[0].path, "a.txt");
  ASSERT_EQ(d.files[0].hunks.size(), 2u);
  EXPECT_EQ(d.files[0].hunks[0].old_start, 2);
  EXPECT_EQ(d.files[0].hunks[0].old_count, 1);
  EXPECT_EQ(d.files[0].hunks[1].new_start, 7);
  EXPECT_EQ(d.files[0].lines_added(), 2);

  auto d2 = repo.diffs({s.c0, s.c2, s.merge});
  ASSERT_EQ(d2.size(), 3u);
  EXPECT_EQ(d2[0].files.size(), 2u);
  EXPECT_TRUE(d2[0].files[0].created);
  EXPECT_EQ(d2[0].files[0].hunks[0].new_count, 8);
  ASSERT_EQ(d2[1].files.size(), 2u);
  EXPECT_TRUE(d2[1].files[0].binary);
  EXPECT_EQ(d2[1].files[1].path, "dir/with space.txt");
  EXPECT_TRUE(d2[2].files.empty());  // merges carry no diff of their own here
}

TEST(Git, PatchIdsMatchAcrossCherryPicks) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  auto a = repo.patch_id(s.c1), b = repo.patch_id(s.pick), c = repo.patch_id(s.c2);
  ASSERT_TRUE(a && b && c);
  EXPECT_NE(s.c1, s.pick);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(a->size(), 40u);
  EXPECT_FALSE(repo.patch_id("up"));  // a merge has no patch of its own
  auto m = repo.patch_ids({s.c1, s.pick, s.merge});
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at(s.pick), *a);
}

TEST(Git, ShowFileAndWorktree) {
  auto& s = small();
  git::Repo repo(s.repo.path());
  EXPECT_EQ(repo.show_file(s.c0, "dir/with space.txt"), "x\n");
  EXPECT_EQ(repo.show_file(s.c2, "dir/with space.txt"), "y\n");
  EXPECT_THROW(repo.show_file(s.c0, "side.txt"), InputError);
  std::string wt = s.repo.tmp() + "/wt";
  repo.worktree_add(wt, s.c1);
  EXPECT_EQ(read_file(wt + "/a.txt").find("a line 2 changed") != std::string::npos, true);
  EXPECT_FALSE(file_exists(wt + "/b.bin"));
  repo.worktree_remove(wt);
  EXPECT_FALSE(file_exists(wt));
}

TEST(Git, ParseDiffTreeSkipsBodiesByCount) {
  std::string text =
      "0123456789012345678901234567890123456789\n"
      "diff --git a/x.c b/x.c\n"
      "index 1..2 100644\n"
      "--- a/x.c\n"
      "+++ b/x.c\n"
      "@@ -3,2 +3 @@ int f()\n"
      "-diff --git a/evil b/evil\n"
      "-+++ b/evil\n"
      "++++ b/evil2\n"
      "@@ -10,0 +10,2 @@\n"
      "+0123456789012345678901234567890123456789\n"
      "+last\n"
      "\\ No newline at end of file\n"
      "diff --git \"a/t\\tab\" \"b/t\\tab\"\n"
      "deleted file mode 100644\n"
      "--- \"a/t\\tab\"\n"
      "+++ /dev/null\n"
      "@@ -1 +0,0 @@\n"
      "-gone\n";
  auto d = git::parse_diff_tree(text);
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(d[0].files.size(), 2u);
  EXPECT_EQ(d[0].files[0].path, "x.c");
  ASSERT_EQ(d[0].files[0].hunks.size(), 2u);
  EXPECT_EQ(d[0].files[0].hunks[0].old_start, 3);
  EXPECT_EQ(d[0].files[0].hunks[0].old_count, 2);
  EXPECT_EQ(d[0].files[0].hunks[0].new_count, 1);
  EXPECT_EQ(d[0].files[0].hunks[1].old_count, 0);
  EXPECT_EQ(d[0].files[0].hunks[1].new_count, 2);
  EXPECT_EQ(d[0].files[1].path, "t\tab");
  EXPECT_TRUE(d[0].files[1].deleted);
  EXPECT_EQ(git::unquote_path("\"caf\\303\\251\""), "caf\xc3\xa9");
  EXPECT_EQ(git::unquote_path("plain"), "plain");
}
