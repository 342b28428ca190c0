// libFuzzer target of the YAML readers of core: the pipeline file (the schema walker, every key's check,
// the cross-key rules), a --set override, and the node check's site file (/etc/pcdino/node-check.yaml).
// Each may refuse its input only with a pcdino::Error (a ConfigError naming the line and key); another
// exception (yaml-cpp's own, std::out_of_range, ...), a crash or a sanitizer report is a bug. Run by
// scripts/fuzz yaml.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/node_check_site.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pcdino::PipelineConfig config = pcdino::parse_config(text, "fuzz.yaml");
    // What every stage does with a configuration it accepted: its dump reads back.
    pcdino::parse_config(pcdino::dump_config(config), "dump.yaml");
  } catch (const pcdino::Error&) {
  }
  try {
    pcdino::parse_config("", "fuzz.yaml", {pcdino::parse_override(text)});
  } catch (const pcdino::Error&) {
  }
  try {
    pcdino::parse_node_check_site(text, "node-check.yaml");
  } catch (const pcdino::Error&) {
  }
  return 0;
}
