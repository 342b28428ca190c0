// The EC2 instance types whose accelerators pcdino prepares nodes for but does not compute on, with the
// devices each carries, so that `pcdino ami check` refuses an image for another accelerator and the doctor
// knows how many devices a node should show. Each accelerator kind's rows, releases and rules live in the
// kind's own files (cmake/PcdinoAccelerators.cmake lists the kinds).
#pragma once

#include <string>
#include <vector>

namespace pcdino::ami {

/// An EC2 instance type with one accelerator kind's devices.
struct AcceleratorInstance {
  const char* type;         ///< "dl1.24xlarge"
  const char* accelerator;  ///< its kind (ImageSpec::accelerator)
  const char* device;       ///< the device's name, as the kind's messages and tools write it
  int devices;              ///< cards or chips per instance
  int cores_per_device;  ///< cores per device as the kind's tool shows them by default (1 where it has none)
  const char* source;
};

/// Every kind's instance types, in cmake/PcdinoAccelerators.cmake's order of the kinds.
const std::vector<AcceleratorInstance>& accelerator_instances();

/// The row of `instance_type`, or nullptr (NVIDIA or CPU types).
const AcceleratorInstance* accelerator_instance(const std::string& instance_type);

/// The family of an instance type: "trn1n.32xlarge" -> "trn1n".
std::string instance_family(const std::string& instance_type);

}  // namespace pcdino::ami
