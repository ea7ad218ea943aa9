// Printers only render results (measurement emits them): console table, CSV, Markdown,
// Google-Benchmark-compatible JSON (so its compare.py reads our runs), and our JSON.
#pragma once
#include <string>
#include <vector>

#include "harness/results.h"

namespace kb {

std::string render_table(const RunResults& r);     // tritonbench-like console table
std::string render_markdown(const RunResults& r);
std::string render_csv(const RunResults& r);
std::string render_gbench_json(const RunResults& r);
std::string render_json(const RunResults& r);

// Parses "table,json,csv" into a list; throws InputError for an unknown format (naming it).
std::vector<std::string> parse_formats(const std::string& list, const std::vector<std::string>& allowed);

// Writes every requested file format under dir (results.json, results.csv, results.gbench.json,
// results.md) and returns the table text if "table" was requested.
std::string write_outputs(const RunResults& r, const std::string& dir, const std::vector<std::string>& formats);

// A compact human string for a time in seconds: "12.3 us", "4.56 ms".
std::string format_time(double seconds);

}  // namespace kb
