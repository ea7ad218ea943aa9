#include "bisect/descend.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "git/git.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"

namespace kb::bisect {

namespace fs = std::filesystem;
using json = nlohmann::json;
using git::short_sha;

namespace {


std::string scalar(const YamlCtx& cx, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) cx.fail(n, fmt::format("'{}' must be a string", field));
  if (n.Scalar().empty()) cx.fail(n, fmt::format("'{}' is empty", field));
  return n.Scalar();
}

// The `descend` object for result.json and the report.md section, for every status.
void update_outer_reports(const BisectRun& outer_run, const DescendResult& d) {
  if (!outer_run.result_json.empty() && file_exists(outer_run.result_json)) {
    json j = json::parse(read_file(outer_run.result_json));
    j["descend"] = d.json;
    write_file_atomic(outer_run.result_json, j.dump(2) + "\n");
  }
  if (!outer_run.report_html.empty() && file_exists(outer_run.report_html)) {
    std::string html = read_file(outer_run.report_html);
    const std::string open = "<section id=\"descend\">", close = "</section><!--descend-->";
    if (auto at = html.find(open); at != std::string::npos) {
      auto end = html.find(close, at);
      html.erase(at, end == std::string::npos ? std::string::npos : end + close.size() - at);
    }
    std::string sec = open + "<h2>Descent into <code>" + html_escape(d.pin_file) + "</code></h2><p>" +
                      html_escape(d.status == "descended" ? inner_line(d) : d.line) + "</p>";
    if (d.inner)
      sec += "<p>" + html_escape(d.inner->outcome.summary) + "</p><p>inner report: <a href=\"descend/report.html\">" +
             "descend/report.html</a></p>";
    sec += close;
    const auto body = html.rfind("</body>");
    html.insert(body == std::string::npos ? html.size() : body, sec);
    write_file_atomic(outer_run.report_html, html);
  }
  if (outer_run.report_md.empty() || !file_exists(outer_run.report_md)) return;
  std::string md = read_file(outer_run.report_md);
  const std::string head = "\n## Descent into `" + d.pin_file + "`\n\n";
  if (auto at = md.find(head); at != std::string::npos) md.resize(at);  // a resumed run rewrites it
  md += head;
  if (d.status != "descended") {
    md += d.line + "\n";
  } else {
    const auto& in = *d.inner;
    md += fmt::format("The outer culprit `{}` moves `{}` from `{}` to `{}`: {} dependency commits in `{}`.\n\n",
                      short_sha(d.outer_culprit), d.pin_file, d.old_pin, d.new_pin, in.commits.size() - 1,
                      d.json.value("inner_repo", ""));
    md += fmt::format("- inner verdict: **{}**\n", in.outcome.verdict);
    if (in.outcome.verdict == "culprit" && in.outcome.culprit >= 0) {
      const auto& c = in.commits[size_t(in.outcome.culprit)];
      md += fmt::format("- inner culprit: `{}` {}\n", c.sha, md_escape(c.subject));
      if (d.json.contains("culprit") && d.json["culprit"].contains("effect_pct"))
        md += fmt::format("- effect: {:+.1f}%\n", d.json["culprit"]["effect_pct"].get<double>());
    }
    for (int i : in.outcome.candidates)
      md += fmt::format("- candidate: `{}` {}\n", in.commits[size_t(i)].sha, md_escape(in.commits[size_t(i)].subject));
    md += fmt::format("- {}\n", md_escape(in.outcome.summary));
    md += fmt::format("- inner reports: `{}`, `{}`, `{}`\n", in.result_json, in.report_md, in.report_html);
  }
  write_file_atomic(outer_run.report_md, md);
}

}  // namespace

DescendSpec parse_descend(const YamlCtx& cx, const YAML::Node& n, const std::string& base_dir,
                          const std::function<ProviderSpec(const YAML::Node&)>& parse_provider) {
  if (!n.IsMap()) cx.fail(n, "'descend' must be a mapping {pin_file, repo, provider}");
  check_yaml_keys(cx, n, "descend", {"pin_file", "repo", "provider"});
  for (const char* k : {"pin_file", "repo", "provider"})
    if (!n[k]) cx.fail(n, fmt::format("'descend' is missing field '{}'", k));
  DescendSpec d;
  d.origin = cx.at(n);
  d.pin_file = scalar(cx, n["pin_file"], "descend.pin_file");
  if (d.pin_file[0] == '/' || d.pin_file.find("..") != std::string::npos)
    cx.fail(n["pin_file"], fmt::format("'descend.pin_file' = '{}' must be a path inside the outer repository", d.pin_file));
  fs::path repo(scalar(cx, n["repo"], "descend.repo"));
  if (repo.is_relative()) repo = fs::path(base_dir) / repo;
  std::error_code ec;
  if (!fs::is_directory(repo, ec))
    cx.fail(n["repo"], fmt::format("'descend.repo': directory '{}' does not exist", repo.string()));
  d.repo = fs::weakly_canonical(repo).string();
  d.provider = parse_provider(n["provider"]);
  return d;
}

