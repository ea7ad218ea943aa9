// The upstream config file (YAML): fields, defaults and errors that name file:line:column.
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

Config parse_config(const std::string& yaml_text, const std::string& origin) {
  YamlCx cx{origin};
  const YAML::Node root = yaml_load(yaml_text, origin);
  Config c;
  c.source = origin;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) cx.fail(root, "an upstream config must be a mapping (risky_paths, bundle_max_commits, ...)");
  static const std::vector<std::string> known = {"risky_paths",        "bundle_max_commits", "dependency",
                                                 "hunk_margin",        "fork_changes_risky", "large_commit_lines",
                                                 "history_weeks",      "match_by_author"};
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "risky_paths") {
      if (!v.IsSequence()) cx.fail(v, "field 'risky_paths': expected a list of path globs");
      c.risky_paths.clear();
      for (const auto& g : v) {
        if (!g.IsScalar() || g.Scalar().empty())
          cx.fail(g, "field 'risky_paths': each entry must be a non-empty glob string");
        c.risky_paths.push_back(g.Scalar());
      }
    } else if (key == "bundle_max_commits") {
      c.bundle_max_commits = cx.get_int(v, key, 1);
    } else if (key == "dependency") {
      std::string s = cx.scalar_text(v);
      if (s == "hunk") c.dependency = Config::Level::Hunk;
      else if (s == "file") c.dependency = Config::Level::File;
      else cx.fail(v, fmt::format("field 'dependency': expected 'hunk' or 'file', got '{}'", s));
    } else if (key == "hunk_margin") {
      c.hunk_margin = cx.get_int(v, key, 0);
    } else if (key == "fork_changes_risky") {
      c.fork_changes_risky = cx.get_bool(v, key);
    } else if (key == "match_by_author") {
      c.match_by_author = cx.get_bool(v, key);
    } else if (key == "large_commit_lines") {
      c.large_commit_lines = cx.get_int(v, key, 0);
    } else if (key == "history_weeks") {
      c.history_weeks = cx.get_int(v, key, 1);
    } else {
      cx.fail(kv.first, fmt::format("unknown field '{}' (known: {})", key, detail::join(known, ", ")));
    }
  }
  return c;
}

Config load_config(const std::string& path) { return parse_config(read_file(path), path); }

}  // namespace kb::upstream
