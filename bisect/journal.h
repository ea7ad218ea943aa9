// The bisection journal: append-only JSON lines, one event per line, fsync'd as it is written
// (docs/design.md, rule 7). Events: start, build_start, build_end (the commit's probe: hashes, static values,
// failure reason), measure (every round's values and the decision), decision (a commit's side and how it
// was decided), verdict. A resumed run replays it: a commit whose build_end is there is never built again,
// a measurement whose event is there is never repeated. A kill -9 loses at most the event in flight: a
// torn last line is dropped when the journal is reopened.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kb::bisect {

class Journal {
 public:
  // Opens (creating) the journal at `path`. With `resume` false an existing non-empty journal is an
  // InputError (use --resume or another workdir); with `resume` true its events are read and indexed.
  Journal(std::string path, bool resume);

  const std::string& path() const { return path_; }
  const std::vector<nlohmann::json>& events() const { return events_; }
  // Appends one event ("ev" must be set) with a wall-clock timestamp, fsync'd.
  void append(nlohmann::json ev);

  // Replay indices.
  const nlohmann::json* probe(const std::string& sha) const;        // the build_end event of a commit
  const nlohmann::json* measurement(const std::string& key) const;  // the measure event with this key
  const nlohmann::json* start() const;                              // the first start event
  bool has_decision(const std::string& key) const;                  // a decision event with this key
  double replayed_wall_s() const { return replayed_wall_s_; }       // durations of replayed builds/measurements

 private:
  void index(const nlohmann::json& ev, size_t i);
  std::string path_;
  std::vector<nlohmann::json> events_;
  std::map<std::string, size_t> probes_, measures_;
  std::map<std::string, bool> decisions_;
  std::optional<size_t> start_;
  double replayed_wall_s_ = 0;
};

// Reads a journal's events (a torn last line is ignored). Throws InputError for a missing file.
std::vector<nlohmann::json> read_journal(const std::string& path);
// The same, from a journal's text (origin names it in errors).
std::vector<nlohmann::json> parse_journal(const std::string& text, const std::string& origin);

}  // namespace kb::bisect
