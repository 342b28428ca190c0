// Intel Gaudi nodes (accelerator: habana): the Intel Gaudi software releases, the OSes and devices each
// supports, restated as a table with its sources, so that `pcdino ami check` refuses an image Intel does not
// support. The EC2 instance types with Gaudi cards are rows of accelerator_instances() (accelerators.hpp).
//
// pcdino trains and extracts with LibTorch's C++ API, which Intel does not provide for Gaudi (it ships its
// Gaudi PyTorch as its own torch wheel with Python plugins). On these nodes pcdino prepares the image, the
// job environment and the health checks; training is refused (core/accelerator.hpp).
#pragma once

#include <vector>

namespace pcdino::ami {

/// One Intel Gaudi software release line (major.minor): what its support matrix lists.
struct GaudiRelease {
  const char* release;          ///< "1.21"
  bool first_gen;               ///< supports first-generation Gaudi (HL-205, the DL1's card)
  std::vector<const char*> os;  ///< pcdino's OS names the matrix lists (base.os)
  const char* source;
};

/// Intel Gaudi software releases 1.13 to 1.23 (docs.habana.ai Support_Matrix_v<release>).
const std::vector<GaudiRelease>& gaudi_releases();

}  // namespace pcdino::ami
