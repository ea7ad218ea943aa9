// Bisection reports: result.json (verdict, culprit with effect and CI, every step with its evidence,
// builds / samples / wall time), report.md, and a self-contained report.html with an inline SVG plot of
// the metric along the commits (measured points with CIs, same-code points, skipped commits, the step at
// the culprit). All written atomically.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "git/git.h"

namespace kb::bisect {

struct ReportPaths {
  std::string result_json, report_md, report_html;
};

nlohmann::json result_json(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits);
std::string report_markdown(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits);
std::string report_html(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits);
// The plot alone (an <svg> element).
std::string plot_svg(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits);

ReportPaths write_reports(const BisectConfig& cfg, const Outcome& o, const std::vector<git::CommitInfo>& commits,
                          const std::string& dir);

// Expensive samples: "runs: 23 (at most 3 in flight), 184.0 GPU-hours (8 GPUs x 1 h per run, given)", "" otherwise.
std::string runs_summary(const BisectConfig& cfg, const Outcome& o);
// What a sample of the config's metric is called in the reports: "timing samples", or "samples of the metric"
// for an external one (a run of its command).
std::string samples_label(const BisectConfig& cfg);

// The CLI's last line: "culprit: <sha> <subject>" or "verdict: <verdict>".
std::string final_line(const Outcome& o, const std::vector<git::CommitInfo>& commits);

}  // namespace kb::bisect
