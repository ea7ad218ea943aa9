// A measured case as the printers, history and change-point tests need one.
#pragma once
#include <string>
#include <vector>

#include "harness/results.h"

namespace kbtest {

// An "ok" CPU case of `kernel` at `shape` on `toolchain` with these samples and their summary.
inline kb::CaseResult ok_case(const std::string& kernel, const kb::Shape& shape, const std::string& toolchain,
                              std::vector<double> samples) {
  kb::CaseResult c;
  c.kernel = kernel;
  c.backend = "cpu";
  c.shape = shape;
  c.toolchain = toolchain;
  c.status = kb::CaseStatus::ok;
  c.samples_s = std::move(samples);
  c.summary = kb::summarize(c.samples_s, c.shape.flops());
  return c;
}

}  // namespace kbtest
