// `neural-cost hardware list|show`: the built-in hardware database and user spec files.
#include <memory>

#include "commands.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost::cli {

void add_hardware_command(CLI::App& app) {
  CLI::App* hw = app.add_subcommand("hardware", "The hardware database: list parts, show one");
  hw->require_subcommand(1);

  auto list_format = std::make_shared<std::string>("table");
  CLI::App* list = hw->add_subcommand("list", "List the built-in hardware specs");
  add_format_option(*list, *list_format);
  list->callback([list_format] {
    emit(render_hardware_list(HardwareDatabase::builtin().specs(), *parse_format(*list_format)), "");
  });

  auto show_id = std::make_shared<std::string>();
  auto show_format = std::make_shared<std::string>("table");
  CLI::App* show = hw->add_subcommand("show", "Show one spec with the source of every number");
  show->add_option("id", *show_id, "Hardware id or alias, or a spec JSON file")->required();
  add_format_option(*show, *show_format);
  show->callback([show_id, show_format] {
    emit(render_hardware(resolve_hardware(*show_id), *parse_format(*show_format)), "");
  });
}

}  // namespace neuralcost::cli
