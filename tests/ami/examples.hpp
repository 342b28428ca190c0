// What the image tests share: the example specs and the compatibility findings of a spec.
#pragma once

#include <string>

#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/spec.hpp"

namespace pcdino::ami::test {

/// ami/examples/NAME, loaded.
inline ImageSpec example(const std::string& name) {
  return load_image_spec(std::string(PCDINO_SOURCE_DIR) + "/ami/examples/" + name);
}

/// Every finding of check_compatibility(s), one message a line.
inline std::string all_messages(const ImageSpec& s) {
  std::string out;
  for (const auto& p : check_compatibility(s)) out += p.message() + "\n";
  return out;
}

}  // namespace pcdino::ami::test
