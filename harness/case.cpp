#include "harness/case.h"

#include <fmt/format.h>

namespace kb {

std::string Case::id() const {
  return fmt::format("{}[{}]/{}/{}/{}", kernel ? kernel->name : "?", params.str(), to_string(dtype), shape.str(),
                     toolchain);
}

}  // namespace kb
