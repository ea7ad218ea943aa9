// Builds temporary git repositories for the upstream / git tests, through the project's process
// runner, with fixed author and committer dates so every metric is exact.
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/test_tmp.h"

namespace kbtest {

constexpr int64_t kDay0 = 1704067200;  // 2024-01-01 00:00 UTC, a Monday
constexpr int64_t kDay = 86400;
inline int64_t day(double d) { return kDay0 + int64_t(d * double(kDay)); }

class TempRepo {
 public:
  TempRepo() : dir_(kb::temp_dir("kb-upstream-test")) {
    home_ = dir_ + "/.home";
    kb::make_dirs(home_);
    root_ = dir_ + "/repo";
    kb::make_dirs(root_);
    git({"init", "-q", "-b", "up"});
  }
  ~TempRepo() {
    kbtest::remove_test_dir(dir_);
  }
  TempRepo(const TempRepo&) = delete;
  TempRepo& operator=(const TempRepo&) = delete;

  const std::string& path() const { return root_; }
  const std::string& tmp() const { return dir_; }

  // Runs git in the repo; when `when` >= 0 both author and committer dates are set to it.
  std::string git(const std::vector<std::string>& args, int64_t when = -1) {
    std::map<std::string, std::string> env;
    if (when >= 0) {
      std::string d = fmt::format("@{} +0000", when);
      env["GIT_AUTHOR_DATE"] = d;
      env["GIT_COMMITTER_DATE"] = d;
    }
    return run_git({"-c", "user.name=Test Author", "-c", "user.email=author@example.com", "-c", "commit.gpgsign=false",
                    "-c", "core.autocrlf=false"},
                   args, env, {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"});
  }
  // Runs git with only the committer date set (cherry-pick keeps the author date).
  std::string git_committer(const std::vector<std::string>& args, int64_t when) {
    return git_env(args, {{"GIT_COMMITTER_DATE", fmt::format("@{} +0000", when)}});
  }
  std::string git_env(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    return run_git({"-c", "user.name=Test Committer", "-c", "user.email=committer@example.com"}, args, env, {});
  }

  // Writes a file of `n` numbered lines "<stem> line <i>".
  void write_lines(const std::string& rel, const std::string& stem, int n) {
    std::string s;
    for (int i = 1; i <= n; ++i) s += fmt::format("{} line {}\n", stem, i);
    write(rel, s);
  }
  void write(const std::string& rel, const std::string& content) {
    std::string p = root_ + "/" + rel;
    auto slash = p.rfind('/');
    kb::make_dirs(p.substr(0, slash));
    std::ofstream(p, std::ios::binary) << content;
  }
  // Replaces line `n` (1-based) of a file.
  void set_line(const std::string& rel, int n, const std::string& text) {
    std::string content = kb::read_file(root_ + "/" + rel);
    std::vector<std::string> lines;
    std::stringstream ss(content);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
    lines.at(size_t(n - 1)) = text;
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    write(rel, out);
  }
  // Stages everything and commits at `when`; returns the new sha.
  std::string commit(const std::string& message, int64_t when) {
    git({"add", "-A"});
    git({"commit", "-q", "-m", message}, when);
    return git({"rev-parse", "HEAD"});
  }
  // set_line(rel, n, text), then commit(message, when): a commit that changes one line.
  std::string commit_line(const std::string& rel, int n, const std::string& text, const std::string& message,
                          int64_t when) {
    set_line(rel, n, text);
    return commit(message, when);
  }
  // Commits like commit(), with `raw` as the message byte for byte. git commit reads a message that is
  // not UTF-8 as Latin-1 and stores it as UTF-8, so a raw message without an encoding header (as old or
  // converted histories have) is made by rewriting the commit object.
  std::string commit_raw_message(const std::string& raw, int64_t when) {
    commit("kb-placeholder", when);
    const std::string obj = git({"cat-file", "commit", "HEAD"});
    const std::string object_file = root_ + "/.git/kb-raw-commit";
    std::ofstream(object_file, std::ios::binary) << obj.substr(0, obj.rfind("\n\nkb-placeholder")) << "\n\n" << raw << "\n";
    std::string sha = git({"hash-object", "-t", "commit", "-w", object_file});
    std::remove(object_file.c_str());
    git({"update-ref", "HEAD", sha});
    return sha;
  }

 private:
  // git -C ROOT CONFIG... ARGS with a private HOME and no system/global config; fails the test on error.
  std::string run_git(const std::vector<std::string>& config, const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env, const std::vector<std::string>& unset) {
    std::vector<std::string> argv = {"git", "-C", root_};
    argv.insert(argv.end(), config.begin(), config.end());
    argv.insert(argv.end(), args.begin(), args.end());
    kb::RunOptions o;
    o.timeout_s = 60;
    o.env_set = {{"HOME", home_}, {"GIT_CONFIG_NOSYSTEM", "1"}, {"GIT_CONFIG_GLOBAL", "/dev/null"},
                 {"LC_ALL", "C"}, {"GIT_EDITOR", "true"}};
    for (const auto& [k, v] : env) o.env_set[k] = v;
    o.env_unset = unset;
    kb::RunResult r = kb::run_process(argv, o);
    if (!r.ok()) {
      ADD_FAILURE() << kb::argv_to_display(argv) << " failed: " << r.status_text() << "\n" << r.err;
      throw std::runtime_error("git failed");
    }
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string dir_, home_, root_;
};

}  // namespace kbtest
