// Debian's libjs-vega, inlined into the HTML report (see report_views.hpp). Debian ships Vega as
// one UMD file per module (no single vega.min.js bundle), and their browser-global fallback
// overwrites `window.vega` module by module, so each file is run as a CommonJS module against
// the ones before it and the global `vega` is assembled from them, as Vega's own index does.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/report/report_views.hpp"

#ifndef NEURALCOST_VEGA_DIR
#define NEURALCOST_VEGA_DIR "/usr/share/javascript/vega"
#endif

namespace neuralcost {
namespace {

/// The modules the report's charts need, each after the ones it requires.
constexpr const char* kModules[] = {"vega-util",       "vega-event-selector", "vega-expression",     "vega-time",
                                    "vega-format",     "vega-loader",         "vega-statistics",     "vega-scale",
                                    "vega-canvas",     "vega-scenegraph",     "vega-dataflow",       "vega-selection",
                                    "vega-functions",  "vega-runtime",        "vega-view",           "vega-parser",
                                    "vega-transforms", "vega-encode",         "vega-view-transforms"};

constexpr const char* kPrelude =
    "var NeuralCostVega={};\n"
    "function neuralCostRequire(name){\n"
    "  if(name==='vega-selections')name='vega-selection';\n"  // Debian's file name of vega-selections
    "  var m=NeuralCostVega[name];\n"
    "  if(!m)throw new Error('Vega module '+name+' is not in this report');\n"
    "  return m;\n"
    "}\n";

// vega/index.js: the transforms registered with the dataflow, parse and View at the top level
constexpr const char* kAssemble =
    "var vega=(function(m){\n"
    "  var v=Object.assign({},m['vega-util'],m['vega-loader'],m['vega-scenegraph'],m['vega-statistics'],\n"
    "                      m['vega-time'],m['vega-format'],m['vega-expression']);\n"
    "  m['vega-util'].extend(m['vega-dataflow'].transforms,m['vega-transforms'],m['vega-view-transforms'],\n"
    "                        m['vega-encode']);\n"
    "  v.transforms=m['vega-dataflow'].transforms;\n"
    "  v.View=m['vega-view'].View;\n"
    "  v.parse=m['vega-parser'].parse;\n"
    "  v.Warn=m['vega-util'].Warn;\n"
    "  return v;\n"
    "})(NeuralCostVega);\n";

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

std::string vega_directory() {
  const char* env = std::getenv("NEURALCOST_VEGA_DIR");
  return env && *env ? std::string(env) : std::string(NEURALCOST_VEGA_DIR);
}

std::string load_vega_script(const std::string& dir) {
  std::string script = kPrelude;
  for (const char* module : kModules) {
    const std::string path = fmt::format("{}/{}.min.js", dir, module);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw Error(ErrorCode::kNotFound,
                  fmt::format("the HTML report needs Vega, and {} is missing: install Debian's libjs-vega (bash "
                              "scripts/install-deps.sh) or set NEURALCOST_VEGA_DIR to a folder of its modules; "
                              "--format md needs no Vega",
                              path));
    }
    std::stringstream text;
    text << in.rdbuf();
    std::string source = text.str();
    // the source map is not shipped with the report; a browser would only try to fetch it
    if (const auto at = source.rfind("//# sourceMappingURL="); at != std::string::npos) source.erase(at);
    if (lowercase(source).find("</script") != std::string::npos) {
      throw Error(ErrorCode::kDataLoss, fmt::format("{}: holds '</script', which cannot be inlined in a page", path));
    }
    script += fmt::format(
        "(function(){{var module={{exports:{{}}}},exports=module.exports,require=neuralCostRequire;\n{}\n"
        "NeuralCostVega['{}']=module.exports;}})();\n",
        source, module);
  }
  return script + kAssemble;
}

}  // namespace neuralcost
