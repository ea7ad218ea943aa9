#include "report/html.h"

#include "core/text.h"

namespace kb::report {

std::string page_begin(const std::string& title, const std::string& extra_css) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(title) +
                  "</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
                  "table{border-collapse:collapse;margin:1em 0}"
                  "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left;vertical-align:top}"
                  "td.num,td.n{text-align:right}code{background:#f4f4f4;font-size:12px}small{color:#666}";
  h += extra_css;
  h += "</style></head><body>\n";
  return h;
}

std::string page_end() { return "</body></html>\n"; }

}  // namespace kb::report
