// The recipes of every image, and what recipes share.
#include "recipes/recipe.hpp"

namespace pcdino::ami {

bool RecipeContext::ships(const std::string& wanted, const char* parallelcluster::Release::*field) const {
  return official && *(base.*field) != '\0' && wanted == base.*field;
}

std::string shipped(const std::string& what) {
  return "# ParallelCluster @PC_VERSION@'s AMI ships " + what + " (@BASE_SOURCE@).\n";
}

const std::vector<Recipe>& common_recipes() {
  static const std::vector<Recipe> table = {
      {"base", "00-base.sh", When::always, base_recipe},
      {"efa_installer", "50-efa.sh", When::always, efa_recipe},
      {"enroot", "70-enroot-pyxis.sh", When::always, enroot_pyxis_recipe},
      {"node_exporter", "75-node-exporter.sh", When::pinned, node_exporter_recipe},
      {"pcdino", "85-pcdino.sh", When::package_build, pcdino_package_recipe},
      {"pcdino", "85-pcdino.sh", When::source_build, pcdino_source_recipe},
      {"system", "90-system.sh", When::always, system_recipe},
      {"manifest", "99-manifest.sh", When::always, manifest_recipe},
  };
  return table;
}

}  // namespace pcdino::ami
