// A table of cells, each with a display text (SI-prefixed) and a raw text (exact numbers),
// rendered as an aligned terminal table, a Markdown table or RFC 4180 CSV.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/report/format.hpp"

namespace neuralcost::report {

struct Cell {
  std::string display;
  std::string raw;  ///< CSV value; empty means "same as display"
  /// CSV values of a cell that is several columns there (an interval's low and high): each its own
  /// column, with a header each in raw_headers
  std::vector<std::string> raw_parts = {};
};

struct Table {
  std::vector<std::string> headers;      ///< display headers
  std::vector<std::string> raw_headers;  ///< CSV headers (snake_case, units in names), one per CSV column
  std::vector<std::vector<Cell>> rows;
  std::vector<bool> right_align;  ///< per column; numbers are right-aligned
};

std::string render_table(const Table& table, Format format);

}  // namespace neuralcost::report
