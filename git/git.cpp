#include "git/git.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::git {

namespace {

// Output of history-wide commands can be large; keep all of it (run_process keeps only a tail).
constexpr size_t kBigCapture = size_t(1) << 30;
// Commits per git process in batched calls (keeps argv/stdin and captured output bounded).
constexpr size_t kBatch = 400;

bool is_hex_line(const std::string& s) {
  if (s.size() != 40 && s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t e = s.find(sep, pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

std::vector<std::string> nonempty_lines(const std::string& s) {
  std::vector<std::string> out;
  for (auto& l : split(s, '\n'))
    if (!l.empty()) out.push_back(l);
  return out;
}

// Parses "-12,3" / "+7" (count defaults to 1).
bool parse_range(const std::string& tok, int& start, int& count) {
  if (tok.size() < 2) return false;
  try {
    size_t comma = tok.find(',');
    start = std::stoi(tok.substr(1, comma == std::string::npos ? std::string::npos : comma - 1));
    count = comma == std::string::npos ? 1 : std::stoi(tok.substr(comma + 1));
  } catch (...) {
    return false;
  }
  return start >= 0 && count >= 0;
}

// git ends a ---/+++ name that contains a space with a tab (for patch(1)); drop it.
std::string strip_tab(std::string s) {
  if (!s.empty() && s.back() == '\t') s.pop_back();
  return s;
}

// A path argument that cannot be read as an option.
std::string safe_path(const std::string& p) { return !p.empty() && p[0] == '-' ? "./" + p : p; }

}  // namespace

int FileDiff::lines_added() const {
  int n = 0;
  for (const auto& h : hunks) n += h.new_count;
  return n;
}
int FileDiff::lines_removed() const {
  int n = 0;
  for (const auto& h : hunks) n += h.old_count;
  return n;
}

std::string unquote_path(const std::string& s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return s;
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 2 >= s.size()) {
      out += c;
      continue;
    }
    char n = s[++i];
    switch (n) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      default:
        if (n >= '0' && n <= '7' && i + 2 < s.size()) {  // three octal digits: one byte
          int v = 0, k = 0;
          for (; k < 3 && i + k + 1 < s.size() && s[i + k] >= '0' && s[i + k] <= '7'; ++k) v = v * 8 + (s[i + k] - '0');
          out += static_cast<char>(v);
          i += k - 1;
        } else {
          out += n;
        }
    }
  }
  return out;
}

std::vector<CommitDiff> parse_diff_tree(const std::string& text) {
  std::vector<CommitDiff> out;
  std::vector<std::string> lines = split(text, '\n');
  auto cur_commit = [&]() -> CommitDiff& {
    if (out.empty()) out.emplace_back();
    return out.back();
  };
  FileDiff* file = nullptr;
  bool in_header = false;  // between "diff --git" and the first hunk of that file
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (is_hex_line(l)) {
      out.push_back(CommitDiff{l, {}});
      file = nullptr;
      continue;
    }
    if (l.rfind("diff --git ", 0) == 0) {
      auto& c = cur_commit();
      c.files.emplace_back();
      file = &c.files.back();
      in_header = true;
      std::string rest = l.substr(11);
      if (!rest.empty() && rest.front() == '"') {
        // "a/x y" "b/x y": take the second quoted token.
        size_t sp = rest.find("\" \"");
        if (sp != std::string::npos) {
          const std::string b = unquote_path(rest.substr(sp + 2));  // "b/x y" (or less, in a broken line)
          file->path = b.size() > 2 ? b.substr(2) : "";
        }
      } else if (rest.size() >= 5 && (rest.size() - 5) % 2 == 0) {
        // Renames are off, so "a/P b/P" holds the same path twice.
        file->path = rest.substr(2, (rest.size() - 5) / 2);
      }
      continue;
    }
    if (!file) continue;
    if (in_header) {
      if (l.rfind("new file mode", 0) == 0) {
        file->created = true;
      } else if (l.rfind("deleted file mode", 0) == 0) {
        file->deleted = true;
      } else if (l.rfind("Binary files ", 0) == 0 || l == "GIT binary patch") {
        file->binary = true;
      } else if (l.rfind("+++ ", 0) == 0) {
        std::string p = unquote_path(strip_tab(l.substr(4)));
        if (p != "/dev/null" && p.size() > 2) file->path = p.substr(2);
      } else if (l.rfind("--- ", 0) == 0) {
        std::string p = unquote_path(strip_tab(l.substr(4)));
        if (p != "/dev/null" && p.size() > 2 && file->path.empty()) file->path = p.substr(2);
      }
    }
    if (l.rfind("@@ ", 0) == 0) {
      in_header = false;
      // "@@ -a,b +c,d @@ context"
      size_t end = l.find(" @@", 3);
      auto toks = split(l.substr(3, end == std::string::npos ? std::string::npos : end - 3), ' ');
      Hunk h;
      if (toks.size() < 2 || !parse_range(toks[0], h.old_start, h.old_count) ||
          !parse_range(toks[1], h.new_start, h.new_count))
        throw Error(fmt::format("cannot parse git diff hunk header: {}", l));
      file->hunks.push_back(h);
      // Skip the body by its counts: it may contain lines that look like headers.
      int removed = 0, added = 0;
      while (i + 1 < lines.size() && (removed < h.old_count || added < h.new_count ||
                                      (!lines[i + 1].empty() && lines[i + 1][0] == '\\'))) {
        const std::string& b = lines[++i];
        if (b.empty()) continue;  // a context line of an empty line (no context with -U0; be lenient)
        if (b[0] == '-') ++removed;
        else if (b[0] == '+') ++added;
        else if (b[0] == ' ') ++removed, ++added;
      }
    }
  }
  return out;
}

