// The search as a text table, an HTML page and JSON: every candidate (invalid / failed / pruned with the
// reason, measured with its median and CI, the static model's estimate), the winner against the built-in
// default (or, with nothing measured, the model's first), and per shape a plot of time against the
// space's first parameters.
#pragma once
#include <string>

#include "tune/tuner.h"

namespace kb::tune {

std::string render_tune_table(const TuneRun& run);
std::string render_tune_html(const TuneRun& run);
// {"format": "kbisect-tune/1", ..., "shapes": [{"shape", "static_only", "model", "winner", "measuring_s",
//  "candidates": [{"params", "status", "reason", "metrics", "measured"?, "estimate"?}]}]}
std::string render_tune_json(const TuneRun& run);

}  // namespace kb::tune
