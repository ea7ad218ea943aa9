#include "harness/shard.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/json_read.h"

namespace kb {

using json = nlohmann::json;

namespace {

// The id the case will have in results (CaseResult::id(): backend/kernel[params]/dtype/shape/toolchain).
std::string result_id(const PlannedCase& pc) {
  return fmt::format("{}/{}", pc.c.kernel ? pc.c.kernel->backend : "?", pc.c.id());
}

std::string join_limited(const std::vector<std::string>& items, size_t limit = 8) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += fmt::format(", ... ({} more)", items.size() - limit);
  return out;
}

bool parse_int(const std::string& s, int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string ShardSpec::str() const { return fmt::format("{}/{}", index + 1, count); }

ShardSpec parse_shard(const std::string& text) {
  auto slash = text.find('/');
  int i = 0, n = 0;
  if (slash == std::string::npos || !parse_int(text.substr(0, slash), i) || !parse_int(text.substr(slash + 1), n))
    throw InputError(fmt::format("--shard '{}': expected I/N, e.g. 2/4 (1-based shard I of N)", text));
  if (n < 1) throw InputError(fmt::format("--shard '{}': the shard count N must be at least 1", text));
  if (i < 1 || i > n)
    throw InputError(fmt::format("--shard '{}': the shard index I must be between 1 and {} (1-based)", text, n));
  return ShardSpec{i - 1, n};
}

std::string case_list_hash(const std::vector<PlannedCase>& cases) {
  Hasher h;
  h.add("kbisect-case-list-v1");
  h.add(std::to_string(cases.size()));
  for (const auto& pc : cases) {
    h.add(result_id(pc));
    h.add(pc.toolchain ? pc.toolchain->identity : std::string());
  }
  return h.hex();
}

double estimated_cost(const PlannedCase& pc) {
  if (pc.skip_reason) return 1.0;
  double factor = pc.c.dtype == DType::f32 ? 1.0 : 0.5;
  return std::max(1.0, pc.c.shape.flops() * factor);
}

std::vector<size_t> shard_cases(const std::vector<PlannedCase>& cases, ShardSpec spec) {
  if (spec.count < 1 || spec.index < 0 || spec.index >= spec.count)
    throw InputError(fmt::format("shard {}: index out of range", spec.str()));
  struct Item {
    double cost;
    std::string id;
    size_t pos;
  };
  std::vector<Item> items;
  items.reserve(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) items.push_back({estimated_cost(cases[i]), result_id(cases[i]), i});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.cost != b.cost) return a.cost > b.cost;
    if (a.id != b.id) return a.id < b.id;
    return a.pos < b.pos;
  });
  std::vector<double> load(size_t(spec.count), 0.0);
  std::vector<size_t> picked;
  for (const auto& it : items) {
    size_t best = 0;
    for (size_t s = 1; s < load.size(); ++s)
      if (load[s] < load[best]) best = s;
    load[best] += it.cost;
    if (int(best) == spec.index) picked.push_back(it.pos);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

json ShardInfo::to_json() const {
  return json{{"sweep", sweep},          {"case_list_hash", case_list_hash}, {"index", spec.index + 1},
              {"count", spec.count},     {"total_cases", total_cases},       {"case_ids", case_ids},
              {"case_index", case_index}, {"all_case_ids", all_case_ids}, {"assignment", [&] {
                 std::vector<int> a;
                 for (int x : assignment) a.push_back(x + 1);
                 return a;
               }()}};
}

ShardInfo ShardInfo::from_json(const json& j, const std::string& origin) {
  ShardInfo s;
  auto field = [&](const char* name) -> const json& {
    if (!j.is_object() || !j.contains(name))
      throw InputError(fmt::format("{}: shard metadata lacks field '{}'", origin, name));
    return j.at(name);
  };
  try {
    s.sweep = field("sweep").get<std::string>();
    s.case_list_hash = field("case_list_hash").get<std::string>();
    const int index = json_int<int>(field("index"), origin + ": shard metadata 'index'");
    if (index < 1) throw InputError(fmt::format("{}: shard metadata: index {} out of range", origin, index));
    s.spec.count = json_int<int>(field("count"), origin + ": shard metadata 'count'");
    s.spec.index = index - 1;
    s.total_cases = json_int<size_t>(field("total_cases"), origin + ": shard metadata 'total_cases'");
    s.case_ids = field("case_ids").get<std::vector<std::string>>();
    for (const auto& x : field("case_index").get<std::vector<json>>())
      s.case_index.push_back(json_int<size_t>(x, origin + ": shard metadata 'case_index'"));
    s.all_case_ids = field("all_case_ids").get<std::vector<std::string>>();
    for (const auto& a : field("assignment").get<std::vector<json>>()) {
      const int shard = json_int<int>(a, origin + ": shard metadata 'assignment'");
      if (shard < 1) throw InputError(fmt::format("{}: shard metadata 'assignment' names shard {}", origin, shard));
      s.assignment.push_back(shard - 1);
    }
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: bad shard metadata: {}", origin, e.what()));
  }
  if (s.spec.count < 1 || s.spec.index < 0 || s.spec.index >= s.spec.count)
    throw InputError(fmt::format("{}: shard metadata: index {} of {} out of range", origin, s.spec.index + 1,
                                 s.spec.count));
  if (s.case_ids.size() != s.case_index.size())
    throw InputError(fmt::format("{}: shard metadata: {} case ids but {} case positions", origin, s.case_ids.size(),
                                 s.case_index.size()));
  if (s.all_case_ids.size() != s.total_cases || s.assignment.size() != s.total_cases)
    throw InputError(fmt::format("{}: shard metadata: total_cases {} but {} ids and {} assignments", origin,
                                 s.total_cases, s.all_case_ids.size(), s.assignment.size()));
  for (int a : s.assignment)
    if (a < 0 || a >= s.spec.count)
      throw InputError(fmt::format("{}: shard metadata: assignment to shard {} of {}", origin, a + 1, s.spec.count));
  for (size_t p : s.case_index)
    if (p >= s.total_cases)
      throw InputError(fmt::format("{}: shard metadata: case position {} beyond total_cases {}", origin, p,
                                   s.total_cases));
  return s;
}

ShardInfo make_shard_info(const Sweep& sweep, ShardSpec spec, const std::vector<size_t>& picked) {
  ShardInfo s;
  s.sweep = sweep.name;
  s.case_list_hash = case_list_hash(sweep.cases);
  s.spec = spec;
  s.total_cases = sweep.cases.size();
  for (size_t p : picked) {
    s.case_ids.push_back(result_id(sweep.cases.at(p)));
    s.case_index.push_back(p);
  }
  s.assignment.assign(sweep.cases.size(), -1);
  for (int k = 0; k < spec.count; ++k)
    for (size_t p : shard_cases(sweep.cases, ShardSpec{k, spec.count})) s.assignment[p] = k;
  for (const auto& pc : sweep.cases) s.all_case_ids.push_back(result_id(pc));
  return s;
}

std::optional<ShardInfo> shard_info(const RunResults& r, const std::string& origin) {
  if (!r.extra.is_object() || !r.extra.contains("shard")) return std::nullopt;
  return ShardInfo::from_json(r.extra["shard"], origin);
}

std::string result_case_list_hash(const RunResults& r) {
  if (r.extra.is_object() && r.extra.contains("case_list_hash") && r.extra["case_list_hash"].is_string())
    return r.extra["case_list_hash"].get<std::string>();
  if (r.extra.is_object() && r.extra.contains("shard") && r.extra["shard"].is_object())
    return r.extra["shard"].value("case_list_hash", "");
  return "";
}

namespace {

using OriginOf = std::function<std::string(size_t)>;

// The shards usable for the merge, grouped by shard index: the inputs with shard metadata that agree with
// the first such input on the sweep, the case list and the split. Every other input adds a problem.
std::vector<std::vector<size_t>> group_shards(const std::vector<RunResults>& shards, const OriginOf& origin,
                                              std::vector<ShardInfo>& infos, size_t& ref_index,
                                              std::vector<std::string>& problems) {
  std::vector<size_t> usable;  // indices into shards
  for (size_t i = 0; i < shards.size(); ++i) {
    auto si = shard_info(shards[i], origin(i));
    if (!si) {
      problems.push_back(fmt::format("{}: no shard metadata (not written by 'sweep --shard', or the shard did not finish)",
                                     origin(i)));
      infos.emplace_back();
      continue;
    }
    infos.push_back(*si);
    usable.push_back(i);
  }
  if (usable.empty()) throw InputError("merge: " + join_limited(problems, 20));
  // The reference: the first usable input.
  ref_index = usable.front();
  const ShardInfo& ref = infos[ref_index];
  std::vector<std::vector<size_t>> by_index(static_cast<size_t>(ref.spec.count));
  for (size_t i : usable) {
    const ShardInfo& s = infos[i];
    if (s.sweep != ref.sweep) {
      problems.push_back(fmt::format("{}: sweep '{}' differs from '{}' ({})", origin(i), s.sweep, ref.sweep,
                                     origin(ref_index)));
    } else if (s.case_list_hash != ref.case_list_hash) {
      problems.push_back(fmt::format(
          "{}: case-list hash {} differs from {} ({}): expanded from a different sweep file or toolchains",
          origin(i), s.case_list_hash.substr(0, 12), ref.case_list_hash.substr(0, 12), origin(ref_index)));
    } else if (s.spec.count != ref.spec.count || s.total_cases != ref.total_cases) {
      problems.push_back(fmt::format("{}: shard {} of a {}-way split, but {} is of a {}-way split", origin(i),
                                     s.spec.str(), s.spec.count, origin(ref_index), ref.spec.count));
    } else {
      by_index[size_t(s.spec.index)].push_back(i);
    }
  }
  return by_index;
}

// Every shard index given exactly once, and each shard holding every case its metadata lists.
void check_coverage(const std::vector<RunResults>& shards, const OriginOf& origin, const std::vector<ShardInfo>& infos,
                    const ShardInfo& ref, const std::vector<std::vector<size_t>>& by_index,
                    std::vector<std::string>& problems) {
  const int n = ref.spec.count;
  for (int s = 0; s < n; ++s) {
    const auto& got = by_index[size_t(s)];
    ShardSpec spec{s, n};
    if (got.empty()) {
      std::vector<std::string> ids;  // from the partition every shard records
      for (size_t p = 0; p < ref.total_cases; ++p)
        if (ref.assignment[p] == s) ids.push_back(ref.all_case_ids[p]);
      problems.push_back(ids.empty() ? fmt::format("shard {} missing (an empty shard: 0 cases)", spec.str())
                                     : fmt::format("shard {} missing ({} cases: {})", spec.str(), ids.size(),
                                                   join_limited(ids)));
      continue;
    }
    if (got.size() > 1) {
      std::vector<std::string> names;
      for (size_t i : got) names.push_back(origin(i));
      problems.push_back(fmt::format("shard {} given {} times ({})", spec.str(), got.size(), join_limited(names)));
      continue;
    }
    // Complete? every case id of its metadata present in its results.
    size_t i = got.front();
    std::set<std::string> have;
    for (const auto& c : shards[i].cases) have.insert(c.id());
    std::vector<std::string> lacking;
    for (const auto& id : infos[i].case_ids)
      if (!have.count(id)) lacking.push_back(id);
    if (!lacking.empty())
      problems.push_back(fmt::format("shard {} incomplete ({}): {} of {} cases missing ({})", spec.str(), origin(i),
                                     lacking.size(), infos[i].case_ids.size(), join_limited(lacking)));
  }
}

// The shards' cases in the full list's order, with each shard's run recorded in the environment.
RunResults combine(const std::vector<RunResults>& shards, const OriginOf& origin, const std::vector<ShardInfo>& infos,
                   const ShardInfo& ref, const std::vector<std::vector<size_t>>& by_index) {
  const int n = ref.spec.count;
  RunResults out;
  const RunResults& first = shards[by_index[0].front()];
  out.kind = first.kind;
  out.name = ref.sweep;
  out.sweep_file = first.sweep_file;
  out.environment = first.environment;
  out.environment["shards"] = json::array();
  std::vector<std::pair<size_t, const CaseResult*>> ordered;
  for (int s = 0; s < n; ++s) {
    size_t i = by_index[size_t(s)].front();
    const RunResults& r = shards[i];
    if (out.started.empty() || (!r.started.empty() && r.started < out.started)) out.started = r.started;
    if (r.finished > out.finished) out.finished = r.finished;
    out.wall_s = std::max(out.wall_s, r.wall_s);
    out.environment["shards"].push_back({{"shard", infos[i].spec.str()},
                                         {"host", r.environment.value("host", "")},
                                         {"started", r.started},
                                         {"finished", r.finished},
                                         {"wall_s", r.wall_s},
                                         {"cases", infos[i].case_ids.size()},
                                         {"origin", origin(i)}});
    std::map<std::string, size_t> pos_of;
    for (size_t k = 0; k < infos[i].case_ids.size(); ++k) pos_of[infos[i].case_ids[k]] = infos[i].case_index[k];
    for (const auto& c : r.cases) {
      auto it = pos_of.find(c.id());
      if (it == pos_of.end())
        throw InputError(fmt::format("{}: case {} is not in its shard metadata", origin(i), c.id()));
      ordered.emplace_back(it->second, &c);
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t k = 1; k < ordered.size(); ++k)
    if (ordered[k].first == ordered[k - 1].first)
      throw InputError(fmt::format("merge: case {} appears in two shards", ordered[k].second->id()));
  if (ordered.size() != ref.total_cases)
    throw InputError(fmt::format("merge: {} cases from the shards, but the sweep has {}", ordered.size(),
                                 ref.total_cases));
  for (const auto& [p, c] : ordered) out.cases.push_back(*c);
  out.extra = json{{"case_list_hash", ref.case_list_hash}, {"merged_shards", n}};
  return out;
}

}  // namespace

RunResults merge_results(const std::vector<RunResults>& shards, const std::vector<std::string>& origins) {
  OriginOf origin = [&](size_t i) {
    return i < origins.size() && !origins[i].empty() ? origins[i] : fmt::format("input {}", i + 1);
  };
  if (shards.empty()) throw InputError("merge: no shard results given");
  std::vector<std::string> problems;
  std::vector<ShardInfo> infos;
  size_t ref_index = 0;
  const auto by_index = group_shards(shards, origin, infos, ref_index, problems);
  const ShardInfo& ref = infos[ref_index];
  check_coverage(shards, origin, infos, ref, by_index, problems);
  if (!problems.empty()) {
    std::string msg = fmt::format("merge of sweep '{}' ({} shards): ", ref.sweep, ref.spec.count);
    for (size_t k = 0; k < problems.size(); ++k) msg += (k ? "; " : "") + problems[k];
    throw InputError(msg);
  }
  return combine(shards, origin, infos, ref, by_index);
}

}  // namespace kb
