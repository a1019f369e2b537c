// The list of backends (see views.hpp): what each runs, its modes, whether it can run here, and
// on which devices.
#include <fmt/format.h>

#include "neuralcost/registry.hpp"
#include "neuralcost/report/views.hpp"
#include "report/safe_text.hpp"
#include "report/tabular.hpp"

namespace neuralcost {

std::string render_backends(const std::vector<const Backend*>& backends, Format format, const CudaDevices* cuda) {
  nlohmann::json list = nlohmann::json::array();
  report::Table t;
  t.headers = {"backend", "modes", "available", "devices", "description"};
  t.raw_headers = {"backend", "modes", "available", "devices", "description"};
  t.right_align = {false, false, false, false, false};
  for (const Backend* b : backends) {
    const std::optional<std::string> why = b->unavailable_reason();
    const std::vector<std::string> modes = why ? std::vector<std::string>{} : b->modes();
    std::vector<std::string> devices;
    if (!why) {
      for (const Device& d : b->devices()) devices.push_back(d.name());
    }
    std::string joined, on;
    for (const std::string& m : modes) joined += (joined.empty() ? "" : ", ") + m;
    for (const std::string& d : devices) on += (on.empty() ? "" : ", ") + d;
    list.push_back({{"name", std::string(b->name())},
                    {"description", std::string(b->description())},
                    {"modes", modes},
                    {"devices", devices},
                    {"available", !why},
                    {"unavailable_reason", why ? nlohmann::json(*why) : nlohmann::json(nullptr)}});
    if (cuda) {
      list.back()["cuda_unavailable_reason"] =
          cuda->unavailable_reason ? nlohmann::json(*cuda->unavailable_reason) : nlohmann::json(nullptr);
    }
    t.rows.push_back({{std::string(b->name()), ""},
                      {why ? "-" : joined, ""},
                      {why ? "no: " + *why : "yes", why ? "no" : "yes"},
                      {why ? "-" : on, ""},
                      {std::string(b->description()), ""}});
  }
  if (format == Format::kJson) return report::json_text(list);
  std::string out = report::render_table(t, format);
  if (cuda && cuda->unavailable_reason && format != Format::kCsv) {
    out += "note: no cuda:N devices: CUDA is not available here: " + *cuda->unavailable_reason + "\n";
  }
  return out;
}

}  // namespace neuralcost
