#include "pcdino/ami/accelerators.hpp"

#include "accelerator_kind.hpp"

namespace pcdino::ami {

// Each kind's row, src/<kind>.cpp: the generated include names one per kind of ami/CMakeLists.txt.
#define PCDINO_AMI_KIND(kind) const AcceleratorKind& kind##_accelerator();
#include "accelerator_kinds.inc"
#undef PCDINO_AMI_KIND

const std::vector<const AcceleratorKind*>& accelerator_kinds() {
  static const std::vector<const AcceleratorKind*> kinds = {
#define PCDINO_AMI_KIND(kind) &kind##_accelerator(),
#include "accelerator_kinds.inc"
#undef PCDINO_AMI_KIND
  };
  return kinds;
}

const AcceleratorKind* accelerator_kind(const std::string& accelerator) {
  for (const AcceleratorKind* kind : accelerator_kinds())
    if (accelerator == kind->name) return kind;
  return nullptr;
}

const std::vector<AcceleratorInstance>& accelerator_instances() {
  static const std::vector<AcceleratorInstance> table = [] {
    std::vector<AcceleratorInstance> all;
    for (const AcceleratorKind* kind : accelerator_kinds())
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