std::string pin_token(const std::string& text, const std::string& what) {
  size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) throw InputError(fmt::format("{}: the pin file is empty (expected a commit sha)", what));
  if (text[b] == '{') {  // Triton's cmake/llvm-info.json: {"llvm_hash": "<sha>", "build_number": ..., ...}
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw InputError(fmt::format("{}: the pin file starts with '{{' but is not a JSON object", what));
    if (!j.contains("llvm_hash") || !j["llvm_hash"].is_string())
      throw InputError(fmt::format("{}: the JSON pin file has no string 'llvm_hash'", what));
    return pin_token(j["llvm_hash"].get<std::string>(), what + " (llvm_hash)");
  }
  size_t e = text.find_first_of(" \t\r\n", b);
  std::string tok = text.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (tok[0] == '-' || tok.find_first_of("\"'`$;|&<>\\") != std::string::npos)
    throw InputError(fmt::format("{}: '{}' is not a commit sha or ref", what, tok));
  return tok;
}

BisectConfig inner_config(const BisectConfig& outer, const std::string& old_sha, const std::string& new_sha) {
  if (!outer.descend) throw InputError(fmt::format("{}: no 'descend' section", outer.file));
  BisectConfig c = outer;
  c.name = outer.name + "-descend";
  c.repo = outer.descend->repo;
  c.good = old_sha;
  c.bad = new_sha;
  c.provider = outer.descend->provider;
  // The scheduler carries over: the inner builds (an LLVM at each commit) are the long ones. An inner
  // build provider without Slurm options of its own takes the outer's; any other provider builds nothing.
  if (c.provider.kind != ProviderSpec::Kind::build) {
    c.scheduler = "local";
    c.builders = 1;
  } else if (outer.scheduler == "slurm" && !c.provider.slurm) {
    c.provider.slurm = outer.provider.slurm;
    c.provider.slurm_poll_s = outer.provider.slurm_poll_s;
  } else if (c.provider.slurm) {
    c.scheduler = "slurm";
  }
  c.descend.reset();
  c.text_hash = sha256_hex(outer.text_hash + "|descend|" + old_sha + ".." + new_sha);
  return c;
}

namespace {

// The pins before and after the culprit (the pin file at its parent and at it), resolved in the inner repo.
void read_pins(const BisectConfig& outer, const git::Repo& repo, const git::Repo& inner_repo,
               const std::string& parent_sha, const std::string& culprit_sha, DescendResult& d) {
  const DescendSpec& spec = *outer.descend;
  auto read_pin = [&](const std::string& sha, const std::string& role) {
    std::string text;
    try {
      text = repo.show_file(sha, spec.pin_file);
    } catch (const InputError&) {
      throw InputError(fmt::format("{}: descend.pin_file '{}' does not exist at {} {} ({})", outer.file, spec.pin_file,
                                   role, short_sha(sha), outer.repo));
    }
    return pin_token(text, fmt::format("{}: descend.pin_file '{}' at {} {}", outer.file, spec.pin_file, role, short_sha(sha)));
  };
  d.old_pin = read_pin(parent_sha, "commit");
  d.new_pin = read_pin(culprit_sha, "commit");
  auto resolve_pin = [&](const std::string& pin, const std::string& sha) {
    auto r = inner_repo.try_resolve(pin);
    if (!r)
      throw InputError(fmt::format("{}: descend.pin_file '{}' at commit {} holds '{}', which is not a commit in {}",
                                   outer.file, spec.pin_file, short_sha(sha), pin, spec.repo));
    return *r;
  };
  d.old_sha = resolve_pin(d.old_pin, parent_sha);
  d.new_sha = resolve_pin(d.new_pin, culprit_sha);
  d.json["old_pin"] = d.old_pin;
  d.json["new_pin"] = d.new_pin;
  d.json["old_sha"] = d.old_sha;
  d.json["new_sha"] = d.new_sha;
}

// The inner bisection's verdict, reports and culprit (or candidates) in d.json.
void add_inner_json(DescendResult& d) {
  const BisectRun& in = *d.inner;
  d.json["status"] = "descended";
  d.json["verdict"] = in.outcome.verdict;
  d.json["summary"] = in.outcome.summary;
  d.json["inner_commits"] = int(in.commits.size()) - 1;
  d.json["workdir"] = in.workdir;
  d.json["reports"] = {{"result_json", in.result_json}, {"report_md", in.report_md}, {"report_html", in.report_html}};
  if (file_exists(in.result_json)) {
    json ij = json::parse(read_file(in.result_json));
    if (ij.contains("culprit")) d.json["culprit"] = ij["culprit"];
  }
  if (in.outcome.verdict == "culprit" && in.outcome.culprit >= 0) {
    const auto& c = in.commits[size_t(in.outcome.culprit)];
    if (!d.json.contains("culprit")) d.json["culprit"] = {{"sha", c.sha}, {"subject", c.subject}};
  }
  if (!in.outcome.candidates.empty()) {
    json cands = json::array();
    for (int i : in.outcome.candidates)
      cands.push_back({{"sha", in.commits[size_t(i)].sha}, {"subject", in.commits[size_t(i)].subject}});
    d.json["candidates"] = cands;
  }
}

}  // namespace

