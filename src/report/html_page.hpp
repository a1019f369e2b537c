// The page every HTML view shares (report and train-to-target): the style, the inlined Vega library,
// the charts' specs as JSON no string can break out of, and the page script that draws them and
// records what it drew (and any error) for the browser test.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/html_charts.hpp"

namespace neuralcost::report {

/// A table cell of outside text, escaped: right-aligned figures (`number`) or a name.
std::string table_cell(const std::string& text, bool number);

/// A chart's heading, its element and a note under it.
std::string chart_section(const std::string& title, const Chart& chart, const std::string& note);

/// The whole page: `body` (HTML, escaped by the caller) in the page's <main>, `data` (an object)
/// gains "charts" (id, mark, expected, spec of each) and is embedded for the page script.
std::string html_page(const std::string& title, const std::string& body, const std::vector<Chart>& charts,
                      nlohmann::json data, const std::string& vega_script);

}  // namespace neuralcost::report
