#include "backends/triton/prebuilt.h"

#include <ctime>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/triton/triton_compile.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"

namespace kb::triton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "triton 3.5.1 git abc (/path)" -> "3.5.1".
std::string release_of(const Toolchain& tc) {
  const std::string release = triton_release(tc);
  if (release.empty())
    throw InputError(fmt::format("toolchain '{}': cannot tell its Triton release from '{}'", tc.name, tc.version_text));
  return release;
}

json read_record(const std::string& record) {
  json r;
  try {
    r = json::parse(read_file(record));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not a prebuilt Triton record: {}", record, e.what()));
  }
  if (!r.is_object() || r.value("format", "") != "kbisect-triton-prebuilt/1")
    throw InputError(fmt::format("{}: field 'format' is not kbisect-triton-prebuilt/1", record));
  for (const char* f : {"toolchains", "not_built"})
    if (!r.contains(f) || !r[f].is_array()) throw InputError(fmt::format("{}: field '{}' must be a list", record, f));
  return r;
}

std::string origin_text(const json& r) {
  return fmt::format("made on {} at {}", r.value("made_on", "?"), r.value("made_at", "?"));
}

}  // namespace

std::vector<std::string> write_prebuilt_records(const std::string& dir, const std::vector<Toolchain>& toolchains,
                                                const std::vector<std::pair<std::string, NotBuilt>>& not_built,
                                                const std::string& made_on) {
  std::map<std::string, json> by_release;
  std::map<std::string, std::string> release_of_tc;
  for (const auto& tc : toolchains) {
    if (tc.kind != "triton") continue;
    if (tc.identity.empty()) throw Error(fmt::format("toolchain '{}': identity not resolved", tc.name));
    const std::string rel = release_of(tc);
    if (!release_of_tc.emplace(tc.name, rel).second) continue;  // a sweep names a toolchain once per case
    json& r = by_release[rel];
    if (r.is_null())
      r = json{{"format", "kbisect-triton-prebuilt/1"}, {"triton", rel}, {"made_on", made_on},
               {"made_at", utc_time(std::time(nullptr), "%Y-%m-%dT%H:%M:%SZ")},
               {"toolchains", json::array()}, {"not_built", json::array()}};
    r["toolchains"].push_back(json{{"name", tc.name}, {"backend", tc.backend}, {"target", tc.target},
                                   {"flags", tc.flags}, {"env", tc.env}, {"identity", tc.identity},
                                   {"version_text", tc.version_text}});
  }
  for (const auto& [tc_name, nb] : not_built) {
    auto it = release_of_tc.find(tc_name);
    if (it == release_of_tc.end()) continue;
    by_release[it->second]["not_built"].push_back(
        json{{"cache_key", nb.cache_key}, {"case", nb.case_id}, {"status", nb.status}, {"reason", nb.reason}});
  }
  std::vector<std::string> written;
  for (auto& [rel, r] : by_release) {
    const std::string d = fmt::format("{}/triton/triton-{}", dir, rel);
    make_dirs(d);
    // A second prebuild into the same directory adds to the record: toolchains by name, cases by key.
    if (file_exists(d + "/" + kPrebuiltRecord)) {
      const json old = read_record(d + "/" + kPrebuiltRecord);
      auto keep = [](json& into, const json& from, const char* field, const char* id) {
        for (const auto& e : from[field]) {
          bool have = false;
          for (const auto& n : into[field]) have |= n.value(id, "") == e.value(id, "");
          if (!have) into[field].push_back(e);
        }
      };
      keep(r, old, "toolchains", "name");
      keep(r, old, "not_built", "cache_key");
    }
    write_file_atomic(d + "/" + kPrebuiltRecord, r.dump(1) + "\n");
    written.push_back(d + "/" + kPrebuiltRecord);
  }
  return written;
}

std::vector<Toolchain> prebuilt_toolchains(const std::string& record, const std::string& backend) {
  const json r = read_record(record);
  std::vector<Toolchain> out;
  for (const auto& t : r["toolchains"]) {
    if (!t.is_object() || !t.contains("name") || !t.contains("identity"))
      throw InputError(fmt::format("{}: every entry of 'toolchains' needs 'name' and 'identity'", record));
    if (t.value("backend", "") != backend) continue;
    Toolchain tc;
    tc.name = t.value("name", "");
    tc.backend = backend;
    tc.kind = "triton";
    tc.target = t.value("target", "");
    tc.flags = t.value("flags", std::vector<std::string>{});
    tc.env = t.value("env", std::map<std::string, std::string>{});
    tc.origin = "preset";
    tc.prebuilt = record;
    tc.version_text = t.value("version_text", "");
    tc.description = fmt::format("Triton {} for {}, prebuilt ({}; {}): runs the builds it came with, compiles nothing",
                                 r.value("triton", "?"), tc.target, origin_text(r), fs::path(record).parent_path().string());
    out.push_back(std::move(tc));
  }
  return out;
}

void identify_prebuilt(Toolchain& tc) {
  const json r = read_record(tc.prebuilt);
  for (const auto& t : r["toolchains"])
    if (t.value("name", "") == tc.name && t.value("target", "") == tc.target) {
      tc.identity = t.value("identity", "");
      tc.version_text = fmt::format("{} [prebuilt, {}]", t.value("version_text", ""), origin_text(r));
      if (tc.identity.empty()) throw InputError(fmt::format("{}: toolchain '{}' has an empty 'identity'", tc.prebuilt, tc.name));
      return;
    }
  throw InputError(fmt::format("{}: no prebuilt toolchain '{}' for {}", tc.prebuilt, tc.name, tc.target));
}

void refuse_prebuilt_compile(const CompileRequest& req, const std::string& cache_key) {
  const Toolchain& tc = *req.toolchain;
  const json r = read_record(tc.prebuilt);
  for (const auto& nb : r["not_built"]) {
    if (nb.value("cache_key", "") != cache_key) continue;
    const std::string why = fmt::format("{} (as prebuilt: {})", nb.value("reason", ""), origin_text(r));
    if (nb.value("status", "") == "skipped") throw CompileSkipped(why);
    throw CompileError(fmt::format("{}: {}", tc.name, why), "");
  }
  throw CompileError(fmt::format("{}: {}[{}]/{} is not among the builds of this prebuilt Triton ({}; {}): its "
                                 "Triton is not on this machine, so run `kbisect prebuild` with this case where it is",
                                 tc.name, req.kernel->name, req.params.str(), to_string(req.dtype), origin_text(r),
                                 tc.prebuilt),
                     "");
}

}  // namespace kb::triton
