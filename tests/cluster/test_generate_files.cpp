// What `pcdino cluster generate` writes and how (issue #71): each cluster example beside the image example
// its AMI is built from, at one release, OS and region; an OS past its vendor's end of support; the output
// folder never holding a mix of two runs; teardown.sh removing what commands.sh made, and only that.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/cluster/generate.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::cluster {
namespace {

namespace fs = std::filesystem;

const std::string kSource = PCDINO_SOURCE_DIR;

SiteSpec example(const std::string& name) {
  return load_site_spec(kSource + "/cluster/examples/" + name);
}

// The cluster examples, found in the folder (a new one without an image pair fails the test below).
std::vector<std::string> cluster_examples() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kSource + "/cluster/examples"))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Each cluster example names the image spec its custom AMI was built from, and the two agree: release, OS,
// region (an AMI lives in one); the image spec is one `pcdino ami check` accepts.
TEST(ClusterGenerateExamples, EachClusterExampleHasAnImageOfItsReleaseOsAndRegion) {
  const auto names = cluster_examples();
  ASSERT_EQ(names.size(), 3u) << "workshop, p5-efa, cpu-only";
  for (const auto& name : names) {
    const SiteSpec site = example(name);
    ASSERT_FALSE(site.custom_ami.empty()) << name;
    ASSERT_FALSE(site.ami_spec.empty()) << name << ": image.ami_spec names the image example of its AMI";
    const ami::ImageSpec image = ami::load_image_spec(site.ami_spec);
    EXPECT_EQ(image.parallelcluster_version, site.parallelcluster_version)
        << name << " and " << site.ami_spec;
    EXPECT_EQ(image.os, site.os) << name << " and " << site.ami_spec;
    EXPECT_EQ(image.region, site.region) << name << " and " << site.ami_spec;
    EXPECT_NO_THROW(check_image_spec(site, image.parallelcluster_version, image.os, image.region, name));
    EXPECT_TRUE(ami::check_compatibility(image).empty()) << site.ami_spec;
    EXPECT_FALSE(parallelcluster::past_end_of_support(site.os, parallelcluster::utc_date_today())) << name;
  }
}

// A pair that drifts apart is refused, naming both sides: the test above fails on the examples, generate
// refuses the configuration.
TEST(ClusterGenerateExamples, APairThatDriftsIsRefused) {
  const SiteSpec site = example("workshop.yaml");
  const ami::ImageSpec image = ami::load_image_spec(site.ami_spec);
  const auto refusal = [&](const std::string& release, const std::string& os, const std::string& region) {
    try {
      check_image_spec(site, release, os, region, "image.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(
      refusal(image.parallelcluster_version, image.os, "us-east-1")
          .find(
              "builds for ParallelCluster 3.16.3 on ubuntu2204 in us-east-1, the cluster is ParallelCluster "
              "3.16.3 on ubuntu2204 in us-west-2"),
      std::string::npos);
  EXPECT_NE(refusal("3.7.0", "alinux2", image.region).find("3.7.0 on alinux2 in us-west-2"),
            std::string::npos);
  EXPECT_NE(
      refusal(image.parallelcluster_version, "alinux2023", image.region).find("image.ami_spec: image.yaml"),
      std::string::npos);
  EXPECT_EQ(refusal(image.parallelcluster_version, image.os, image.region), "(accepted)");
}

// Amazon Linux 2: a date in the release table with its source; past it a policy finding (fatal with
// --strict), before it a warning; an OS without an end date in the table has none.
TEST(ClusterGenerateExamples, AnOsPastItsEndOfSupportIsAPolicyFinding) {
  const parallelcluster::OsSupport* al2 = parallelcluster::find_os("alinux2");
  ASSERT_NE(al2, nullptr);
  EXPECT_STREQ(al2->end_of_support, "2026-06-30");
  EXPECT_NE(std::string(al2->end_of_support_source).find("aws.amazon.com/amazon-linux-2/faqs"),
            std::string::npos);
  EXPECT_FALSE(parallelcluster::past_end_of_support("alinux2", "2026-06-30")) << "the last day is supported";
  EXPECT_TRUE(parallelcluster::past_end_of_support("alinux2", "2026-07-01"));
  EXPECT_FALSE(parallelcluster::past_end_of_support("alinux2023", "2030-01-01")) << "no date tabled";

  SiteSpec site = example("workshop.yaml");
  EXPECT_TRUE(site_findings(site, "2026-07-01").empty()) << "ubuntu2204";
  site.os = "alinux2";
  const auto after = site_findings(site, "2026-07-01");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].severity, Severity::policy);
  EXPECT_EQ(after[0].path, "image.os");
  EXPECT_EQ(after[0].where, "workshop.yaml");
  EXPECT_NE(after[0].message.find("alinux2's vendor support ended on 2026-06-30"), std::string::npos)
      << after[0].message;
  const auto before = site_findings(site, "2026-06-01");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].severity, Severity::warning);
  EXPECT_NE(before[0].message.find("ends on 2026-06-30"), std::string::npos) << before[0].message;
  EXPECT_EQ(parallelcluster::utc_date_today().size(), 10u) << "YYYY-MM-DD";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The output folder holds one run's files: scripts executable, no temporary folder left, a file the
