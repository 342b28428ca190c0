#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "examples.hpp"
#include "pcdino/ami/accelerators.hpp"
#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/downloads.hpp"
#include "pcdino/ami/neuron.hpp"
#include "pcdino/ami/packer.hpp"
#include "pcdino/ami/source_build.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::ami {
namespace {

using test::all_messages;
using test::example;

std::string spec_error(const std::string& yaml) {
  try {
    parse_image_spec(yaml, "image.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* const kMinimal = R"(name: t
region: us-west-2
base: {parallelcluster_version: "3.7.0", os: alinux2}
build: {pcdino: package}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pyxis: "0.12.0", pcdino: "0.1.0"}
)";

TEST(AmiSpec, ExamplesAreCompatible) {
  EXPECT_EQ(all_messages(example("workshop.yaml")), "");
  EXPECT_EQ(all_messages(example("current.yaml")), "");
  EXPECT_EQ(all_messages(example("p5-3.11.yaml")), "");
  EXPECT_EQ(all_messages(example("trn1.yaml")), "");
  // Intel publishes no fingerprint of its repository's key: the Gaudi example is refused (AmiDownloads).
  EXPECT_NE(all_messages(example("dl1.yaml")).find("no fingerprint of the habana signing key is recorded"),
            std::string::npos)
      << all_messages(example("dl1.yaml"));
  EXPECT_EQ(example("workshop.yaml").versions.at("nccl"), "2.12.7-1");
}

TEST(AmiSpec, ErrorsNameKeyLineAndColumn) {
  EXPECT_EQ(spec_error(kMinimal), "(no error)");
  std::string e = spec_error(std::string(kMinimal) + "colour: red\n");
  EXPECT_NE(e.find("image.yaml:7:1: colour: unknown key"), std::string::npos) << e;
  e = spec_error(R"(name: t
region: us-west-2
base: {parallelcluster_version: "3.7.0", os: alinux2}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pyxis: "0.12.0", pcdino: "0.1.0", cuda: "12.4"}
)");
  EXPECT_NE(e.find("versions.cuda: only for accelerator: nvidia"), std::string::npos) << e;
  e = spec_error(R"(name: t
region: us-west-2
base: {parallelcluster_version: "3.7.0", os: alinux2}
build: {pcdino: package}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pcdino: "0.1.0"}
)");
  EXPECT_NE(e.find("versions.pyxis: missing"), std::string::npos) << e;
  e = spec_error(R"(name: t
region: Oregon
base: {parallelcluster_version: "3.7.0", os: alinux2}
versions: {}
)");
  EXPECT_NE(e.find("image.yaml:2:9: region: expected an AWS region"), std::string::npos) << e;
  EXPECT_NE(
      spec_error("name: t\nregion: us-west-2\nbase: {parallelcluster_version: \"3.7.0\", os: centos7}\n")
          .find("base.os: expected alinux2, alinux2023 or ubuntu2204"),
      std::string::npos);
}

TEST(AmiCompat, DriverTooOldForCudaNamesBoth) {
  ImageSpec s = example("workshop.yaml");
  s.versions["nvidia_driver"] = "470.57.02";
  const std::string m = all_messages(s);
  EXPECT_NE(m.find("versions.nvidia_driver 470.57.02 and versions.cuda 11.6"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA 11.6 needs driver >= 510.39.01"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA Toolkit release notes"), std::string::npos) << m;
  EXPECT_THROW(generate_image(s), ConfigError);
}

// ParallelCluster 3.16.3's driver (595) runs every CUDA 12 and 13 LibTorch up to 13.2, not a later one.
TEST(AmiCompat, ALibTorchForACudaThe595DriverCannotRunIsRefused) {
  ImageSpec s = example("current.yaml");
  ASSERT_EQ(s.versions.at("nvidia_driver"), "595.112.07");
  s.versions["libtorch"] = "2.9.1+cu128";
  s.versions["cuda"] = "12.8.1";
  EXPECT_EQ(all_messages(s), "") << "a CUDA 12.8 LibTorch on the 595 driver";
  s.versions["libtorch"] = "2.13.0+cu133";
  const std::string m = all_messages(s);
  EXPECT_NE(
      m.find("versions.libtorch 2.13.0+cu133 and versions.nvidia_driver 595.112.07 do not work together: "
             "LibTorch's CUDA 13.3 runtime needs driver >= 610.43.02"),
      std::string::npos)
      << m;
}

// Each release's own driver runs its own CUDA (NVIDIA's table): a pair that does not is a fact misread.
TEST(AmiCompat, EveryReleasesDriverRunsItsCuda) {
  std::size_t checked = 0;
  for (const auto& row : parallelcluster::releases()) {
    if (*row.nvidia_driver == '\0' || *row.cuda == '\0') continue;
    ImageSpec s = example("p5-3.11.yaml");
    s.parallelcluster_version = row.release;
    s.versions["nvidia_driver"] = row.nvidia_driver;
    s.versions["cuda"] = row.cuda;
    s.versions.erase("fabric_manager");
    const std::string m = all_messages(s);
    EXPECT_EQ(m.find("versions.nvidia_driver " + std::string(row.nvidia_driver) + " and versions.cuda"),
              std::string::npos)
        << row.release << ": " << m;
    EXPECT_EQ(m.find("is not in the driver table"), std::string::npos) << row.release << ": " << m;
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

TEST(AmiCompat, NcclBuiltForAnotherCudaMajor) {
  ImageSpec s = example("p5-3.11.yaml");
  s.versions["nccl"] = "2.12.7-1";  // published for CUDA 10.2, 11.0, 11.6 only
  const std::string m = all_messages(s);
  EXPECT_NE(m.find("versions.nccl 2.12.7-1 and versions.cuda 12.4.1"), std::string::npos) << m;
  EXPECT_NE(m.find("aws-ofi-nccl 1.12.0 needs NCCL >= 2.17.1"), std::string::npos) << m;
  s = example("workshop.yaml");
  s.versions["cuda"] = "11.4";  // NCCL 2.12.7's CUDA 11.0 build runs on 11.4 (minor version compatibility)
  s.versions["nvidia_driver"] = "470.82.01";
  EXPECT_EQ(all_messages(s).find("versions.nccl"), std::string::npos) << all_messages(s);
}

TEST(AmiCompat, OfiNcclAgainstEfaLibfabricAndOsAgainstParallelCluster) {
  ImageSpec s = example("p5-3.11.yaml");
  s.versions["aws_ofi_nccl"] = "1.13.0";   // needs libfabric >= 1.22
  s.versions["efa_installer"] = "1.29.1";  // ships libfabric 1.19.0
  std::string m = all_messages(s);
  EXPECT_NE(
      m.find("aws-ofi-nccl 1.13.0 needs libfabric >= 1.22.0, EFA installer 1.29.1 ships libfabric 1.19.0"),
      std::string::npos)
      << m;
  s = example("p5-3.11.yaml");
  s.parallelcluster_version = "3.6.0";
  m = all_messages(s);
  EXPECT_NE(m.find("base.os ubuntu2204 and base.parallelcluster_version 3.6.0"), std::string::npos) << m;
  EXPECT_NE(m.find("CHANGELOG.md 3.7.0"), std::string::npos) << m;
}

// On NVSwitch systems Fabric Manager runs at exactly the driver's version; the base AMI's is locked at its
// own driver's (ParallelCluster 3.11.1: 550.90.07).
TEST(AmiCompat, FabricManagerFollowsTheDriverOnNvswitchTypes) {
  ImageSpec s = example("p5-3.11.yaml");
  EXPECT_EQ(all_messages(s), "");
  s.versions.erase("fabric_manager");
  std::string m = all_messages(s);
  EXPECT_NE(m.find("versions.nvidia_driver 550.127.05 and the base AMI's Fabric Manager 550.90.07"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("p5.48xlarge has NVSwitches: replacing the driver needs versions.fabric_manager: "
                   "\"550.127.05\""),
            std::string::npos)
      << m;
  s.versions["nvidia_driver"] = "550.90.07";  // the base AMI's own: its Fabric Manager matches
  EXPECT_EQ(all_messages(s), "");
  s.verify_instance_type = "g5.48xlarge";  // no NVSwitch: any driver
  s.versions["nvidia_driver"] = "550.127.05";
  EXPECT_EQ(all_messages(s), "");
  s.versions["fabric_manager"] = "550.90.07";  // pinned, it must be the driver's
  m = all_messages(s);
  EXPECT_NE(m.find("versions.fabric_manager 550.90.07 and versions.nvidia_driver 550.127.05"),
            std::string::npos)
      << m;
  EXPECT_TRUE(has_nvswitch("p4de.24xlarge"));
  EXPECT_FALSE(has_nvswitch("g6.48xlarge"));
  parallelcluster::Release base;
  ASSERT_TRUE(parallelcluster::base_ami("3.11.1", "ubuntu2204", &base));
  EXPECT_STREQ(base.nvidia_driver, "550.90.07");
}

// The generated script replaces and re-locks Fabric Manager at the driver's version.
TEST(AmiGenerate, FabricManagerPinnedToTheDriver) {
  std::string fm;
  for (const auto& f : generate_image(example("p5-3.11.yaml")))
    if (f.path == "scripts/15-fabric-manager.sh") fm = f.content;
  ASSERT_FALSE(fm.empty());
  EXPECT_NE(fm.find("VERSION=550.127.05\n"), std::string::npos) << fm;
  EXPECT_NE(fm.find("apt-mark unhold \"$PKG\""), std::string::npos) << fm;
  // From NVIDIA's CUDA repository, checked by apt against its signed index, the key checked first.
  EXPECT_NE(fm.find("[ \"$fpr\" = EB693B3035CD5710E231E123A4B469963BF863CC ]"), std::string::npos) << fm;
  EXPECT_NE(fm.find("signed-by=/usr/share/keyrings/pcdino-cuda.gpg] "
                    "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /"),
            std::string::npos)
      << fm;
  EXPECT_NE(fm.find("apt-get download -q \"$PKG=${VERSION}-1\""), std::string::npos) << fm;
  EXPECT_LT(fm.find("rm -f /etc/apt/sources.list.d/pcdino-cuda.list"),
            fm.find("apt-get install -y -q --allow"))
      << "no NVIDIA repository stays behind";
  EXPECT_NE(fm.find("\napt-mark hold \"$PKG\"\n"), std::string::npos) << fm;
  for (const auto& f : generate_image(example("workshop.yaml")))
    EXPECT_NE(f.path, "scripts/15-fabric-manager.sh") << "g4dn has no NVSwitch and pins none";
}

TEST(AmiGenerate, TemplatesScriptsAndManifest) {
  const auto files = generate_image(example("workshop.yaml"));
  std::map<std::string, std::string> by_path;
  for (const auto& f : files) by_path[f.path] = f.content;
  const std::string& hcl = by_path.at("image.pkr.hcl");
  EXPECT_NE(hcl.find("name                = \"aws-parallelcluster-3.7.0-amzn2-hvm-x86_64*\""),
            std::string::npos);
  EXPECT_NE(hcl.find("\"parallelcluster:os\"      = \"alinux2\""), std::string::npos);
  EXPECT_NE(hcl.find("\"scripts/40-nccl.sh\""), std::string::npos);
  const auto json = nlohmann::json::parse(by_path.at("image.json"));
  EXPECT_EQ(json["builders"][0]["tags"]["parallelcluster:version"], "3.7.0");
  EXPECT_EQ(json["provisioners"][2]["scripts"].size(), 12u);
  const auto manifest = nlohmann::json::parse(by_path.at("files/manifest.json"));
  EXPECT_EQ(manifest["components"]["nvidia_driver"], "510.47.03");
  EXPECT_EQ(manifest["components"]["openmpi"], "from efa_installer 1.25.1");
  EXPECT_EQ(manifest["components"]["libfabric"], "1.18.1")
      << "the EFA installer's libfabric, for pcdino doctor";
  EXPECT_NE(by_path.at("scripts/20-cuda.sh").find("cuda_11.6.2_510.47.03_linux.run"), std::string::npos);
  for (const auto& [path, content] : by_path) {
    if (path.rfind("scripts/", 0) == 0) {
      EXPECT_NE(content.find("set -euo pipefail"), std::string::npos) << path;
      EXPECT_NE(content.find("done_ok"), std::string::npos) << path << " does not check what it installed";
    }
    EXPECT_EQ(content.find("@VERSION@"), std::string::npos) << path;
  }
  // no EFA, no published floor for g4dn: verify.sh reports without judging
  EXPECT_NE(by_path.at("verify.sh").find("THRESHOLD=0"), std::string::npos);
  const auto p5 = generate_image(example("p5-3.11.yaml"));
  for (const auto& f : p5) {
    if (f.path == "verify.sh") {
      EXPECT_NE(f.content.find("THRESHOLD=250"), std::string::npos);
    }
  }
}

// A prebuilt package (the workshop's, on Amazon Linux 2) is checked before anything is built: its OS and
// the Slurm its plugin is built for; it is unpacked to /opt/pcdino, nothing under /opt/slurm (the nodes
// mount that from the head node).
TEST(AmiGenerate, APrebuiltPackageIsCheckedFirst) {
  std::map<std::string, std::string> ws;
  for (const auto& f : generate_image(example("workshop.yaml"))) ws[f.path] = f.content;
  EXPECT_EQ(package_name("0.1.0", "alinux2"), "pcdino-0.1.0-alinux2-x86_64");
  const std::string& base = ws.at("scripts/00-base.sh");
  EXPECT_NE(base.find("PKG=$FILES/pcdino-0.1.0-alinux2-x86_64.tar.gz\n"), std::string::npos) << base;
  EXPECT_NE(base.find("\"pcdino-0.1.0-alinux2-x86_64/share/pcdino/package.txt\""), std::string::npos);
  EXPECT_NE(base.find("[ \"$built\" = alinux2 ] || fail"), std::string::npos) << base;
  EXPECT_NE(base.find("SLURM_RELEASE=23.02.4\n"), std::string::npos) << "3.7.0's Slurm\n" << base;
  EXPECT_LT(base.find("package.txt"), base.find("yum install")) << "checked before installing anything";
  std::string pcdino = ws.at("scripts/85-pcdino.sh");
  // The node check's wrapper names the site file the head node writes there (issue #60), and writes nothing
  // there itself.
  const std::string site = "--site /opt/slurm/etc/pcdino/node-check.yaml";
  ASSERT_NE(pcdino.find(site), std::string::npos) << pcdino;
  pcdino.erase(pcdino.find(site), site.size());
  EXPECT_EQ(pcdino.find("/opt/slurm"), std::string::npos) << pcdino;
  EXPECT_EQ(pcdino.find("cmake"), std::string::npos) << "a package is not built";
  EXPECT_NE(pcdino.find("awk '/not found/"), std::string::npos) << "missing libraries fail the build";
  EXPECT_EQ(ws.at("files/README").find("accel-profiles.yaml"), std::string::npos) << "the package holds them";
  // A release the table does not know (the workshop's 3.7.0): both built, Pyxis where ParallelCluster puts
  // it.
  EXPECT_NE(ws.at("scripts/70-enroot-pyxis.sh").find("pyxis.git"), std::string::npos);
  EXPECT_NE(ws.at("scripts/70-enroot-pyxis.sh").find("/usr/local/lib/slurm/spank_pyxis.so"),
            std::string::npos);
}

// The p5 example builds pcdino on the image: the Slurm headers are checked before anything is installed,
// then the OS's packages, the pinned LibTorch (sha256 checked), the AMI's Open MPI and libfabric and the
// image's CUDA and NCCL; the result's plugin is checked against the release's Slurm. What the base AMI
// ships (CUDA, EFA installer, Enroot, Pyxis) at the wanted version is checked, not rebuilt.
TEST(AmiGenerate, SourceBuildChecksSlurmFirstAndWhatTheBaseShipsIsNotRebuilt) {
  std::map<std::string, std::string> p5;
  for (const auto& f : generate_image(example("p5-3.11.yaml"))) p5[f.path] = f.content;
  EXPECT_EQ(source_package_name("0.1.0"), "pcdino-0.1.0-src");
  EXPECT_NE(p5.at("scripts/00-base.sh").find("[ -f \"$FILES/pcdino-0.1.0-src.tar.gz\" ] || fail"),
            std::string::npos);
  const std::string& pcdino = p5.at("scripts/85-pcdino.sh");
  const auto at = [&pcdino](const char* what) {
    const auto pos = pcdino.find(what);
    EXPECT_NE(pos, std::string::npos) << what << " not in\n" << pcdino;
    return pos;
  };
  const auto guard = at("SLURM_RELEASE=23.11.10\n");
  EXPECT_LT(guard, at("apt-get install")) << "the Slurm headers are checked before anything is installed";
  EXPECT_LT(at("[ \"${headers%.*}\" != \"${SLURM_RELEASE%.*}\" ]"), at("cmake -S"));
  at("libfaiss-dev");
  const LibTorchArtifact* torch = libtorch_artifact("2.5.1+cu124");
  ASSERT_NE(torch, nullptr);
  at(torch->url);
  at((std::string("echo \"") + torch->sha256 + "  /tmp/libtorch.zip\" | sha256sum -c").c_str());
  at("-DSLURM_INCLUDE_DIR=\"$SLURM_PREFIX/include\"");
  at("-DCUDAToolkit_ROOT=/usr/local/cuda -DNCCL_ROOT=/opt/nccl");
  at("-DMPI_HOME=\"$MPI_HOME\"");
  at("ami check-plugin \"$plugin\" --slurm \"$SLURM_RELEASE\"");
  at("grep -q \"^  libtorch .*(CUDA)\" || fail \"pcdino's LibTorch has no CUDA\"");
  EXPECT_NE(p5.at("files/README").find("scripts/package --source"), std::string::npos);
  // 3.11.1's AMI: enroot 3.4.1 and Pyxis 0.20.0. The spec wants enroot 3.5.0 and Pyxis 0.20.0.
  const std::string& ep = p5.at("scripts/70-enroot-pyxis.sh");
  // Another enroot: built from its tag's commit (its packages have no published digest).
  EXPECT_NE(ep.find("git clone -q --depth 1 --branch v3.5.0 https://github.com/NVIDIA/enroot.git"),
            std::string::npos)
      << ep;
  EXPECT_NE(ep.find("= c7dc4a6b66e817af5ceb7d5315850696067b3f80 ]"), std::string::npos) << ep;
  EXPECT_NE(ep.find("make -C /tmp/enroot-src install prefix= exec_prefix=/usr datarootdir=/usr/share\n"
                    "make -C /tmp/enroot-src setcap"),
            std::string::npos)
      << ep;
  EXPECT_EQ(ep.find("pyxis.git"), std::string::npos) << "the base's Pyxis: not rebuilt\n" << ep;
  EXPECT_NE(ep.find("ParallelCluster 3.11.1's AMI ships Pyxis 0.20.0"), std::string::npos) << ep;
  EXPECT_EQ(ep.find("plugstack"), std::string::npos) << "the head node enables Pyxis, not the image";
  // CUDA 12.4.1 is the base's: checked, not downloaded; EFA installer 1.36.0 is not (1.34.0): installed.
  EXPECT_EQ(p5.at("scripts/20-cuda.sh").find("cuda.run"), std::string::npos) << p5.at("scripts/20-cuda.sh");
  EXPECT_NE(p5.at("scripts/20-cuda.sh").find("AMI ships CUDA 12.4.1"), std::string::npos);
  EXPECT_NE(p5.at("scripts/50-efa.sh").find("efa_installer.sh -y"), std::string::npos);
  // The driver is judged by its kernel module: the CPU build instance has no nvidia-smi to ask.
  EXPECT_NE(p5.at("scripts/10-nvidia-driver.sh").find("current=$(modinfo -F version nvidia"),
            std::string::npos);
  ImageSpec same = example("p5-3.11.yaml");
  same.versions["enroot"] = "3.4.1";
  same.versions["efa_installer"] = "1.34.0";
  std::map<std::string, std::string> as_base;
  for (const auto& f : generate_image(same)) as_base[f.path] = f.content;
  EXPECT_EQ(as_base.at("scripts/70-enroot-pyxis.sh").find("enroot.git"), std::string::npos);
  EXPECT_EQ(as_base.at("scripts/50-efa.sh").find("curl"), std::string::npos)
      << as_base.at("scripts/50-efa.sh");
}

// The facts a source build is checked against, and the rules over them.
TEST(AmiSourceBuild, TablesAndRules) {
  EXPECT_EQ(libtorch_cuda("2.5.1+cu124"), "12.4");
  EXPECT_EQ(libtorch_cuda("2.7.1+cu118"), "11.8");
  EXPECT_EQ(libtorch_cuda("2.5.1+cpu"), "");
  EXPECT_THROW(libtorch_cuda("2.5.1"), std::invalid_argument);
  for (const auto& a : libtorch_artifacts()) {
    EXPECT_EQ(std::string(a.sha256).size(), 64u) << a.version;
    EXPECT_NE(std::string(a.url).find("download.pytorch.org/libtorch/"), std::string::npos) << a.version;
    const std::string variant = std::string(a.version).substr(std::string(a.version).find('+') + 1);
    EXPECT_NE(std::string(a.url).find("/" + variant + "/"), std::string::npos) << a.url;
  }
  ASSERT_NE(os_build_packages("ubuntu2204"), nullptr);
  EXPECT_TRUE(os_build_packages("ubuntu2204")->missing.empty());
  EXPECT_FALSE(os_build_packages("alinux2023")->missing.empty());

  ImageSpec s = example("p5-3.11.yaml");
  s.versions["libtorch"] = "2.5.1+cu121";
  std::string m = all_messages(s);
  EXPECT_NE(m.find("versions.libtorch 2.5.1+cu121 and versions.cuda 12.4.1"), std::string::npos) << m;
  s = example("p5-3.11.yaml");
  s.versions["cuda"] = "12.6.2";
  s.versions["libtorch"] = "2.6.0+cu126";
  s.versions["nvidia_driver"] = "555.42.02";  // below CUDA 12.6's 560.28.03
  m = all_messages(s);
  EXPECT_NE(m.find("versions.libtorch 2.6.0+cu126 and versions.nvidia_driver 555.42.02"), std::string::npos)
      << m;
  EXPECT_NE(m.find("CUDA 12.6 runtime needs driver >= 560.28.03"), std::string::npos) << m;
  s = example("p5-3.11.yaml");
  s.versions["libtorch"] = "1.0.0+cu124";
  m = all_messages(s);
  EXPECT_NE(m.find("versions.libtorch 1.0.0+cu124 and its download"), std::string::npos) << m;
  s = example("p5-3.11.yaml");
  s.os = "alinux2023";
  m = all_messages(s);
  EXPECT_NE(m.find("base.os alinux2023 and build.pcdino source"), std::string::npos) << m;
  EXPECT_NE(m.find("HDF5 (amazonlinux/amazon-linux-2023 issue #296)"), std::string::npos) << m;
  s.pcdino_from = "package";
  s.versions.erase("libtorch");
  s.versions.erase("node_exporter");  // not an alinux2023 package (AmiNodeExporter)
  // The AMI's driver and Fabric Manager: NVIDIA's rpm key has no published fingerprint (AmiDownloads).
  s.versions.erase("fabric_manager");
  s.versions["nvidia_driver"] = "550.90.07";
  EXPECT_EQ(all_messages(s), "") << "a package built elsewhere needs no packages of the image's OS";
  s = example("p5-3.11.yaml");
  s.parallelcluster_version = "3.15.0";  // in the table, its Slurm patch unknown
  m = all_messages(s);
  EXPECT_NE(m.find("the Slurm of this release is unknown"), std::string::npos) << m;
  s.parallelcluster_version = "3.17.0";  // not in the table
  m = all_messages(s);
  EXPECT_NE(m.find("base.parallelcluster_version 3.17.0 and its official AMI do not work together: not a "
                   "release pcdino knows (3.6.0 to 3.16.3)"),
            std::string::npos)
      << m;

  // versions.libtorch against build.pcdino: spec head (after name and region) -> the error it must give.
  const std::pair<const char*, const char*> libtorch_cases[] = {
      {R"(base: {parallelcluster_version: "3.7.0", os: alinux2}
build: {pcdino: package}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pyxis: "0.12.0", pcdino: "0.1.0", libtorch: "2.5.1+cpu"}
)",
       "versions.libtorch: only for build.pcdino: source"},
      {R"(base: {parallelcluster_version: "3.11.1", os: ubuntu2204}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pyxis: "0.12.0", pcdino: "0.1.0", libtorch: "2.5.1"}
)",
       "versions.libtorch: expected a LibTorch release and variant like 2.5.1+cu124"},
      {R"(base: {parallelcluster_version: "3.11.1", os: ubuntu2204}
accelerator: none
versions: {efa_installer: "1.25.1", enroot: "3.4.0", pyxis: "0.12.0", pcdino: "0.1.0"}
)",
       "versions.libtorch: missing"},
  };
  for (const auto& [spec, error] : libtorch_cases) {
    const std::string got = spec_error(std::string("name: t\nregion: us-west-2\n") + spec);
    EXPECT_NE(got.find(error), std::string::npos) << got;
  }
}

