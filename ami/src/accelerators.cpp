#include "pcdino/ami/accelerators.hpp"

#include "accelerator_image.hpp"

namespace pcdino::ami {

// Each kind's row, src/<kind>.cpp: the generated include names one per kind of
// cmake/PcdinoAccelerators.cmake.
#define PCDINO_AMI_KIND(kind) const AcceleratorImage& kind##_image();
#include "accelerator_kinds.inc"
#undef PCDINO_AMI_KIND

const std::vector<const AcceleratorImage*>& accelerator_images() {
  static const std::vector<const AcceleratorImage*> kinds = {
#define PCDINO_AMI_KIND(kind) &kind##_image(),
#include "accelerator_kinds.inc"
#undef PCDINO_AMI_KIND
  };
  return kinds;
}

const AcceleratorImage* accelerator_image(const std::string& accelerator) {
  for (const AcceleratorImage* kind : accelerator_images())
    if (accelerator == kind->name) return kind;
  return nullptr;
}

const std::vector<AcceleratorInstance>& accelerator_instances() {
  static const std::vector<AcceleratorInstance> table = [] {
    std::vector<AcceleratorInstance> all;
    for (const AcceleratorImage* kind : accelerator_images())
      all.insert(all.end(), kind->instances.begin(), kind->instances.end());
    return all;
  }();
  return table;
}

const AcceleratorInstance* accelerator_instance(const std::string& instance_type) {
  for (const auto& i : accelerator_instances())
    if (instance_type == i.type) return &i;
  return nullptr;
}

std::string instance_family(const std::string& instance_type) {
  return instance_type.substr(0, instance_type.find('.'));
}

}  // namespace pcdino::ami
