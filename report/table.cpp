#include "report/table.h"

#include <algorithm>

namespace kb::report {

namespace {

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

size_t text_width(const std::string& utf8) {
  return size_t(std::count_if(utf8.begin(), utf8.end(), [](char c) { return !continuation(c); }));
}

std::string truncate_text(const std::string& s, size_t width) {
  if (text_width(s) <= width) return s;
  size_t keep = width > 3 ? width - 3 : 0, seen = 0, end = 0;
  for (; end < s.size(); ++end) {
    if (!continuation(s[end])) {
      if (seen == keep) break;
      ++seen;
    }
  }
  return s.substr(0, end) + std::string("...").substr(0, std::min<size_t>(3, width));
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(cols_.size());
  for (size_t c = 0; c < cols_.size(); ++c)
    if (cols_[c].max_width) cells[c] = truncate_text(cells[c], cols_[c].max_width);
  rows_.push_back(std::move(cells));
}

std::string TextTable::line(const std::vector<std::string>& cells, const std::vector<size_t>& widths) const {
  std::string o = indent_;
  for (size_t c = 0; c < cols_.size(); ++c) {
    if (c) o.append(cols_[c].gap, ' ');
    size_t pad = widths[c] - std::min(widths[c], text_width(cells[c]));
    bool last = c + 1 == cols_.size();
    if (cols_[c].right) o.append(pad, ' ');
    o += cells[c];
    if (!cols_[c].right && !last) o.append(pad, ' ');
  }
  // Empty trailing cells leave no trailing blanks.
  while (o.size() > indent_.size() && o.back() == ' ') o.pop_back();
  return o + "\n";
}

std::string TextTable::render(char separator) const {
  std::vector<size_t> widths(cols_.size());
  std::vector<std::string> header(cols_.size());
  bool any_header = false;
  for (size_t c = 0; c < cols_.size(); ++c) {
    header[c] = cols_[c].header;
    any_header = any_header || !header[c].empty();
    widths[c] = std::max(cols_[c].min_width, text_width(header[c]));
    for (const auto& row : rows_) widths[c] = std::max(widths[c], text_width(row[c]));
  }
  std::string o;
  if (any_header) o += line(header, widths);
  if (separator) {
    std::vector<std::string> rule(cols_.size());
    for (size_t c = 0; c < cols_.size(); ++c) rule[c] = std::string(widths[c], separator);
    o += line(rule, widths);
  }
  for (const auto& row : rows_) o += line(row, widths);
  return o;
}

}  // namespace kb::report