TEST(AmiCompat, PublishedBusBandwidthFloors) {
  std::string source;
  EXPECT_DOUBLE_EQ(nccl_busbw_threshold("p4d.24xlarge", &source), 26.0);
  EXPECT_NE(source.find("test_efa.py"), std::string::npos);
  EXPECT_DOUBLE_EQ(nccl_busbw_threshold("p5.48xlarge", nullptr), 250.0);
  EXPECT_DOUBLE_EQ(nccl_busbw_threshold("g4dn.12xlarge", nullptr), 0.0);
  EXPECT_EQ(gpus_per_instance("p4d.24xlarge"), 8);
}

}  // namespace
}  // namespace pcdino::ami

namespace pcdino::ami {
namespace {

// The Gaudi and Trainium examples with one line changed: `from` replaced by `to`.
ImageSpec changed(const std::string& name, const std::string& from, const std::string& to) {
  std::ifstream in(std::string(PCDINO_SOURCE_DIR) + "/ami/examples/" + name);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const auto at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) yaml.replace(at, from.size(), to);
  return parse_image_spec(yaml, name);
}

// Each impossible pair is refused with both sides and the vendor's source named.
TEST(AmiCompat, GaudiAndTrainiumRefuseWhatTheVendorsDoNotSupport) {
  struct Case {
    const char* example;
    const char* from;
    const char* to;
    const char* expected;
  };
  const Case cases[] = {
      {"dl1.yaml", "gaudi_software: \"1.21.0-555\"", "gaudi_software: \"1.22.0-32\"",
       "dl1.24xlarge's first-generation Gaudi (HL-205) is last supported by Intel Gaudi software 1.21"},
      {"dl1.yaml", "gaudi_software: \"1.21.0-555\"", "gaudi_software: \"1.9.0-580\"",
       "Intel Gaudi software 1.9 is not in the table"},
      {"dl1.yaml", "parallelcluster_version: \"3.16.3\"\n  os: ubuntu2204",
       "parallelcluster_version: \"3.16.3\"\n  os: alinux2023",
       "Intel Gaudi software 1.21 supports ubuntu2204 among pcdino's base.os values"},
      {"dl1.yaml", "parallelcluster_version: \"3.16.3\"\n  os: ubuntu2204",
       "parallelcluster_version: \"3.16.3\"\n  os: alinux2", "supports ubuntu2204"},
      {"dl1.yaml", "instance_type: dl1.24xlarge", "instance_type: trn1.32xlarge",
       "trn1.32xlarge carries Trainium devices: its image needs accelerator: neuron"},
      {"dl1.yaml", "instance_type: dl1.24xlarge", "instance_type: g5.12xlarge",
       "not an instance type with habana devices (known: dl1.24xlarge)"},
      {"trn1.yaml", "neuron_sdk: \"2.22.0\"", "neuron_sdk: \"2.18.0\"",
       "Neuron SDK 2.18.0 is not in the table of package versions"},
      {"trn1.yaml", "os: ubuntu2204", "os: alinux2",
       "the Neuron runtime of 2.22.0 supports ubuntu2204, alinux2023"},
      {"trn1.yaml", "instance_type: trn1.32xlarge", "instance_type: trn2.48xlarge", ""},
      {"trn1.yaml", "instance_type: trn1.32xlarge", "instance_type: dl1.24xlarge",
       "dl1.24xlarge carries HL-205 devices: its image needs accelerator: habana"},
  };
  for (const auto& c : cases) {
    const std::string messages = all_messages(changed(c.example, c.from, c.to));
    if (*c.expected == '\0') {
      EXPECT_EQ(messages, "") << c.to;
    } else {
      EXPECT_NE(messages.find(c.expected), std::string::npos) << c.to << ": " << messages;
      EXPECT_NE(messages.find("(source: "), std::string::npos) << messages;
    }
  }
  // Trn2 came with Neuron 2.21; the runtime left Amazon Linux 2 after 2.19.
  const ImageSpec trn2_219 = changed("trn1.yaml", "neuron_sdk: \"2.22.0\"\n", "neuron_sdk: \"2.19.0\"\n");
  EXPECT_EQ(all_messages(trn2_219), "");
  ImageSpec on_trn2 = trn2_219;
  on_trn2.verify_instance_type = "trn2.48xlarge";
  EXPECT_NE(
      all_messages(on_trn2).find("Neuron SDK 2.19.0 supports trn1, trn1n, inf2 (Trainium2 needs a later"),
      std::string::npos)
      << all_messages(on_trn2);
  // An NVIDIA or accelerator-less image on a Gaudi node lacks its drivers.
  ImageSpec nvidia = example("p5-3.11.yaml");
  nvidia.verify_instance_type = "dl1.24xlarge";
  EXPECT_NE(all_messages(nvidia).find("its image needs accelerator: habana"), std::string::npos);
}

TEST(AmiSpec, EachAcceleratorPinsItsOwnComponents) {
  std::string e = spec_error(R"(name: t
region: us-east-1
base: {parallelcluster_version: "3.11.1", os: ubuntu2204}
build: {pcdino: package}
accelerator: habana
versions: {efa_installer: "1.36.0", enroot: "3.5.0", pyxis: "0.20.0", pcdino: "0.1.0", gaudi_software: "1.21.0-555", neuron_sdk: "2.22.0"}
)");
  EXPECT_NE(e.find("versions.neuron_sdk: only for accelerator: neuron (this image is 'habana')"),
            std::string::npos)
      << e;
  e = spec_error(R"(name: t
region: us-east-1
base: {parallelcluster_version: "3.11.1", os: ubuntu2204}
build: {pcdino: package}
accelerator: neuron
versions: {efa_installer: "1.36.0", enroot: "3.5.0", pyxis: "0.20.0", pcdino: "0.1.0"}
)");
  EXPECT_NE(e.find("versions.neuron_sdk: missing"), std::string::npos) << e;
}

TEST(AmiGenerate, GaudiAndNeuronScriptsPinEveryPackage) {
  // Gaudi: refused until Intel's key has a recorded fingerprint; nothing is generated.
  EXPECT_THROW(generate_image(example("dl1.yaml")), ConfigError);
  std::map<std::string, std::string> trn1;
  for (const auto& f : generate_image(example("trn1.yaml"))) trn1[f.path] = f.content;
  for (const char* nvidia : {"scripts/10-nvidia-driver.sh", "scripts/20-cuda.sh", "scripts/40-nccl.sh"})
    EXPECT_EQ(trn1.count(nvidia), 0u) << nvidia;
  const NeuronRelease* r = neuron_release("2.22.0");
  ASSERT_NE(r, nullptr);
  const std::string& neuron = trn1.at("scripts/20-neuron.sh");
  EXPECT_NE(neuron.find(std::string("aws-neuronx-dkms=") + r->dkms + "*"), std::string::npos) << neuron;
  EXPECT_NE(neuron.find(std::string("aws-neuronx-collectives=") + r->collectives + "*"), std::string::npos);
  // AWS's repository, its key checked against the recorded fingerprint before apt trusts it.
  EXPECT_LT(neuron.find("[ \"$fpr\" = 00FA2C1079260870A76D2C285749CAD8646D9185 ]"),
            neuron.find("deb [signed-by=/usr/share/keyrings/neuron.gpg]"))
      << neuron;
  EXPECT_NE(trn1.at("verify.sh").find("check neuron_driver 2.20.28.0"), std::string::npos);
  EXPECT_NE(trn1.at("verify.sh").find("\"Neuron devices (trn1.32xlarge)\" 16"), std::string::npos);
  // Each verify.sh checks its own accelerator only, and no generated file keeps a placeholder.
  EXPECT_EQ(trn1.at("verify.sh").find("hl-smi"), std::string::npos);
  const std::regex placeholder("@[A-Z_]+@");
  for (const char* name : {"workshop.yaml", "current.yaml", "p5-3.11.yaml", "trn1.yaml"}) {
    for (const auto& f : generate_image(example(name))) {
      EXPECT_FALSE(std::regex_search(f.content, placeholder)) << name << " " << f.path;
      if (f.path == "verify.sh") {
        EXPECT_EQ(f.content.find("Gaudi cards"), std::string::npos) << name;
      }
    }
  }
}

}  // namespace
}  // namespace pcdino::ami

