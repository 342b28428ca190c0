// pcdino config: the configuration schema, and a pipeline file's effective configuration; pcdino metrics:
// the metric table.
#include "pcdino/core/config.hpp"

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::cli {

namespace {
struct ConfigArgs {
  app::ConfigOptions config;
  bool schema = false;
};
}  // namespace

void add_config_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  CLI::App* sub = app.add_subcommand(
      "config",
      "Print a pipeline file's effective configuration (every key, overrides applied), or the schema");
  app::add_config_options(sub, args->config, false, true);
  sub->add_flag("--schema", args->schema,
                "Print every key as a Markdown table (key, type, default, accepted values, what it does)");
  sub->callback([args] {
    if (args->schema) {
      std::cout << config_schema_markdown();
      return;
    }
    if (args->config.path.empty())
      throw Error(ExitCode::kUsage, "pcdino config: give a pipeline file (--config FILE) or --schema");
    std::cout << dump_config(args->config.load());
  });
}

void add_metrics_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "metrics", "List the metrics pcdino's programs export to the node exporter (a Markdown table)");
  sub->callback([] { std::cout << monitoring::metrics_markdown(); });
}

}  // namespace pcdino::cli
