// The page every HTML view shares (report/html_page.hpp).
#include "report/html_page.hpp"

#include "report/safe_text.hpp"

namespace neuralcost::report {

std::string table_cell(const std::string& text, bool number) {
  return std::string(number ? "<td class=\"num\">" : "<td class=\"name\">") + html_text(text) + "</td>";
}

namespace {

const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1180px;margin:0 auto;padding:20px 28px 60px;background:#fff}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;margin:0 0 12px}.note{color:#555;font-size:12.5px;margin:4px 0}
ul.findings li{margin:4px 0}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}
th,td{padding:3px 8px;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}
th{background:#f3f3f3;font-weight:600}td.name{min-width:6em;max-width:24em;overflow-wrap:anywhere}
.table{overflow-x:auto}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.mistrusted td{background:#fff4f2}tr.failed td{background:#f4f4f4;color:#666}
.flag{color:#d62728;font-weight:600;white-space:nowrap}.why{color:#8a3b2e;font-size:11.5px}
.chart{margin:6px 0 2px;overflow-x:auto}.vega-bindings{font-size:12.5px;margin:4px 0}
code{font-size:12.5px;background:#f3f3f3;padding:0 3px;border-radius:3px}
#nc-check{display:none}
)css";

// The page script: draws every chart and records what it drew (and any error) for the test.
const char* kPageScript = R"js(
(function () {
  var check = {ready: false, errors: [], charts: {}};
  function record(kind, args) {
    check.errors.push(kind + ': ' + Array.prototype.map.call(args, String).join(' '));
  }
  window.addEventListener('error', function (e) { record('error', [e.message]); });
  window.addEventListener('unhandledrejection', function (e) { record('rejection', [e.reason]); });
  ['error', 'warn'].forEach(function (level) {
    var original = console[level];
    console[level] = function () { record('console.' + level, arguments); original.apply(console, arguments); };
  });
  function finish() {
    check.ready = true;
    document.getElementById('nc-check').textContent = JSON.stringify(check);
    document.body.setAttribute('data-nc-ready', '1');
  }
  var data;
  try {
    data = JSON.parse(document.getElementById('nc-report-data').textContent);
  } catch (e) { record('error', ['report data: ' + e]); finish(); return; }
  var drawn = data.charts.map(function (chart) {
    var element = document.getElementById(chart.id);
    if (!element) { record('error', ['no element for chart ' + chart.id]); return Promise.resolve(); }
    var view = new vega.View(vega.parse(chart.spec), {renderer: 'svg', container: element, hover: true});
    view.logLevel(vega.Warn);
    return view.runAsync().then(function () {
      var marks = element.querySelectorAll('svg g.' + chart.mark + ' > path');
      var named = {};  // items drawn per named mark (Vega gives a mark's name as a class)
      element.querySelectorAll('svg g.role-mark').forEach(function (g) {
        var name = g.getAttribute('class').split(' ')[2];
        if (name) named[name] = g.querySelectorAll(':scope > path').length;
      });
      check.charts[chart.id] = {expected: chart.expected, drawn: marks.length, marks: named};
    });
  });
  Promise.all(drawn).catch(function (e) { record('error', [e && e.stack ? e.stack : e]); }).then(finish);
})();
)js";

}  // namespace

std::string chart_section(const std::string& title, const Chart& chart, const std::string& note) {
  return "<h2>" + html_text(title) + "</h2>\n<div class=\"chart\" id=\"" + chart.id + "\"></div>\n" +
         (note.empty() ? "" : "<p class=\"note\">" + html_text(note) + "</p>\n");
}

std::string html_page(const std::string& title, const std::string& body, const std::vector<Chart>& charts,
                      nlohmann::json data, const std::string& vega_script) {
  data["charts"] = nlohmann::json::array();
  for (const Chart& c : charts) {
    data["charts"].push_back({{"id", c.id}, {"mark", c.mark}, {"expected", c.expected}, {"spec", c.spec}});
  }
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>" +
         html_text(title) + "</title>\n<style>" + kStyle + "</style>\n<script>\n" + vega_script +
         "</script>\n</head>\n<body>\n<main>\n" + body +
         "<pre id=\"nc-check\"></pre>\n</main>\n"
         "<script type=\"application/json\" id=\"nc-report-data\">" +
         json_for_script(data) + "</script>\n<script>" + kPageScript + "</script>\n</body>\n</html>\n";
}

}  // namespace neuralcost::report