namespace pcdino::ami {
namespace {

// versions.node_exporter: the OS's own package at its version, refused where the OS has none; the script
// installs it, points the textfile collector at pcdino's metrics directory and enables it at boot, and
// verify.sh asks the running exporter.
TEST(AmiNodeExporter, OsPackageOnlyAndTheTextfileCollector) {
  ImageSpec s = example("p5-3.11.yaml");
  ASSERT_EQ(s.versions.at("node_exporter"), "1.3.1");
  EXPECT_EQ(all_messages(s), "");
  s.versions["node_exporter"] = "1.7.0";
  std::string m = all_messages(s);
  EXPECT_NE(
      m.find("versions.node_exporter 1.7.0 and base.os ubuntu2204 do not work together: ubuntu2204's own "
             "prometheus-node-exporter is 1.3.1"),
      std::string::npos)
      << m;
  for (const char* os : {"alinux2", "alinux2023"}) {
    ImageSpec w = example("workshop.yaml");
    w.os = os;
    w.versions["node_exporter"] = "1.3.1";
    m = all_messages(w);
    EXPECT_NE(m.find(std::string("base.os ") + os + " do not work together"), std::string::npos) << m;
    EXPECT_NE(m.find("leave versions.node_exporter out on " + std::string(os)), std::string::npos) << m;
    EXPECT_THROW(generate_image(w), ConfigError) << os;
  }
  // On any accelerator, as an optional pin.
  std::string minimal = kMinimal;
  const std::string pin = "pcdino: \"0.1.0\"";
  minimal.replace(minimal.find(pin), pin.size(), pin + ", node_exporter: \"1.3.1\"");
  EXPECT_EQ(spec_error(minimal), "(no error)");

  std::map<std::string, std::string> files;
  for (const auto& f : generate_image(example("p5-3.11.yaml"))) files[f.path] = f.content;
  const std::string& sh = files.at("scripts/75-node-exporter.sh");
  EXPECT_NE(sh.find("apt-get install -y -q prometheus-node-exporter\n"), std::string::npos) << sh;
  EXPECT_NE(sh.find("TEXTFILE_DIR=/var/lib/prometheus/node-exporter\n"), std::string::npos);
  EXPECT_NE(sh.find(R"(ARGS="--collector.textfile.directory=$TEXTFILE_DIR")"), std::string::npos);
  EXPECT_NE(sh.find("install -d -m 1777"), std::string::npos) << "jobs write their own files there";
  EXPECT_NE(sh.find("systemctl enable prometheus-node-exporter.service"), std::string::npos);
  EXPECT_NE(files.at("image.pkr.hcl").find("\"scripts/75-node-exporter.sh\""), std::string::npos);
  EXPECT_NE(files.at("verify.sh").find("http://localhost:9100/metrics"), std::string::npos);
  EXPECT_NE(files.at("files/manifest.json").find("\"node_exporter\": \"1.3.1\""), std::string::npos);
  // Left out, no script.
  files.clear();
  for (const auto& f : generate_image(example("workshop.yaml"))) files[f.path] = f.content;
  EXPECT_EQ(files.count("scripts/75-node-exporter.sh"), 0u);
}

}  // namespace
}  // namespace pcdino::ami

