// libFuzzer target of the image spec (ami/src/spec.cpp): any bytes as an image YAML, read and, when
// accepted, checked against the compatibility table and turned into the Packer template, scripts, manifest
// and verify.sh, as `pcdino ami check` and `pcdino ami generate` do. May refuse only with a pcdino::Error
// naming the line and key; anything else is a bug. Run by scripts/fuzz image-spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/packer.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pcdino::ami::ImageSpec spec = pcdino::ami::parse_image_spec(text, "image.yaml");
    pcdino::ami::check_compatibility(spec);
    pcdino::ami::generate_image(spec);
  } catch (const pcdino::Error&) {
  }
  return 0;
}
