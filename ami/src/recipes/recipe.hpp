// One image component's provisioning script as a recipe, the way ParallelCluster's cookbook keeps one recipe
// per component: a row naming the component, its script and when it is wanted, and a small function that
// writes the script's body. scripts_for() (packer.cpp) walks the rows of every image and of its accelerator
// kind (accelerator_image.hpp) in script-name order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pcdino/ami/downloads.hpp"
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

// What a recipe fetches, each pinned (pinned.cpp, over pcdino/ami/downloads.hpp's table). Every line that
// fetches is followed by the check of what it fetched: tests/ami scans every generated script for that.

/// The row of `component` at `version`; throws ConfigError where check_compatibility() would have refused
/// the image (a recipe asked for a download the table lacks).
const PinnedDownload& pin_of(const std::string& component, const std::string& version,
                             const std::string& variant = "");

/// Lines that download `pin`'s file to `file` (a shell word) and stop the build unless its sha256 is the
/// pin's.
std::string fetch_pinned(const PinnedDownload& pin, const std::string& file);

/// Lines that clone `pin`'s tag into `dir` and stop the build unless it is the pin's commit (a moved tag).
std::string clone_pinned(const PinnedDownload& pin, const std::string& dir);

/// Lines that fetch `key`, stop the build unless it is exactly the one key of the recorded fingerprint, and
/// write it to `keyring` (binary, for apt's signed-by; ASCII-armoured for rpm when `armor`). Throws
/// ConfigError for a key without a recorded fingerprint (check_compatibility() refuses those first).
std::string trusted_key(const SigningKey& key, const std::string& keyring, bool armor);

/// Lines that fetch `package` ("name=version") from NVIDIA's CUDA repository for the OS (@FM_REPO@) into
/// /tmp/pcdino-apt, the package checked by apt against the repository's signed index, the repository
/// listed only while it is fetched; ${debs[0]} is the file.
std::string cuda_repo_download(const std::string& package);

/// `text` with `prefix` before each of its lines.
std::string indented(const std::string& text, const std::string& prefix);

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
