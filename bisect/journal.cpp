#include "bisect/journal.h"

#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "harness/results.h"

namespace kb::bisect {

using json = nlohmann::json;

std::vector<json> read_journal(const std::string& path) { return parse_journal(read_file(path), path); }

std::vector<json> parse_journal(const std::string& text, const std::string& path) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    try {
      out.push_back(json::parse(line));
    } catch (const json::exception& e) {
      // Only the last line may be torn (killed while writing); anything earlier is corruption.
      if (in.peek() == EOF) break;
      throw InputError(fmt::format("{}:{}: journal line is not JSON: {}", path, lineno, e.what()));
    }
  }
  return out;
}

Journal::Journal(std::string path, bool resume) : path_(std::move(path)) {
  if (!file_exists(path_)) return;
  std::string text = read_file(path_);
  if (text.empty()) return;
  if (!resume)
    throw InputError(fmt::format("journal {} already exists: continue it with --resume, or use another --workdir", path_));
  events_ = read_journal(path_);
  // Drop a torn tail so the next append starts on a line of its own.
  std::string clean;
  for (const auto& e : events_) clean += e.dump() + "\n";
  if (clean != text) write_file_atomic(path_, clean);
  for (size_t i = 0; i < events_.size(); ++i) {
    const json& e = events_[i];
    index(e, i);
    if (e.contains("wall_s") && (e["ev"] == "build_end" || e["ev"] == "measure"))
      replayed_wall_s_ += e["wall_s"].get<double>();
  }
}

void Journal::index(const json& ev, size_t i) {
  const std::string kind = ev.value("ev", std::string());
  if (kind == "build_end") probes_[ev.at("sha").get<std::string>()] = i;
  if (kind == "measure") measures_[ev.at("key").get<std::string>()] = i;
  if (kind == "decision") decisions_[ev.value("key", std::string())] = true;
  if (kind == "start" && !start_) start_ = i;
}

void Journal::append(json ev) {
  if (!ev.contains("ev")) throw Error("journal event without 'ev'");
  ev["at"] = now_iso8601();
  append_line_fsync(path_, ev.dump());
  events_.push_back(std::move(ev));
  index(events_.back(), events_.size() - 1);
}

const json* Journal::probe(const std::string& sha) const {
  auto it = probes_.find(sha);
  return it == probes_.end() ? nullptr : &events_[it->second];
}

const json* Journal::measurement(const std::string& key) const {
  auto it = measures_.find(key);
  return it == measures_.end() ? nullptr : &events_[it->second];
}

const json* Journal::start() const { return start_ ? &events_[*start_] : nullptr; }

bool Journal::has_decision(const std::string& key) const { return decisions_.count(key) != 0; }

}  // namespace kb::bisect