Repo::Repo(std::string dir, double timeout_s) : dir_(std::move(dir)), timeout_s_(timeout_s) {
  struct stat st;
  if (dir_.empty() || stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InputError(fmt::format("repository directory '{}' does not exist", dir_));
  RunResult r = run({"rev-parse", "--git-dir"});
  if (!r.ok()) throw InputError(fmt::format("'{}' is not a git repository: {}", dir_, tail(r.err, 300)));
}

RunResult Repo::run(const std::vector<std::string>& args, std::optional<std::string> stdin_data) const {
  std::vector<std::string> argv = {"git",     "-C", dir_,   "--no-pager", "-c", "core.quotepath=off",
                                   "-c",      "color.ui=never", "-c", "log.showSignature=false",
                                   "-c",      "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
                                   "-c",      "core.abbrev=40"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.timeout_s = timeout_s_;
  o.env_set = {{"LC_ALL", "C"}, {"GIT_TERMINAL_PROMPT", "0"}};
  o.env_unset = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
                 "GIT_CEILING_DIRECTORIES", "GIT_EXTERNAL_DIFF"};
  o.stdin_data = std::move(stdin_data);
  o.max_capture = kBigCapture;
  return run_process(argv, o);
}

std::string Repo::check(const std::vector<std::string>& args, std::optional<std::string> stdin_data) const {
  RunResult r = run(args, std::move(stdin_data));
  if (!r.ok()) {
    std::vector<std::string> shown = {"git", "-C", dir_};
    shown.insert(shown.end(), args.begin(), args.end());
    throw Error(fmt::format("{} failed ({}): {}", argv_to_display(shown), r.status_text(), tail(r.err, 600)));
  }
  return r.out;
}

std::optional<std::string> Repo::try_resolve(const std::string& ref) const {
  if (ref.empty() || ref[0] == '-') return std::nullopt;
  RunResult r = run({"rev-parse", "--verify", "--quiet", ref + "^{commit}"});
  if (!r.ok()) return std::nullopt;
  auto lines = nonempty_lines(r.out);
  if (lines.size() != 1 || !is_hex_line(lines[0])) return std::nullopt;
  return lines[0];
}

std::string Repo::resolve(const std::string& ref, const std::string& what) const {
  if (auto s = try_resolve(ref)) return *s;
  throw InputError(fmt::format("{} '{}' is not a commit in repository {}", what, ref, dir_));
}

bool Repo::is_ancestor(const std::string& ancestor, const std::string& descendant) const {
  RunResult r = run({"merge-base", "--is-ancestor", ancestor, descendant});
  if (r.ok()) return true;
  if (!r.timed_out && r.signal == 0 && r.exit_code == 1) return false;
  throw Error(fmt::format("git merge-base --is-ancestor {} {} failed ({}): {}", ancestor, descendant,
                          r.status_text(), tail(r.err, 600)));
}

std::vector<std::string> Repo::merge_bases(const std::string& a, const std::string& b) const {
  RunResult r = run({"merge-base", "--all", a, b});
  if (r.ok()) return nonempty_lines(r.out);
  if (!r.timed_out && r.signal == 0 && r.exit_code == 1 && r.err.empty()) return {};
  throw Error(fmt::format("git merge-base --all {} {} failed ({}): {}", a, b, r.status_text(), tail(r.err, 600)));
}

std::optional<std::string> Repo::merge_base(const std::string& a, const std::string& b) const {
  RunResult r = run({"merge-base", a, b});
  if (r.ok()) {
    auto l = nonempty_lines(r.out);
    if (!l.empty()) return l[0];
  }
  if (!r.timed_out && r.signal == 0 && r.exit_code == 1 && r.err.empty()) return std::nullopt;
  if (r.ok()) return std::nullopt;
  throw Error(fmt::format("git merge-base {} {} failed ({}): {}", a, b, r.status_text(), tail(r.err, 600)));
}

std::vector<std::string> Repo::rev_list(const std::vector<std::string>& revs, const RevListOptions& opts) const {
  std::vector<std::string> args = {"rev-list"};
  if (opts.first_parent) args.push_back("--first-parent");
  if (opts.reverse) args.push_back("--reverse");
  if (opts.topo_order) args.push_back("--topo-order");
  if (opts.no_merges) args.push_back("--no-merges");
  if (opts.max_count >= 0) args.push_back(fmt::format("--max-count={}", opts.max_count));
  if (opts.until >= 0) args.push_back(fmt::format("--min-age={}", opts.until));
  if (opts.since >= 0) args.push_back(fmt::format("--max-age={}", opts.since));
  for (const auto& r : revs)
    if (!r.empty() && r[0] == '-' && r.rfind("--", 0) != 0 && r != "--not")
      throw InputError(fmt::format("revision '{}' looks like an option", r));
  args.insert(args.end(), revs.begin(), revs.end());
  args.push_back("--");
  return nonempty_lines(check(args));
}

std::vector<std::string> Repo::commits_between(const std::string& good, const std::string& bad,
                                               bool first_parent) const {
  std::string g = resolve(good, "good ref"), b = resolve(bad, "bad ref");
  RevListOptions o;
  o.first_parent = first_parent;
  o.reverse = true;
  o.topo_order = !first_parent;
  return rev_list({b, "^" + g}, o);
}

std::vector<CommitInfo> Repo::commit_infos(const std::vector<std::string>& revs) const {
  // Distinct inputs, one log process per batch; results mapped back to the requested order.
  std::vector<std::string> uniq;
  std::unordered_map<std::string, size_t> seen;
  for (const auto& r : revs) {
    if (r.empty() || r[0] == '-') throw InputError(fmt::format("revision '{}' is not a commit", r));
    if (seen.emplace(r, uniq.size()).second) uniq.push_back(r);
  }
  constexpr int kFields = 8;
  std::vector<CommitInfo> infos(uniq.size());
  for (size_t b = 0; b < uniq.size(); b += kBatch) {
    size_t e = std::min(uniq.size(), b + kBatch);
    std::string in;
    for (size_t i = b; i < e; ++i) in += uniq[i] + "\n";
    std::string out = check({"log", "--no-walk=unsorted", "--stdin", "-z", "--no-color", "--no-mailmap",
                             "--format=%H%x00%P%x00%an%x00%ae%x00%at%x00%ct%x00%s%x00%B"},
                            in);
    auto toks = split(out, '\0');
    if (!toks.empty() && toks.back().empty() && toks.size() % kFields == 1) toks.pop_back();
    if (toks.size() != (e - b) * kFields)
      throw Error(fmt::format("git log returned {} fields for {} commits", toks.size(), e - b));
    for (size_t i = b; i < e; ++i) {
      const std::string* f = &toks[(i - b) * kFields];
      CommitInfo& c = infos[i];
      c.sha = f[0];
      for (auto& p : split(f[1], ' '))
        if (!p.empty()) c.parents.push_back(p);
      c.author_name = f[2];
      c.author_email = f[3];
      c.author_time = std::stoll(f[4]);
      c.commit_time = std::stoll(f[5]);
      c.subject = f[6];
      c.message = f[7];
      while (!c.message.empty() && c.message.back() == '\n') c.message.pop_back();
    }
  }
  std::vector<CommitInfo> result;
  result.reserve(revs.size());
  for (const auto& r : revs) result.push_back(infos[seen.at(r)]);
  return result;
}

CommitInfo Repo::commit_info(const std::string& rev) const {
  return commit_infos({resolve(rev)}).front();
}

std::vector<ChangedFile> Repo::changed_files(const std::string& rev) const {
  CommitInfo c = commit_info(rev);
  std::vector<std::string> args = {"diff-tree", "-r", "-z", "--name-status", "--no-renames", "--no-commit-id", "--root"};
  if (c.is_merge()) args.push_back(c.parents[0]);
  args.push_back(c.sha);
  auto toks = split(check(args), '\0');
  std::vector<ChangedFile> out;
  for (size_t i = 0; i + 1 < toks.size(); i += 2) {
    if (toks[i].empty()) break;
    out.push_back({toks[i][0], toks[i + 1]});
  }
  std::sort(out.begin(), out.end(), [](const ChangedFile& a, const ChangedFile& b) { return a.path < b.path; });
  return out;
}

CommitDiff Repo::diff(const std::string& rev) const {
  CommitInfo c = commit_info(rev);
  std::vector<std::string> args = {"diff-tree", "-p", "-U0", "-r", "--no-renames", "--no-ext-diff",
                                   "--no-textconv", "--no-commit-id", "--root"};
  if (c.is_merge()) args.push_back(c.parents[0]);
  args.push_back(c.sha);
  auto parsed = parse_diff_tree(check(args));
  CommitDiff d;
  d.sha = c.sha;
  for (auto& p : parsed)
    for (auto& f : p.files) d.files.push_back(std::move(f));
  return d;
}

std::vector<CommitDiff> Repo::diffs(const std::vector<std::string>& shas) const {
  std::vector<CommitDiff> out;
  for (size_t b = 0; b < shas.size(); b += kBatch) {
    size_t e = std::min(shas.size(), b + kBatch);
    std::string in;
    for (size_t i = b; i < e; ++i) in += shas[i] + "\n";
    auto parsed = parse_diff_tree(check({"diff-tree", "--stdin", "--always", "-p", "-U0", "-r", "--no-renames",
                                         "--no-ext-diff", "--no-textconv", "--root"},
                                        in));
    if (parsed.size() != e - b)
      throw Error(fmt::format("git diff-tree returned {} diffs for {} commits", parsed.size(), e - b));
    for (size_t i = b; i < e; ++i) {
      if (parsed[i - b].sha != shas[i])
        throw Error(fmt::format("git diff-tree returned {} where {} was expected", parsed[i - b].sha, shas[i]));
      out.push_back(std::move(parsed[i - b]));
    }
  }
  return out;
}

std::map<std::string, std::string> Repo::patch_ids(const std::vector<std::string>& shas) const {
  std::map<std::string, std::string> out;
  for (size_t b = 0; b < shas.size(); b += kBatch) {
    size_t e = std::min(shas.size(), b + kBatch);
    std::string in;
    for (size_t i = b; i < e; ++i) in += shas[i] + "\n";
    // diff-tree prefixes each patch with the commit's name, which patch-id reports back.
    std::string patches = check(
        {"diff-tree", "--stdin", "-p", "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--root"}, in);
    if (patches.empty()) continue;
    for (const auto& line : nonempty_lines(check({"patch-id", "--stable"}, patches))) {
      size_t sp = line.find(' ');
      if (sp == std::string::npos) continue;
      out[line.substr(sp + 1)] = line.substr(0, sp);
    }
  }
  return out;
}

std::optional<std::string> Repo::patch_id(const std::string& rev) const {
  std::string sha = resolve(rev);
  auto m = patch_ids({sha});
  auto it = m.find(sha);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string Repo::show_file(const std::string& rev, const std::string& path) const {
  std::string sha = resolve(rev);
  RunResult r = run({"cat-file", "blob", sha + ":" + path});
  if (!r.ok()) throw InputError(fmt::format("no file '{}' at {} in repository {}", path, rev, dir_));
  return r.out;
}

void Repo::worktree_add(const std::string& path, const std::string& rev) const {
  std::string sha = resolve(rev);
  check({"worktree", "add", "--detach", safe_path(path), sha});
}

void Repo::worktree_remove(const std::string& path, bool force) const {
  std::vector<std::string> args = {"worktree", "remove"};
  if (force) args.push_back("--force");
  args.push_back(safe_path(path));
  check(args);
}

}  // namespace kb::git
