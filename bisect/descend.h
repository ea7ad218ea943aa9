// Descend into a pin bump. A Triton-like repository pins its compiler dependency in a file
// (e.g. cmake/llvm-hash.txt); one outer commit that moves the pin spans many dependency commits. When the
// outer bisection names such a commit, a second bisection runs inside the dependency between the old and
// the new pinned commit, with the same cases, metric, threshold, budgets and decision machinery, in
// WORKDIR/descend/. Both levels are reported: the outer result.json gains a `descend` object, report.md a
// section, and the CLI prints "inner culprit: <sha> <subject>".
//
//   descend:
//     pin_file: cmake/llvm-hash.txt   # in the outer repo; its first whitespace-separated token is the commit
//     repo: ../llvm-project           # the dependency's repository, relative to the config file
//     provider: {in_tree: toolchain.yaml}   # the dependency's toolchain at a commit (build / prebuilt / in_tree)
#pragma once
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/bisector.h"
#include "bisect/config.h"
#include "core/text.h"

namespace YAML {
class Node;
}

namespace kb::bisect {

// Parses the `descend:` mapping (called by parse_bisect_config). `base_dir` is the config's directory;
// `parse_provider` is the config's own provider parser (same grammar). Errors name file:line:col.
DescendSpec parse_descend(const YamlCtx& cx, const YAML::Node& n, const std::string& base_dir,
                          const std::function<ProviderSpec(const YAML::Node&)>& parse_provider);

// The pinned commit in a pin file's text: the first whitespace-separated token, which must look like a
// git object name (4-40 hex digits) or a ref without spaces. Throws InputError naming `what` (file and
// commit) for an empty file.
std::string pin_token(const std::string& text, const std::string& what);

struct DescendResult {
  // not-configured | outer-not-culprit | pin-unchanged | descended
  std::string status;
  std::string line;              // one line in words for the CLI / logs
  std::string pin_file, outer_culprit, outer_parent;
  std::string old_pin, new_pin;  // as written in the pin file
  std::string old_sha, new_sha;  // resolved in the inner repository
  std::optional<BisectRun> inner;
  nlohmann::json json;           // the `descend` object added to the outer result.json
};

// The inner configuration: the outer one with repo / good / bad / provider replaced (no further descent).
BisectConfig inner_config(const BisectConfig& outer, const std::string& old_sha, const std::string& new_sha);

// After the outer bisection: descends when the outer culprit changes the pin file, then updates the outer
// reports (result.json `descend`, a report.md section). Returns status not-configured when the config has
// no `descend:`. Throws InputError for an unreadable / invalid pin (naming the file and the commit) or a
// pinned commit that the dependency's repository lacks.
DescendResult descend(const BisectConfig& outer, const BisectRun& outer_run, bool resume, const Log& log = nullptr);

// "inner culprit: <sha> <subject>" or "inner verdict: <verdict>" (empty when there was no descent).
std::string inner_line(const DescendResult& d);

// A bisection followed, when the config has `descend:`, by the descent into its culprit's pin bump: what
// every caller runs (`kbisect bisect`, the nightly's auto-bisect inline, a bisection running as a Slurm job),
// so that none of them stops at the commit that bumps the pin.
struct BisectAndDescent {
  BisectRun run;
  // status not-configured without `descend:`; "error" when the descent could not start (an invalid or
  // unknown pin): `line` then holds the error's message and the outer reports say so.
  DescendResult descent;
  // The line a caller prints before the final line: the inner culprit or verdict, why there was no descent,
  // or the error; empty without `descend:`.
  std::string descent_line() const;
};

// Runs bisect() (same arguments) and then descend(). An InputError of the descent (naming the pin file and
// the outer commit) is caught and returned as descent.status "error", so that the outer verdict is kept.
BisectAndDescent bisect_and_descend(const BisectConfig& cfg, const std::string& workdir, bool resume, const Log& log = nullptr,
                                    bool report_improvements = false, int workers = 0);

}  // namespace kb::bisect
