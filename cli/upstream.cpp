// kbisect upstream: upstream-sync dashboard for a compiler fork (days behind, backlog, pending
// commits as risky chains and low-risk bundles, an ingestion plan, emergency picks, weekly history).
// Definitions: upstream/upstream.h and docs/upstream.md.
#include <iostream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "git/git.h"
#include "upstream/upstream.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::cli {
namespace {

struct UpstreamArgs {
  std::string repo = ".", fork, upstream, config, formats = "table", out_dir, emergency;
  bool history = false;
};

int run_upstream(const UpstreamArgs& a) {
  static const std::vector<std::pair<std::string, std::string>> known = {
      {"table", "upstream.txt"}, {"json", "upstream.json"}, {"md", "upstream.md"}, {"html", "upstream.html"}};
  std::vector<std::pair<std::string, std::string>> wanted;
  size_t pos = 0;
  while (pos <= a.formats.size()) {
    size_t e = a.formats.find(',', pos);
    if (e == std::string::npos) e = a.formats.size();
    std::string f = a.formats.substr(pos, e - pos);
    pos = e + 1;
    if (f.empty()) continue;
    auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == f; });
    if (it == known.end())
      throw InputError(fmt::format("--format: unknown format '{}' (known: table, json, md, html)", f));
    wanted.push_back(*it);
  }
  if (wanted.empty()) throw InputError("--format: give at least one of table, json, md, html");

  upstream::Config cfg = a.config.empty() ? upstream::Config{} : upstream::load_config(a.config);
  git::Repo repo(a.repo);
  upstream::Options opt;
  opt.emergency = a.emergency;
  opt.history = a.history;
  if (progress_enabled()) std::cerr << "kbisect upstream: analysing " << a.fork << " vs " << a.upstream << "...\n";
  upstream::Report report = upstream::analyze(repo, a.fork, a.upstream, cfg, opt);

  for (const auto& [fmt_name, file] : wanted) {
    std::string text;
    if (fmt_name == "table") text = upstream::render_table(report);
    else if (fmt_name == "json") text = upstream::to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    else if (fmt_name == "md") text = upstream::render_markdown(report);
    else text = upstream::render_html(report);
    if (a.out_dir.empty()) {
      std::cout << text;
    } else {
      std::string path = a.out_dir + "/" + file;
      write_file_atomic(path, text);
      if (fmt_name == "table") std::cout << text;
      std::cerr << "wrote " << path << "\n";
    }
  }
  return kExitOk;
}

Registrar reg("upstream",
              "Upstream-sync dashboard for a compiler fork: days behind, backlog, risky chains vs low-risk bundles",
              [](CLI::App* app) {
                auto a = std::make_shared<UpstreamArgs>();
                app->add_option("--repo", a->repo, "Repository holding both the fork and upstream refs")
                    ->capture_default_str();
                app->add_option("--fork", a->fork, "The fork's ref (branch, tag or sha)")->required();
                app->add_option("--upstream", a->upstream, "Upstream's ref (e.g. upstream/main)")->required();
                app->add_option("--config", a->config,
                                "YAML: risky_paths, bundle_max_commits, dependency, hunk_margin, fork_changes_risky, "
                                "fork_conflicts, rebase_subjects, large_commit_lines, history_weeks, ... "
                                "(docs/upstream.md)");
                app->add_option("--format", a->formats, "Comma-separated: table, json, md, html")->capture_default_str();
                app->add_option("-o,--output-dir", a->out_dir,
                                "Write upstream.{txt,json,md,html} here (atomically) instead of stdout");
                app->add_option("--emergency", a->emergency,
                                "A pending upstream commit to pick alone: its dependency closure and the effect on "
                                "the metrics");
                app->add_flag("--history", a->history, "Days behind / backlog per week along the first-parent lines");
                return [a] { return run_upstream(*a); };
              });

}  // namespace
}  // namespace kb::cli
