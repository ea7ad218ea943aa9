// The Log that commands hand to the library: progress lines on stderr, a status line rewritten in place.
#pragma once
#include <iostream>
#include <string>

#include "cli/command.h"
#include "core/log.h"

namespace kb::cli {

class TerminalLog : public Log {
 public:
  void line(const std::string& text) override { std::cerr << text << "\n"; }
  void status(const std::string& text) override { std::cerr << "\r\033[K" << text << std::flush; }
};

// The terminal Log when progress is enabled (progress_enabled()), else the one that drops everything.
inline Log& progress_log() {
  static TerminalLog terminal;
  return progress_enabled() ? static_cast<Log&>(terminal) : quiet_log();
}

}  // namespace kb::cli
