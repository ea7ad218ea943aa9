// The upstream config file (YAML): fields, defaults and errors that name file:line:column.
#include <algorithm>
#include <functional>
#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"
#include "upstream/internal.h"

namespace kb::upstream {

namespace {

struct YamlCx {
  std::string origin;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) throw InputError(fmt::format("{}: {}", origin, msg));
    throw InputError(fmt::format("{}:{}:{}: {}", origin, m.line + 1, m.column + 1, msg));
  }
  std::string scalar_text(const YAML::Node& n) const { return n.IsScalar() ? n.Scalar() : "(not a scalar)"; }
  int get_int(const YAML::Node& n, const std::string& field, int min) const {
    int v = 0;
    try {
      if (!n.IsScalar()) throw YAML::BadConversion(n.Mark());
      v = n.as<int>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("field '{}': expected an integer >= {}, got '{}'", field, min, scalar_text(n)));
    }
    if (v < min) fail(n, fmt::format("field '{}': expected an integer >= {}, got {}", field, min, v));
    return v;
  }
  bool get_bool(const YAML::Node& n, const std::string& field) const {
    try {
      if (!n.IsScalar()) throw YAML::BadConversion(n.Mark());
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("field '{}': expected true or false, got '{}'", field, scalar_text(n)));
    }
  }
};

}  // namespace

