// A site's custom AMI against the image spec it was built from (site.hpp, check_image_spec).
#include "pcdino/cluster/site.hpp"
#include "pcdino/core/error.hpp"

namespace pcdino::cluster {

void check_image_spec(const SiteSpec& site, const std::string& image_release, const std::string& image_os,
                      const std::string& image_region, const std::string& image_source) {
  // An AMI is a regional resource: a cluster elsewhere would not find it (ParallelCluster's dry run fails).
  if (image_release != site.parallelcluster_version || image_os != site.os || image_region != site.region) {
    throw ConfigError(site.source + ": image.ami_spec: " + image_source + " builds for ParallelCluster " +
                      image_release + " on " + image_os + " in " + image_region +
                      ", the cluster is ParallelCluster " + site.parallelcluster_version + " on " + site.os +
                      " in " + site.region +
                      " (a custom AMI runs only with its own release's cookbook and OS, and in its region)");
  }
}

}  // namespace pcdino::cluster
