// The search as a text table and an HTML page: every candidate (invalid / failed / pruned with the reason,
// measured with its median and CI), the winner against the built-in default, and per shape a plot of
// time against the space's first parameters.
#pragma once
#include <string>

#include "tune/tuner.h"

namespace kb::tune {

std::string render_tune_table(const TuneRun& run);
std::string render_tune_html(const TuneRun& run);

}  // namespace kb::tune
