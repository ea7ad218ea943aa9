// The one way library code reports progress: it is given a Log and never writes to the terminal itself.
// cli/ supplies the Log that writes to stderr; a default-constructed Log drops everything.
#pragma once
#include <string>

namespace kb {

class Log {
 public:
  virtual ~Log() = default;
  // A progress line, kept on screen.
  virtual void line(const std::string& text) {}
  // A transient status line that the next status replaces; an empty text clears it.
  virtual void status(const std::string& text) {}
};

// The Log to use when none is given: drops everything.
inline Log& quiet_log() {
  static Log none;
  return none;
}

}  // namespace kb