namespace pcdino::parallelcluster {
namespace {

// Every release from 3.11.0 to 3.16.3 has a row with its source; the facts read for 3.16.3 are its notes'.
TEST(ParallelClusterReleases, EveryReleaseFrom311To3163HasASourcedRow) {
  for (const char* v : {"3.11.0", "3.11.1", "3.12.0", "3.13.0", "3.13.1", "3.13.2", "3.14.0", "3.14.1",
                        "3.14.2", "3.15.0", "3.15.1", "3.16.0", "3.16.1", "3.16.2", "3.16.3"}) {
    const Release* row = find_release(v);
    ASSERT_NE(row, nullptr) << v;
    EXPECT_FALSE(row->source.empty()) << v;
  }
  for (std::size_t i = 1; i < releases().size(); ++i)
    EXPECT_LT(compare_versions(releases()[i - 1].release, releases()[i].release), 0) << releases()[i].release;
  EXPECT_STREQ(newest_release().release, "3.16.3");
  const Release& newest = newest_release();
  EXPECT_STREQ(newest.slurm, "25.11.8");
  EXPECT_STREQ(newest.nvidia_driver, "595.112.07");
  EXPECT_STREQ(newest.efa_installer, "1.51.0");
  EXPECT_STREQ(newest.cuda, "") << "3.16's CUDA was not read at its tag: unknown, not guessed";
  EXPECT_STREQ(find_release("3.13.0")->slurm, "24.05.7");
  EXPECT_STREQ(find_release("3.14.0")->slurm, "24.11.6");
  EXPECT_STREQ(find_release("3.14.1")->slurm, "");
  EXPECT_EQ(find_release("3.17.0"), nullptr);
  Release al2;
  ASSERT_TRUE(base_ami("3.13.0", "alinux2", &al2));
  EXPECT_STREQ(al2.nvidia_driver, "550.127.08") << "Amazon Linux 2 kept its driver from 3.13.0";
  ASSERT_TRUE(base_ami("3.13.0", "ubuntu2204", &al2));
  EXPECT_STREQ(al2.nvidia_driver, "570.86.15");
}

TEST(ParallelClusterReleases, OperatingSystemsAndTheirLustreClient) {
  EXPECT_EQ(os_support_problem("3.16.3", "ubuntu2204"), "");
  EXPECT_NE(os_support_problem("3.12.0", "ubuntu2404").find("from ParallelCluster 3.13.0"),
            std::string::npos);
  EXPECT_NE(os_support_problem("3.14.0", "ubuntu2004").find("until 3.14.0 (removed there)"),
            std::string::npos);
  EXPECT_EQ(os_support_problem("3.13.2", "ubuntu2004"), "");
  EXPECT_NE(os_support_problem("3.16.3", "centos7"), "");
  EXPECT_NE(os_support_note("3.16.3", "ubuntu2204").find("through ParallelCluster 3.14.0"),
            std::string::npos);
  EXPECT_EQ(os_support_note("3.14.0", "ubuntu2204"), "");
  EXPECT_NE(lustre_problem("3.16.3", "ubuntu2404").find("no Lustre client"), std::string::npos);
  EXPECT_NE(lustre_problem("3.13.0", "ubuntu2404").find("does not support Lustre"), std::string::npos);
  EXPECT_EQ(lustre_problem("3.16.3", "ubuntu2204"), "");
  EXPECT_EQ(lustre_problem("3.16.3", "alinux2023"), "");
}

}  // namespace
}  // namespace pcdino::parallelcluster