DescendResult descend(const BisectConfig& outer, const BisectRun& outer_run, bool resume, const Log& log) {
  DescendResult d;
  if (!outer.descend) {
    d.status = "not-configured";
    return d;
  }
  const DescendSpec& spec = *outer.descend;
  d.pin_file = spec.pin_file;
  d.json = {{"pin_file", spec.pin_file}, {"inner_repo", spec.repo}};
  const Outcome& o = outer_run.outcome;
  auto finish = [&](const std::string& status, const std::string& line) {
    d.status = status;
    d.line = line;
    d.json["status"] = status;
    d.json["summary"] = line;
    update_outer_reports(outer_run, d);
    if (log) log(line);
    return d;
  };
  if (o.verdict != "culprit" || o.culprit < 1)
    return finish("outer-not-culprit",
                  fmt::format("no descent: the outer bisection's verdict is '{}', not a single culprit", o.verdict));

  const git::CommitInfo& culprit = outer_run.commits[size_t(o.culprit)];
  const git::CommitInfo& parent = outer_run.commits[size_t(o.culprit - 1)];
  d.outer_culprit = culprit.sha;
  d.outer_parent = parent.sha;
  d.json["outer_culprit"] = culprit.sha;
  d.json["outer_parent"] = parent.sha;
  git::Repo repo(outer.repo);
  const std::string names = repo.check({"diff", "--name-only", parent.sha, culprit.sha, "--", spec.pin_file});
  if (names.find_first_not_of(" \r\n") == std::string::npos)
    return finish("pin-unchanged", fmt::format("no descent: the culprit {} does not change {}", short_sha(culprit.sha),
                                               spec.pin_file));

  git::Repo inner_repo(spec.repo);
  read_pins(outer, repo, inner_repo, parent.sha, culprit.sha, d);
  if (d.old_sha == d.new_sha)
    return finish("pin-unchanged", fmt::format("no descent: the culprit {} rewrites {} but pins the same commit {}",
                                               short_sha(culprit.sha), spec.pin_file, short_sha(d.new_sha)));
  if (!inner_repo.is_ancestor(d.old_sha, d.new_sha))
    throw InputError(fmt::format("{}: the pin bump in {} goes from {} to {}, which is not a descendant of it in {} "
                                 "(a downgrade or a different branch): nothing to bisect",
                                 outer.file, short_sha(culprit.sha), short_sha(d.old_sha), short_sha(d.new_sha), spec.repo));

  if (log)
    log(fmt::format("descending: {} moves {} from {} to {}; bisecting {}", short_sha(culprit.sha), spec.pin_file,
                    short_sha(d.old_sha), short_sha(d.new_sha), spec.repo));
  Log inner_log;
  if (log) inner_log = [&log](const std::string& s) { log("  [descend] " + s); };
  const BisectConfig inner = inner_config(outer, d.old_sha, d.new_sha);
  d.inner = bisect(inner, outer_run.workdir + "/descend", resume, inner_log);
  add_inner_json(d);
  d.status = "descended";
  d.line = inner_line(d);
  update_outer_reports(outer_run, d);
  return d;
}

std::string inner_line(const DescendResult& d) {
  if (d.status != "descended" || !d.inner) return "";
  const auto& o = d.inner->outcome;
  if (o.verdict == "culprit" && o.culprit >= 0) {
    const auto& c = d.inner->commits[size_t(o.culprit)];
    return fmt::format("inner culprit: {} {}", c.sha, c.subject);
  }
  return fmt::format("inner verdict: {}", o.verdict);
}

std::string BisectAndDescent::descent_line() const {
  if (descent.status == "not-configured") return "";
  return descent.status == "descended" ? inner_line(descent) : descent.line;
}

BisectAndDescent bisect_and_descend(const BisectConfig& cfg, const std::string& workdir, bool resume, const Log& log,
                                    bool report_improvements, int workers) {
  BisectAndDescent r;
  r.run = bisect(cfg, workdir, resume, log, report_improvements, workers);
  try {
    r.descent = descend(cfg, r.run, resume, log);
  } catch (const InputError& e) {
    DescendResult& d = r.descent;
    d = DescendResult{};
    d.status = "error";
    d.pin_file = cfg.descend ? cfg.descend->pin_file : "";
    d.line = fmt::format("descent failed: {}", e.what());
    d.json = {{"status", "error"}, {"summary", d.line}, {"pin_file", d.pin_file}};
    update_outer_reports(r.run, d);
    if (log) log(d.line);
  }
  return r;
}

}  // namespace kb::bisect
