// Content-addressed compile cache (docs/design.md, rule 3). Key = hash(kernel sources, params, dtype,
// toolchain identity, target, backend). A re-run never recompiles.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "backends/backend.h"

namespace kb {

class CompileCache {
 public:
  explicit CompileCache(std::string dir = default_cache_dir_for_compile());
  static std::string default_cache_dir_for_compile();
  const std::string& dir() const { return dir_; }

  std::string key(const CompileRequest& req) const;
  // Returns the cached artifact (cache_hit = true) or compiles it with the backend and stores it.
  // Compile failures are not cached. Concurrent processes may compile the same key; the rename of
  // the finished directory makes the last one win harmlessly.
  Artifact compile(Backend& backend, CompileRequest req);

 private:
  std::string dir_;
};

// Artifact <-> JSON (used by the cache, results and journals). to_json/from_json let nlohmann convert
// an Artifact directly (json(a), j.get<Artifact>()).
void to_json(nlohmann::json& j, const Artifact& a);
void from_json(const nlohmann::json& j, Artifact& a);
std::string artifact_to_json(const Artifact& a);
Artifact artifact_from_json(const std::string& text);

}  // namespace kb
