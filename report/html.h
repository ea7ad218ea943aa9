// One HTML page frame for every report kbisect writes (bisect, nightly, upstream, ab): the same head,
// the same base style, the page's own additions after it.
#pragma once
#include <string>

namespace kb::report {

// "<!DOCTYPE html>...<body>\n": UTF-8, the title (escaped here), the base style (centred column, small
// bordered tables, right-aligned numbers in td.num / td.n) followed by `extra_css`.
std::string page_begin(const std::string& title, const std::string& extra_css = "");
// "</body></html>\n".
std::string page_end();

}  // namespace kb::report
