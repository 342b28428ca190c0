// One image component's provisioning script as a recipe, the way ParallelCluster's cookbook keeps one recipe
// per component: a row naming the component, its script and when it is wanted, and a small function that
// writes the script's body. scripts_for() (packer.cpp) walks the rows of every image and of its accelerator
// kind (accelerator_image.hpp) in script-name order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pcdino/ami/spec.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::ami {

struct AcceleratorImage;

/// The @KEY@ placeholders of the image's templates and their values.
using Vars = std::map<std::string, std::string>;

/// What a recipe reads: the spec, the image's placeholders, and what the base AMI ships.
struct RecipeContext {
  const ImageSpec& spec;
  const Vars& vars;
  const AcceleratorImage* kind;  ///< the spec's accelerator kind; nullptr for accelerator: none
  bool apt;                      ///< Ubuntu (apt, dpkg); otherwise yum/dnf and rpm
  /// ParallelCluster's AMI of the release (valid where `official`): a component it ships at the wanted
  /// version is named in a comment and checked, not rebuilt.
  bool official;
  parallelcluster::Release base;

  /// Whether the official base AMI ships `wanted` as its `field` (a field that is "" is not shipped).
  bool ships(const std::string& wanted, const char* parallelcluster::Release::*field) const;
};

/// The comment a recipe writes in place of installing what the base AMI ships.
std::string shipped(const std::string& what);

/// When a recipe's script is part of the image.
enum class When {
  always,
  pinned,         ///< versions holds the recipe's component
  source_build,   ///< build.pcdino: source
  package_build,  ///< build.pcdino: package
};

struct Recipe {
  const char* component;  ///< key in versions (or "base"/"system"/"manifest"): the script's @VERSION@
  const char* script;     ///< scripts/<script>; scripts run in name order
  When when;
  std::string (*body)(const RecipeContext&);  ///< the script after the common head, with placeholders
};

/// The recipes of every image, whatever its accelerator.
const std::vector<Recipe>& common_recipes();

// The generators of the common recipes, one file each under recipes/.
std::string base_recipe(const RecipeContext& c);
std::string efa_recipe(const RecipeContext& c);
std::string enroot_pyxis_recipe(const RecipeContext& c);
std::string node_exporter_recipe(const RecipeContext& c);
std::string pcdino_package_recipe(const RecipeContext& c);
std::string pcdino_source_recipe(const RecipeContext& c);
std::string system_recipe(const RecipeContext& c);
std::string manifest_recipe(const RecipeContext& c);

}  // namespace pcdino::ami