// previous run wrote and this one does not removed, any other file kept.
TEST(ClusterGenerateFiles, WriteReplacesTheGeneratedFilesOnly) {
  const fs::path out = fs::temp_directory_path() / ("pcdino-generate-" + std::to_string(::getpid()));
  fs::remove_all(out);
  const ClusterFiles p5 = generate_cluster(example("p5-efa.yaml"));
  const auto first = write_cluster_files(p5, out.string());
  EXPECT_EQ(first.back(), "commands.sh") << "what creates the cluster is moved in last";
  EXPECT_NE(std::find(first.begin(), first.end(), "compute-node.sh"), first.end());
  EXPECT_NE(std::find(first.begin(), first.end(), "teardown.sh"), first.end());
  for (const char* script : {"commands.sh", "teardown.sh", "head-node.sh", "compute-node.sh"}) {
    struct stat st {};
    ASSERT_EQ(::stat((out / script).c_str(), &st), 0) << script;
    EXPECT_EQ(st.st_mode & 0777, 0755u) << script;
  }
  EXPECT_EQ(slurp((out / "commands.sh").string()), p5.commands);
  write_file_atomic((out / "notes.txt").string(), "the admin's own file\n");

  SiteSpec plain = example("p5-efa.yaml");
  plain.containers.enabled = false;  // no compute-node.sh any more
  const ClusterFiles second = generate_cluster(plain);
  write_cluster_files(second, out.string());
  EXPECT_FALSE(fs::exists(out / "compute-node.sh")) << "the earlier run's file is not left to be uploaded";
  EXPECT_EQ(slurp((out / "notes.txt").string()), "the admin's own file\n");
  EXPECT_EQ(slurp((out / "head-node.sh").string()), second.head_node_script);
  for (const auto& entry : fs::directory_iterator(out))
    EXPECT_EQ(entry.path().filename().string().rfind(".generate.tmp", 0), std::string::npos) << entry.path();
  fs::remove_all(out);
}

