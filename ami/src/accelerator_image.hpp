// An accelerator kind's part of an image, as one row that the kind-neutral code walks: the components its
// images pin, its recipes, its compatibility rules, its template facts and its checks in verify.sh. Each
// kind's row lives in a file named after the kind (src/<kind>.cpp, with its recipes in
// src/recipes/<kind>.cpp); cmake/PcdinoAccelerators.cmake lists the kinds.
#pragma once

#include <string>
#include <vector>

#include "pcdino/ami/accelerators.hpp"
#include "pcdino/ami/compat.hpp"
#include "recipes/recipe.hpp"

namespace pcdino::ami {

struct AcceleratorImage {
  const char* name;                              ///< ImageSpec::accelerator
  std::vector<const char*> components;           ///< pinned by every image of the kind
  std::vector<const char*> optional_components;  ///< pinned only where needed or wanted
  std::vector<Recipe> recipes;                   ///< its components' scripts
  std::vector<AcceleratorInstance> instances;    ///< EC2 types carrying its devices (accelerators.hpp)
  /// Appends every rule of the kind that `spec` breaks (compat.hpp).
  void (*check)(const ImageSpec& spec, std::vector<Incompatibility>* found);
  /// Sets the placeholders its recipes and verify checks read, and DESCRIPTION (the AMI's description);
  /// runs after check_compatibility() has passed.
  void (*facts)(const ImageSpec& spec, Vars* vars);
  const char* verify_checks;  ///< verify.sh's checks of the kind's devices (a template; "" none)
  const char* pcdino_cmake;   ///< flags for pcdino's source build (85-pcdino.sh's @CUDA_CMAKE@)
  const char* pcdino_check;   ///< appended to a source-built 85-pcdino.sh before done_ok
};

/// Every kind, in cmake/PcdinoAccelerators.cmake's order.
const std::vector<const AcceleratorImage*>& accelerator_images();

/// The row of `accelerator` (ImageSpec::accelerator), or nullptr (none).
const AcceleratorImage* accelerator_image(const std::string& accelerator);

// Helpers the kinds' compatibility rules share with compat.cpp.

/// "1.21.0-555" -> "1.21".
std::string major_minor(const std::string& version);

/// The items joined with ", ": the "known: ..." lists of the messages.
template <typename Rows, typename Field>
std::string joined(const Rows& rows, Field field) {
  std::string out;
  for (const auto& row : rows) out += (out.empty() ? "" : ", ") + std::string(field(row));
  return out;
}

/// NVIDIA's driver, CUDA, NCCL, aws-ofi-nccl and Fabric Manager rules (compat.cpp).
void check_nvidia(const ImageSpec& spec, std::vector<Incompatibility>* found);

}  // namespace pcdino::ami