namespace {

// A number in [0, 1].
double share(const YamlCx& cx, const YAML::Node& v, const std::string& field) {
  double d = -1;
  try {
    d = v.as<double>();
  } catch (const YAML::Exception&) {
  }
  if (!(d >= 0 && d <= 1)) cx.fail(v, fmt::format("field '{}': expected a number in [0, 1], got '{}'", field, cx.scalar_text(v)));
  return d;
}

std::vector<std::string> string_list(const YamlCx& cx, const YAML::Node& v, const std::string& field, bool regex) {
  if (!v.IsSequence()) cx.fail(v, fmt::format("field '{}': expected a list of strings", field));
  std::vector<std::string> out;
  for (const auto& g : v) {
    if (!g.IsScalar() || g.Scalar().empty()) cx.fail(g, fmt::format("field '{}': each entry must be a non-empty string", field));
    if (regex) {
      try {
        (void)checked_regex(g.Scalar());
      } catch (const std::regex_error& e) {
        cx.fail(g, fmt::format("field '{}': bad regular expression '{}': {}", field, g.Scalar(), e.what()));
      }
    }
    out.push_back(g.Scalar());
  }
  return out;
}

Config::Skip skip_entry(const YamlCx& cx, const YAML::Node& e) {
  if (!e.IsMap()) cx.fail(e, "field 'skip': each entry must be a mapping with sha, pr or subject, and reason");
  Config::Skip k;
  k.kind = "won't port";
  for (const auto& kv : e) {
    const std::string key = kv.first.Scalar();
    if (key == "sha") k.sha = cx.scalar_text(kv.second);
    else if (key == "pr") k.pr = cx.get_int(kv.second, "skip.pr", 1);
    else if (key == "subject") k.subject = cx.scalar_text(kv.second);
    else if (key == "reason") k.reason = cx.scalar_text(kv.second);
    else if (key == "kind") {
      k.kind = cx.scalar_text(kv.second);
      if (k.kind != "won't port" && k.kind != "deferred")
        cx.fail(kv.second, fmt::format("field 'skip.kind': expected \"won't port\" or 'deferred', got '{}'", k.kind));
    } else {
      cx.fail(kv.first, fmt::format("field 'skip': unknown key '{}' (known: sha, pr, subject, reason, kind)", key));
    }
  }
  if (k.sha.empty() && k.pr == 0 && k.subject.empty()) cx.fail(e, "field 'skip': an entry needs sha, pr or subject");
  return k;
}

using Setter = std::function<void(const YamlCx&, const YAML::Node&, Config&)>;

const std::vector<std::pair<std::string, Setter>>& setters() {
  static const std::vector<std::pair<std::string, Setter>> s = {
      {"risky_paths", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         if (!v.IsSequence()) cx.fail(v, "field 'risky_paths': expected a list of path globs");
         c.risky_paths.clear();
         for (const auto& g : v) {
           if (!g.IsScalar() || g.Scalar().empty()) cx.fail(g, "field 'risky_paths': each entry must be a non-empty glob string");
           c.risky_paths.push_back(g.Scalar());
         }
       }},
      {"bundle_max_commits", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.bundle_max_commits = cx.get_int(v, "bundle_max_commits", 1); }},
      {"dependency", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         std::string s = cx.scalar_text(v);
         if (s == "hunk") c.dependency = Config::Level::Hunk;
         else if (s == "file") c.dependency = Config::Level::File;
         else cx.fail(v, fmt::format("field 'dependency': expected 'hunk' or 'file', got '{}'", s));
       }},
      {"hunk_margin", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.hunk_margin = cx.get_int(v, "hunk_margin", 0); }},
      {"fork_changes_risky", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.fork_changes_risky = cx.get_bool(v, "fork_changes_risky"); }},
      {"large_commit_lines", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.large_commit_lines = cx.get_int(v, "large_commit_lines", 0); }},
      {"history_weeks", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.history_weeks = cx.get_int(v, "history_weeks", 1); }},
      {"match_by_author", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.match_by_author = cx.get_bool(v, "match_by_author"); }},
      {"pick_presets", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         c.pick_presets = string_list(cx, v, "pick_presets", false);
         for (size_t i = 0; i < c.pick_presets.size(); ++i)
           if (c.pick_presets[i] != "git-x" && c.pick_presets[i] != "github-squash" && c.pick_presets[i] != "bundle")
             cx.fail(v[i], fmt::format("field 'pick_presets': unknown preset '{}' (known: git-x, github-squash, bundle)", c.pick_presets[i]));
       }},
      {"pick_trailers", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.pick_trailers = string_list(cx, v, "pick_trailers", true); }},
      {"upstream_pr_range", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         if (!v.IsSequence() || v.size() != 2) cx.fail(v, "field 'upstream_pr_range': expected [min, max] (0: open end)");
         c.upstream_pr_min = cx.get_int(v[0], "upstream_pr_range", 0);
         c.upstream_pr_max = cx.get_int(v[1], "upstream_pr_range", 0);
       }},
      {"upstream_pr_repo", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.upstream_pr_repo = cx.scalar_text(v); }},
      {"bundle_pick_headings", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.bundle_pick_headings = string_list(cx, v, "bundle_pick_headings", false); }},
      {"bundle_skip_headings", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.bundle_skip_headings = string_list(cx, v, "bundle_skip_headings", false); }},
      {"content_threshold", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.content_threshold = share(cx, v, "content_threshold"); }},
      {"fork_conflicts", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         std::string s = cx.scalar_text(v);
         if (s == "trial") c.fork_conflicts = Config::ForkConflicts::Trial;
         else if (s == "file") c.fork_conflicts = Config::ForkConflicts::File;
         else cx.fail(v, fmt::format("field 'fork_conflicts': expected 'trial' or 'file', got '{}'", s));
       }},
      {"conflict_margin", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.conflict_margin = cx.get_int(v, "conflict_margin", 0); }},
      {"rebase_subjects", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.rebase_subjects = string_list(cx, v, "rebase_subjects", true); }},
      {"rebase_file_share", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.rebase_file_share = share(cx, v, "rebase_file_share"); }},
      {"rebase_min_files", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.rebase_min_files = cx.get_int(v, "rebase_min_files", 1); }},
      {"content_min_lines", [](const YamlCx& cx, const YAML::Node& v, Config& c) { c.content_min_lines = cx.get_int(v, "content_min_lines", 1); }},
      {"skip", [](const YamlCx& cx, const YAML::Node& v, Config& c) {
         if (!v.IsSequence()) cx.fail(v, "field 'skip': expected a list of {sha|pr|subject, reason}");
         for (const auto& e : v) c.skip.push_back(skip_entry(cx, e));
       }},
  };
  return s;
}

}  // namespace

bool Config::preset(const std::string& name) const {
  return std::find(pick_presets.begin(), pick_presets.end(), name) != pick_presets.end();
}

Config parse_config(const std::string& yaml_text, const std::string& origin) {
  YamlCx cx{origin};
  const YAML::Node root = yaml_load(yaml_text, origin);
  Config c;
  c.source = origin;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) cx.fail(root, "an upstream config must be a mapping (risky_paths, bundle_max_commits, ...)");
  std::vector<std::string> known;
  for (const auto& [name, set] : setters()) known.push_back(name);
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    auto it = std::find_if(setters().begin(), setters().end(), [&](const auto& s) { return s.first == key; });
    if (it == setters().end())
      cx.fail(kv.first, fmt::format("unknown field '{}' (known: {})", key, detail::join(known, ", ")));
    it->second(cx, kv.second, c);
  }
  return c;
}

Config load_config(const std::string& path) { return parse_config(read_file(path), path); }

}  // namespace kb::upstream
