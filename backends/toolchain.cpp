#include "backends/toolchain.h"

#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/backend.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"

namespace kb {

namespace {

std::string where(const std::string& origin, const YAML::Node& n) {
  const auto& m = n.Mark();
  if (m.line < 0) return origin;
  return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
}

std::string substitute(std::string s, const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    std::string pat = "{" + k + "}";
    for (size_t pos = 0; (pos = s.find(pat, pos)) != std::string::npos; pos += v.size()) s.replace(pos, pat.size(), v);
  }
  return s;
}

std::string scalar(const YAML::Node& n, const std::string& field, const std::string& origin) {
  if (!n.IsScalar()) throw InputError(fmt::format("{}: field '{}' must be a string", where(origin, n), field));
  return n.as<std::string>();
}

Toolchain parse_one(const YAML::Node& n, const std::string& origin, const std::map<std::string, std::string>& vars) {
  if (!n.IsMap()) throw InputError(fmt::format("{}: a toolchain must be a mapping", where(origin, n)));
  Toolchain tc;
  tc.origin = origin;
  static const std::vector<std::string> known = {"name", "backend", "kind", "compiler", "flags", "target",
                                                 "tools", "env", "description"};
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = it->first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw InputError(fmt::format("{}: unknown toolchain field '{}' (known: name, backend, kind, compiler, flags, "
                                   "target, tools, env, description)",
                                   where(origin, it->first), key));
  }
  for (const char* req : {"name", "backend", "kind"})
    if (!n[req]) throw InputError(fmt::format("{}: toolchain is missing field '{}'", where(origin, n), req));
  tc.name = scalar(n["name"], "name", origin);
  tc.backend = scalar(n["backend"], "backend", origin);
  tc.kind = scalar(n["kind"], "kind", origin);
  if (n["compiler"]) tc.compiler = substitute(scalar(n["compiler"], "compiler", origin), vars);
  if (n["target"]) tc.target = scalar(n["target"], "target", origin);
  if (n["description"]) tc.description = scalar(n["description"], "description", origin);
  if (auto f = n["flags"]) {
    if (f.IsSequence()) {
      for (const auto& x : f) tc.flags.push_back(substitute(scalar(x, "flags", origin), vars));
    } else if (f.IsScalar()) {
      // A string of flags is split on whitespace (no shell, no quoting).
      std::string s = f.as<std::string>();
      size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && isspace((unsigned char)s[i])) ++i;
        size_t j = i;
        while (j < s.size() && !isspace((unsigned char)s[j])) ++j;
        if (j > i) tc.flags.push_back(substitute(s.substr(i, j - i), vars));
        i = j;
      }
    } else {
      throw InputError(fmt::format("{}: field 'flags' must be a list or a string", where(origin, f)));
    }
  }
  for (const char* mapfield : {"tools", "env"}) {
    if (auto m = n[mapfield]) {
      if (!m.IsMap()) throw InputError(fmt::format("{}: field '{}' must be a mapping", where(origin, m), mapfield));
      for (auto it = m.begin(); it != m.end(); ++it) {
        auto& dst = std::string(mapfield) == "tools" ? tc.tools : tc.env;
        dst[it->first.as<std::string>()] = substitute(scalar(it->second, mapfield, origin), vars);
      }
    }
  }
  Backend* b = find_backend(tc.backend);
  if (!b) {
    std::string names;
    for (auto* x : backends()) names += (names.empty() ? "" : ", ") + x->name();
    throw InputError(fmt::format("{}: toolchain '{}': unknown backend '{}' (built in: {})", where(origin, n["backend"]),
                                 tc.name, tc.backend, names));
  }
  auto kinds = b->kinds();
  if (std::find(kinds.begin(), kinds.end(), tc.kind) == kinds.end()) {
    std::string ks;
    for (auto& k : kinds) ks += (ks.empty() ? "" : ", ") + k;
    throw InputError(fmt::format("{}: toolchain '{}': kind '{}' is not one of the {} backend's kinds ({})",
                                 where(origin, n["kind"]), tc.name, tc.kind, tc.backend, ks));
  }
  return tc;
}

}  // namespace

std::vector<Toolchain> parse_toolchains(const std::string& text, const std::string& origin,
                                        const std::map<std::string, std::string>& vars) {
  const YAML::Node root = yaml_load(text, origin);
  std::vector<Toolchain> out;
  if (root.IsMap() && root["toolchains"]) {
    const auto& list = root["toolchains"];
    if (!list.IsSequence()) throw InputError(fmt::format("{}: 'toolchains' must be a list", where(origin, list)));
    for (const auto& n : list) out.push_back(parse_one(n, origin, vars));
  } else if (root.IsMap()) {
    out.push_back(parse_one(root, origin, vars));
  } else {
    throw InputError(fmt::format("{}: expected a toolchain mapping or 'toolchains:' list", origin));
  }
  return out;
}

std::vector<Toolchain> load_toolchain_file(const std::string& path, const std::map<std::string, std::string>& vars) {
  auto v = vars;
  v.emplace("dir", std::filesystem::absolute(path).parent_path().string());
  return parse_toolchains(read_file(path), path, v);
}

std::vector<Toolchain> preset_toolchains() {
  std::vector<Toolchain> out;
  for (auto* b : backends())
    for (auto& t : b->presets()) out.push_back(std::move(t));
  return out;
}

Toolchain find_toolchain(const std::string& spec) {
  auto is_yaml = [](const std::string& p) {
    auto ext = std::filesystem::path(p).extension().string();
    return ext == ".yaml" || ext == ".yml";
  };
  std::string file = spec, pick;
  if (auto colon = spec.rfind(':'); colon != std::string::npos && is_yaml(spec.substr(0, colon))) {
    file = spec.substr(0, colon);
    pick = spec.substr(colon + 1);
  }
  if (is_yaml(file)) {
    if (!file_exists(file)) throw InputError(fmt::format("toolchain file not found: {}", file));
    auto list = load_toolchain_file(file);
    if (pick.empty()) {
      if (list.size() != 1)
        throw InputError(fmt::format("{} holds {} toolchains; select one with {}:NAME", file, list.size(), file));
      return list[0];
    }
    for (auto& t : list)
      if (t.name == pick) return t;
    throw InputError(fmt::format("{}: no toolchain named '{}'", file, pick));
  }
  auto presets = preset_toolchains();
  for (auto& t : presets)
    if (t.name == spec) return t;
  std::string names;
  for (auto& t : presets) names += (names.empty() ? "" : ", ") + t.name;
  throw InputError(fmt::format("unknown toolchain '{}' (found on this machine: {}; or give a toolchain .yaml file)",
                               spec, names.empty() ? "none" : names));
}

void resolve_identity(Toolchain& tc) {
  if (!tc.identity.empty()) return;
  static std::mutex mu;
  static std::map<std::string, std::pair<std::string, std::string>> memo;
  std::string key = tc.backend + "\n" + tc.kind + "\n" + tc.compiler + "\n" + tc.target + "\n" + tc.prebuilt;
  for (auto& f : tc.flags) key += "\n" + f;
  for (auto& [k, v] : tc.tools) key += "\n" + k + "=" + v;
  for (auto& [k, v] : tc.env) key += "\n" + k + "=" + v;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(key); it != memo.end()) {
      tc.identity = it->second.first;
      tc.version_text = it->second.second;
      return;
    }
  }
  backend_for(tc).identify(tc);
  std::lock_guard<std::mutex> lock(mu);
  memo[key] = {tc.identity, tc.version_text};
}

}  // namespace kb