// teardown.sh deletes, newest first, what commands.sh made: the cluster (waiting for its stack), the
// objects it uploaded (those only), the network stack (waiting); never a bucket, never recursively.
TEST(ClusterGenerateFiles, TeardownUndoesCommandsInReverseOrder) {
  const ClusterFiles f = generate_cluster(example("p5-efa.yaml"));
  const std::string& sh = f.teardown;
  const auto at = [&](const std::string& text) { return sh.find(text); };
  const auto del = at("step pcluster delete-cluster --region \"$REGION\" --cluster-name \"$CLUSTER\"");
  const auto wait =
      at("step aws cloudformation wait stack-delete-complete --region \"$REGION\" --stack-name \"$CLUSTER\"");
  const auto rm_head =
      at("step aws s3 rm --region \"$REGION\" s3://research-bucket/pcluster/pcdino/head-node.sh\n");
  const auto rm_compute =
      at("step aws s3 rm --region \"$REGION\" s3://research-bucket/pcluster/pcdino/compute-node.sh\n");
  const auto stack = at("NETWORK=dino-p5-network\nstep aws cloudformation delete-stack");
  for (const auto pos : {del, wait, rm_head, rm_compute, stack}) ASSERT_NE(pos, std::string::npos) << sh;
  EXPECT_LT(del, wait);
  EXPECT_LT(wait, rm_head);
  EXPECT_LT(rm_compute, stack);
  EXPECT_EQ(at("--recursive"), std::string::npos);
  EXPECT_EQ(at(" rb "), std::string::npos) << "no bucket is removed";
  EXPECT_EQ(at("post-install.sh\n"), std::string::npos)
      << "the site's own custom action is not commands.sh's";
  EXPECT_NE(at("set -euo pipefail\n"), std::string::npos);
  EXPECT_NE(at("the FSx for Lustre file system it made at /fsx (DeletionPolicy Delete"), std::string::npos);
  // Every object removed is one commands.sh uploaded.
  std::istringstream lines(sh);
  for (std::string line; std::getline(lines, line);) {
    const auto url = line.find("s3 rm --region \"$REGION\" ");
    if (url != std::string::npos) {
      EXPECT_NE(f.commands.find(line.substr(url + 26)), std::string::npos) << line;
    }
  }

  // The site's own subnets and file system are not commands.sh's: neither is touched.
  SiteSpec own = example("p5-efa.yaml");
  own.head_subnet_id = "subnet-0123456789abcdef0";
  own.compute_subnet_id = "subnet-0123456789abcdef1";
  own.fsx.file_system_id = "fs-0123456789abcdef0";
  const std::string kept = generate_cluster(own).teardown;
  EXPECT_EQ(kept.find("delete-stack"), std::string::npos) << kept;
  EXPECT_NE(kept.find("the site's FSx file system fs-0123456789abcdef0 (not the cluster's)"),
            std::string::npos);
  EXPECT_EQ(kept.find("the FSx for Lustre file system it made"), std::string::npos);

  // Values from the spec are quoted as commands.sh quotes them.
  SiteSpec odd = example("p5-efa.yaml");
  odd.spank.s3_prefix = odd.containers.s3_prefix = odd.node_check.s3_prefix =
      "s3://research-bucket/a$(id)'b;c";
  const std::string quoted = generate_cluster(odd).teardown;
  EXPECT_NE(quoted.find("s3 rm --region \"$REGION\" 's3://research-bucket/a$(id)'\\''b;c/head-node.sh'\n"),
            std::string::npos)
      << quoted;
}

// head-node.sh keeps a record of what it changes and undoes it with --remove (tests/cluster/test_head_node.sh
// runs both on a ParallelCluster-shaped tree); compute-node.sh keeps none.
TEST(ClusterGenerateFiles, HeadNodeScriptKeepsARecordForRemove) {
  const ClusterFiles f = generate_cluster(example("p5-efa.yaml"));
  EXPECT_NE(f.head_node_script.find("RECORD=${PCDINO_STATE:-/var/lib/pcdino/head-node}\n"),
            std::string::npos);
  EXPECT_NE(f.head_node_script.find("  --remove)\n    remove\n    exit 0\n"), std::string::npos);
  EXPECT_NE(f.head_node_script.find("\"spank, containers and node_check and run pcluster update-cluster\""),
            std::string::npos);
  EXPECT_NE(f.compute_node_script.find("RECORD=\"\""), std::string::npos);
  EXPECT_EQ(f.compute_node_script.find("remove()"), std::string::npos);
}

}  // namespace
}  // namespace pcdino::cluster
