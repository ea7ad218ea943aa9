// A plain-text table for terminal reports: columns with left/right alignment, a header, an optional
// separator line, UTF-8 aware widths (one column per code point) and truncation that never splits a
// multi-byte character.
#pragma once
#include <string>
#include <vector>

namespace kb::report {

// Display width of UTF-8 text: its code points (continuation bytes do not count).
size_t text_width(const std::string& utf8);
// `s` when it is at most `width` wide, else its first width-3 code points followed by "...".
std::string truncate_text(const std::string& s, size_t width);

struct Column {
  std::string header;
  bool right = false;    // right-aligned (numbers)
  size_t min_width = 0;  // the column is at least this wide, else as wide as its widest cell
  size_t max_width = 0;  // longer cells are truncated (truncate_text); 0: no limit
  size_t gap = 1;        // spaces before the column (the first column: after the table's indent)
};

class TextTable {
 public:
  explicit TextTable(std::vector<Column> columns, std::string indent = "") : cols_(std::move(columns)), indent_(std::move(indent)) {}
  // Missing cells are empty; extra cells are ignored.
  void add_row(std::vector<std::string> cells);
  // Header line (when any column has a header), a separator of `separator` characters when not 0, then
  // the rows; every line ends in "\n", the last column is not padded and no line ends in blanks.
  std::string render(char separator = 0) const;

 private:
  std::string line(const std::vector<std::string>& cells, const std::vector<size_t>& widths) const;
  std::vector<Column> cols_;
  std::string indent_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kb::report
