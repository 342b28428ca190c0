// libFuzzer target of the site spec (cluster/src/site.cpp): any bytes as a site YAML, read and, when
// accepted, turned into ParallelCluster's configuration and scripts as `pcdino cluster generate` does. May
// refuse only with a pcdino::Error naming the line and key; anything else is a bug. Run by scripts/fuzz site.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pcdino/cluster/generate.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pcdino::cluster::SiteSpec spec = pcdino::cluster::parse_site_spec(text, "site.yaml");
    pcdino::cluster::generate_cluster(spec);
  } catch (const pcdino::Error&) {
  }
  return 0;
}
