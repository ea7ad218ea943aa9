#include "bisect/oracle.h"

#include <cmath>

namespace kb::bisect {

using json = nlohmann::json;

// ---- probe ---------------------------------------------------------------------------------------

std::string Probe::hash_key() const {
  if (!ok) return "";
  std::string k;
  for (size_t i = 0; i < code_hashes.size(); ++i) k += case_ids[i] + "=" + code_hashes[i] + ";";
  return k;
}

json to_json(const Probe& p) {
  json j = {{"ok", p.ok}, {"built", p.built}, {"build_s", p.build_s}};
  if (!p.ok) j["reason"] = p.reason;
  j["cases"] = p.case_ids;
  j["code_hashes"] = p.code_hashes;
  j["values"] = p.values;
  j["toolchain_identity"] = p.toolchain_identity;
  return j;
}

Probe probe_from_json(const json& j) {
  Probe p;
  p.ok = j.at("ok").get<bool>();
  p.built = j.value("built", false);
  p.build_s = j.value("build_s", 0.0);
  p.reason = j.value("reason", std::string());
  p.case_ids = j.value("cases", std::vector<std::string>{});
  p.code_hashes = j.value("code_hashes", std::vector<std::string>{});
  p.values = j.value("values", std::vector<double>{});
  p.toolchain_identity = j.value("toolchain_identity", std::string());
  return p;
}

// ---- blocks --------------------------------------------------------------------------------------

std::vector<double> block_summary(const Rounds& block) {
  std::vector<double> out(block.size(), 0.0);
  if (block.empty() || block[0].empty()) return out;
  const double ref = stats::median(block[0]);
  out[0] = ref;
  for (size_t c = 1; c < block.size(); ++c)
    out[c] = ref * std::exp(stats::median(stats::log_ratios(block[0], block[c])));
  return out;
}

void add_block(Measured& m, const Rounds& block) {
  const std::vector<double> sum = block_summary(block);
  m.raw.resize(block.size());
  m.units.resize(block.size());
  for (size_t c = 0; c < block.size(); ++c) {
    m.raw[c].insert(m.raw[c].end(), block[c].begin(), block[c].end());
    m.units[c].push_back(sum[c]);
  }
}

}  // namespace kb::bisect
