#include "pcdino/ami/downloads.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::ami {

namespace {

// Where the digests were read. A file's sha256 comes from its vendor where the vendor publishes one
// (AWS's cookbook, NVIDIA's redistrib manifests), else from projects that check the same file on every
// download (Spack, nixpkgs: a wrong digest fails their builds); none was downloaded here. A wrong one stops
// the image build at `sha256sum -c`, naming the component.
const char* const kSpackCuda =
    "Spack's cuda package (var/spack/repos/builtin/packages/cuda/package.py and spack-packages' "
    "packages/cuda/package.py, _versions Linux-x86_64, 2024-2026); the same as nixpkgs' "
    "cuda-modules/cudatoolkit/releases.nix where it lists the runfile";
const char* const kNixDriver =
    "nixpkgs pkgs/os-specific/linux/nvidia-x11/default.nix sha256_64bit (fixed-output hash, SRI form "
    "read as hex)";
const char* const kNixDriverConfigs =
    "nixpkgs nvidiaPackages.mkDriver sha256_64bit of the XFree86 runfile (SRI form read as hex), the same in "
    "seven independent NixOS configurations that build it (production branch, 2024-10)";
const char* const kGit = "read from the repository's tags on 2026-11-29";

const char* const kNccl = "https://github.com/NVIDIA/nccl.git";
const char* const kOfi = "https://github.com/aws/aws-ofi-nccl.git";
const char* const kNcclTests = "https://github.com/NVIDIA/nccl-tests.git";
const char* const kPyxis = "https://github.com/NVIDIA/pyxis.git";
const char* const kEnroot = "https://github.com/NVIDIA/enroot.git";

// clang-format off
#define PCDINO_CUDA(v, drv, sha)                                                                           \
  {"cuda", v, "",                                                                                         \
   "https://developer.download.nvidia.com/compute/cuda/" v "/local_installers/cuda_" v "_" drv "_linux.run", \
   "", sha, kSpackCuda}
#define PCDINO_EFA(v, sha, where)                                                                          \
  {"efa_installer", v, "", "https://efa-installer.amazonaws.com/aws-efa-installer-" v ".tar.gz", "", sha, where}
// clang-format on

// Files, by component.
const std::vector<PinnedDownload>& file_rows() {
  static const std::vector<PinnedDownload> table = {
      // NVIDIA's driver runfiles. A release's data center (tesla/) and XFree86 runfiles carry one digest
      // where both were recorded (535.154.05: nixpkgs' dc_535 and a NixOS configuration's XFree86 override).
      {"nvidia_driver", "510.47.03", "",
       "https://us.download.nvidia.com/XFree86/Linux-x86_64/510.47.03/NVIDIA-Linux-x86_64-510.47.03.run", "",
       "f2a421dae836318d3c0d96459ccb3af27e90e50c95b0faa4288af76279e5d690",
       "nixpkgs pkgs/os-specific/linux/nvidia-x11/default.nix 'stable' 510.47.03 (2022-02), sha256_64bit "
       "8qQh2ug2... read as hex"},
      {"nvidia_driver", "535.154.05", "",
       "https://us.download.nvidia.com/tesla/535.154.05/NVIDIA-Linux-x86_64-535.154.05.run", "",
       "7e95065caa6b82de926110f14827a61972eb12c200e863a29e9fb47866eaa898",
       "nixpkgs pkgs/os-specific/linux/nvidia-x11/default.nix dc_535 (data center driver, 2024-05)"},
      {"nvidia_driver", "550.54.14", "",
       "https://us.download.nvidia.com/XFree86/Linux-x86_64/550.54.14/NVIDIA-Linux-x86_64-550.54.14.run", "",
       "8c497ff1cfc7c310fb875149bc30faa4fd26d2237b2cba6cd2e8b0780157cfe3", kNixDriver},
      {"nvidia_driver", "550.78", "",
       "https://us.download.nvidia.com/XFree86/Linux-x86_64/550.78/NVIDIA-Linux-x86_64-550.78.run", "",
       "34070434527ec9d575483e7f11ca078e467e73f6defc54366ecfbdcfe4a3bf73", kNixDriver},
      {"nvidia_driver", "550.127.05", "",
       "https://us.download.nvidia.com/XFree86/Linux-x86_64/550.127.05/NVIDIA-Linux-x86_64-550.127.05.run",
       "", "d384f34f5d2a896bd7536d3deb6a6d973d8094a3ad485a1c2ee3bf5192086ae9", kNixDriverConfigs},
      // CUDA runfiles (compat.cpp's runfile table names the bundled driver; 13.2.x: no digest found).
      PCDINO_CUDA("11.6.0", "510.39.01", "1783da6d63970786040980b57fa3cb6420142159fc7d0e66f8f05c4905d98c83"),
      PCDINO_CUDA("11.6.2", "510.47.03", "99b7a73dcc52a52cef4c1fceb4a60c3015ac9b6404082c1677d9efdaba1d4593"),
      PCDINO_CUDA("11.7.1", "515.65.01", "52286a29706549b7d0feeb0e7e3eca1b15287c436a69fa880ad385b1be3e04db"),
      PCDINO_CUDA("11.8.0", "520.61.05", "9223c4af3aebe4a7bbed9abd9b163b03a1b34b855fbc2b4a0d1b706ac09a5a16"),
      PCDINO_CUDA("12.0.1", "525.85.12", "1b205a06272f1463f477276fdab903f3f666917c068e520738001e69c7a1875b"),
      PCDINO_CUDA("12.1.1", "530.30.02", "d74022d41d80105319dfa21beea39b77a5b9919539c0487a05caaf2446d6a70e"),
      PCDINO_CUDA("12.2.2", "535.104.05", "2b39aae3e7618d9f59a3c8fa1f1bc61f29c0b0e0df75fb05076badb352952ef2"),
      PCDINO_CUDA("12.3.2", "545.23.08", "24b2afc9f770d8cf43d6fa7adc2ebfd47c4084db01bdda1ce3ce0a4d493ba65b"),
      PCDINO_CUDA("12.4.1", "550.54.15", "367d2299b3a4588ab487a6d27276ca5d9ead6e394904f18bccb9e12433b9c4fb"),
      PCDINO_CUDA("12.5.1", "555.42.06", "b5e0a779e089c86610051141c4cf498beef431858ec63398107391727ecbdb04"),
      PCDINO_CUDA("12.6.2", "560.35.03", "3729a89cb58f7ca6a46719cff110d6292aec7577585a8d71340f0dbac54fb237"),
      PCDINO_CUDA("12.6.3", "560.35.05", "81d60e48044796d7883aa8a049afe6501b843f2c45639b3703b2378de30d55d3"),
      PCDINO_CUDA("12.8.1", "570.124.06", "228f6bcaf5b7618d032939f431914fc92d0e5ed39ebe37098a24502f26a19797"),
      PCDINO_CUDA("12.9.1", "575.57.08", "0f6d806ddd87230d2adbe8a6006a9d20144fdbda9de2d6acc677daa5d036417a"),
      PCDINO_CUDA("13.0.2", "580.95.05", "81a5d0d0870ba2022efb0a531dcc60adbdc2bbff7b3ef19d6fd6d8105406c775"),
      PCDINO_CUDA("13.1.1", "590.48.01", "24ff323723722781436804b392a48f691cb40de9808095d3e2192d0db6dfb8e4"),
      // cuDNN's redistributable archives, per CUDA major.
      {"cudnn", "8.9.7.29", "cuda11",
       "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-x86_64/"
       "cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz",
       "", "a3e2509028cecda0117ce5a0f42106346e82e86d390f4bb9475afc976c77402e",
       "Spack's cudnn package (_versions '8.9.7.29-11', 2024), whose '8.9.7.29-12' row is NVIDIA's "
       "redistrib_8.9.7.29.json digest"},
      {"cudnn", "8.9.7.29", "cuda12",
       "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-x86_64/"
       "cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz",
       "", "475333625c7e42a7af3ca0b2f7506a106e30c93b1aa0081cd9c13efb6e21e3bb",
       "NVIDIA's redistrib_8.9.7.29.json (2023-12-05; as vendored in nixpkgs cuda-modules/cudnn/manifests)"},
      {"cudnn", "9.1.0.70", "cuda11",
       "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-x86_64/"
       "cudnn-linux-x86_64-9.1.0.70_cuda11-archive.tar.xz",
       "", "8210dc5f0d6a04ce20ebfeb39e41e56e22e77a298b1657f9e3db80c650110310",
       "NVIDIA's redistrib_9.1.0.json (2024-04-12; as vendored in nixpkgs cuda-modules/cudnn/manifests)"},
      {"cudnn", "9.1.0.70", "cuda12",
       "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-x86_64/"
       "cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz",
       "", "fdc6d6f28217b82c400adfdae8f0364fa36c5fb6cb683933e8900a748e70b263",
       "NVIDIA's redistrib_9.1.0.json (2024-04-12; as vendored in nixpkgs cuda-modules/cudnn/manifests)"},
      // AWS's EFA installer (AWS also signs it: aws-efa-installer.key; the cookbook's digest is enough).
      PCDINO_EFA("1.21.0", "c64e6ca34ccfc3ebe8e82d08899ae8442b3ef552541cf5429c43d11a04333050",
                 "aws-parallelcluster-cookbook 47d74c82 (2023-03-10), attributes/default.rb"),
      PCDINO_EFA("1.22.1", "f90f3d5f59c031b9a964466b5401e86fd0429272408f6c207c3f9048254e9665",
                 "aws-parallelcluster-cookbook 0eea319e (2023-03-28), attributes/default.rb"),
      PCDINO_EFA("1.24.0", "878623f819a0d9099d76ecd41cf4f569d4c3aac0c9bb7ba9536347c50b6bf88e",
                 "aws-parallelcluster-cookbook cb66bf80 (2023-07-11), resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.25.0", "98b7b26ce031a2d6a93de2297cc71b03af647194866369ca53b60d82d45ad342",
                 "aws-parallelcluster-cookbook 71dc8ce1 (2023-08-03), resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.25.1", "d2abc553d22b89a4ce92882052c1fa6de450d3a801fe005da718b7d4b9602b06",
                 "aws-parallelcluster-cookbook 5b2c7738 (2023-08-28, release 3.7), "
                 "resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.26.1", "c616994c924f54ebfabfab32b7fe8ac56947fae00a0ff453d975e298d174fc96",
                 "aws-parallelcluster-cookbook b9db78fc (2023-09-15), resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.29.0", "836655f87015547e733e7d9f7c760e4e24697f8bbc261bb5f3560abd4206bc36",
                 "aws-parallelcluster-cookbook 535b476a (2023-11-14), resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.29.1", "178b263b8c25845b63dc93b25bcdff5870df5204ec509af26f43e8d283488744",
                 "aws-parallelcluster-cookbook 97f8ebd4 (2023-12-15), resources/efa/partial/_common.rb"),
      PCDINO_EFA("1.30.0", "876ab9403e07a0c3c91a1a34685a52eced890ae052df94857f6081c5f6c78a0a",
                 "aws-parallelcluster-cookbook 1d008ad7 (2024-01-31), attributes/environment.rb"),
      PCDINO_EFA("1.32.0", "5f7233760be57f6fee6de8c09acbfbf59238de848e06048dc54d156ef578fc66",
                 "aws-parallelcluster-cookbook b0ca7b87 (2024-06-07), attributes/environment.rb"),
      PCDINO_EFA("1.34.0", "bd68839e741b0afd3ec2e37d50603803cfa7a279c120f0a736cc57c2ff2d7fdc",
                 "aws-parallelcluster-cookbook f228243c (2024-09-10), attributes/environment.rb"),
      PCDINO_EFA("1.36.0", "de183f333cfb58aeb7908a67bf9106985ba3ccb7f8638b851d2a0d8dbfacaec4",
                 "aws-parallelcluster-cookbook d9013ae6 (PR #2842, 2024-10), attributes/environment.rb"),
      PCDINO_EFA("1.38.0", "4f436954f35ad53754b4d005fd8d0be63de3b4184de41a695b504bdce0fecb22",
                 "aws-parallelcluster-cookbook PR #2892 (2025-02-27), attributes/environment.rb"),
      PCDINO_EFA("1.38.1", "83923374afd388b1cfcf4b3a21a2b1ba7cf46a01a587f7b519b8386cb95e4f81",
                 "aws-parallelcluster-cookbook 05b17d78 (2025-03), attributes/environment.rb"),
      PCDINO_EFA("1.41.0", "3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f",
                 "aws-parallelcluster-cookbook PR #2953 (2025), attributes/environment.rb"),
  };
  return table;
}

#undef PCDINO_CUDA
#undef PCDINO_EFA

// Git sources, cloned by tag and checked against the tag's commit: a moved tag stops the build.
const std::vector<PinnedDownload>& git_rows() {
  static const std::vector<PinnedDownload> table = {
      {"nccl", "2.10.3-1", "", kNccl, "v2.10.3-1", "7e515921295adaab72adf56ea71a0fafb0ecb5f3", kGit},
      {"nccl", "2.12.7-1", "", kNccl, "v2.12.7-1", "3c223c105a24dff651a67c26fd5f92ba45844345", kGit},
      {"nccl", "2.12.10-1", "", kNccl, "v2.12.10-1", "353e8ba446cdaadfa730c56d23328b6b912faac9", kGit},
      {"nccl", "2.12.12-1", "", kNccl, "v2.12.12-1", "7aa1c46fd551d5514474cfc55848219dc67ca683", kGit},
      {"nccl", "2.18.5-1", "", kNccl, "v2.18.5-1", "559b70f86c190a0d8f67f0d7a0f2c9810dd1e8c7", kGit},
      {"nccl", "2.21.5-1", "", kNccl, "v2.21.5-1", "ab2b89c4c339bd7f816fbc114a4b05d386b66290", kGit},
      {"nccl", "2.23.4-1", "", kNccl, "v2.23.4-1", "68b542363f9a44cdaac480f51ebe0fc26de96139", kGit},
      {"aws_ofi_nccl", "1.4.0", "", kOfi, "v1.4.0-aws", "474c2a97536309ca690610eab50a5176c42d72de", kGit},
      {"aws_ofi_nccl", "1.5.0", "", kOfi, "v1.5.0-aws", "73900d2b1e1ac659b5c8eb09b3ebcbc9a78d2087", kGit},
      {"aws_ofi_nccl", "1.7.0", "", kOfi, "v1.7.0-aws", "69f22923ed3d9360b7a1e2079dbb7b0587b54f25", kGit},
      {"aws_ofi_nccl", "1.7.1", "", kOfi, "v1.7.1-aws", "8a79a34301eaaf25095c4087e1e9b93ef5799018", kGit},
      {"aws_ofi_nccl", "1.7.2", "", kOfi, "v1.7.2-aws", "a463b88a2fb4b91df568ffbb1d2c9b4797b953ae", kGit},
      {"aws_ofi_nccl", "1.7.3", "", kOfi, "v1.7.3-aws", "6de215f81cdd653ae8f69df714fa4e5838d77cd4", kGit},
      {"aws_ofi_nccl", "1.7.4", "", kOfi, "v1.7.4-aws", "42802e41d045a54ad01c328f10c6505785ebd6ac", kGit},
      {"aws_ofi_nccl", "1.8.0", "", kOfi, "v1.8.0-aws", "1e47e1520460e52136a3f4ebb7b04f2f1eff2b72", kGit},
      {"aws_ofi_nccl", "1.8.1", "", kOfi, "v1.8.1-aws", "cf6f822d95d9523397c4e120223a1c5685432b9f", kGit},
      {"aws_ofi_nccl", "1.9.0", "", kOfi, "v1.9.0-aws", "62a3d06bb5aff810c6b3e8d114fadcc1c99439a4", kGit},
      {"aws_ofi_nccl", "1.9.1", "", kOfi, "v1.9.1-aws", "ed1861ee22c03ee10d11ac19449a169cfcfd61f5", kGit},
      {"aws_ofi_nccl", "1.9.2", "", kOfi, "v1.9.2-aws", "cf6f657f8c83c9bc0ca28b6630dad469072bef8e", kGit},
      {"aws_ofi_nccl", "1.10.0", "", kOfi, "v1.10.0-aws", "b4092297c74679cab269a23f5314cf00eb49c7ec", kGit},
      {"aws_ofi_nccl", "1.11.0", "", kOfi, "v1.11.0-aws", "01f16dd350c8529b0a3674a9309882e3c7f23ef7", kGit},
      {"aws_ofi_nccl", "1.11.1", "", kOfi, "v1.11.1-aws", "2db8375ef10b37a91284dad44e2f52e777f4c8cb", kGit},
      {"aws_ofi_nccl", "1.12.0", "", kOfi, "v1.12.0-aws", "142e0a8c2d1332d7200ddfd426eaa8cc3408d134", kGit},
      {"aws_ofi_nccl", "1.12.1", "", kOfi, "v1.12.1-aws", "23015790362b12fb9038aea95b84c9494ae71d1d", kGit},
      {"aws_ofi_nccl", "1.13.0", "", kOfi, "v1.13.0-aws", "cf7606edaf1f82fe6958bcd9470cd1afa938a4c3", kGit},
      {"aws_ofi_nccl", "1.13.1", "", kOfi, "v1.13.1-aws", "96b92b296e3c96f0cebca42ae3a0902f7b9403b4", kGit},
      {"aws_ofi_nccl", "1.13.2", "", kOfi, "v1.13.2-aws", "5d0c0757bdf8160c290f93a4b1e826e36e5e3f78", kGit},
      {"nccl_tests", "2.10.0", "", kNcclTests, "v2.10.0", "f476f4a17af783f1da83a511e7fcb40551660f66", kGit},
      {"nccl_tests", "2.10.1", "", kNcclTests, "v2.10.1", "1f8f5416863a3082975b10eaa05fecee6fe870c8", kGit},
      {"nccl_tests", "2.11.0", "", kNcclTests, "v2.11.0", "863fcc8de9ca28e48337bc2bee64f54adf737ff6", kGit},
      {"nccl_tests", "2.13.6", "", kNcclTests, "v2.13.6", "0b4c4cb99fb1381edec1f78c37230688ea1ceb26", kGit},
      {"nccl_tests", "2.13.8", "", kNcclTests, "v2.13.8", "1292b25553bd0384f2faa2965f9d82b99797a348", kGit},
      {"nccl_tests", "2.13.9", "", kNcclTests, "v2.13.9", "c6afef0b6f76ffc55d4172d971be6cf5a08a73a4", kGit},
      {"nccl_tests", "2.13.10", "", kNcclTests, "v2.13.10", "d2d40cc8249378efa4d7e2c949528c15eeb7d8e7", kGit},
      {"nccl_tests", "2.13.11", "", kNcclTests, "v2.13.11", "8dfeab9eb9bdfdf13503e71e1f33e7f8a208b540", kGit},
      {"nccl_tests", "2.13.12", "", kNcclTests, "v2.13.12", "29f4114f027fed903649a3c81babc5d52e8d41ae", kGit},
      {"nccl_tests", "2.13.13", "", kNcclTests, "v2.13.13", "cb6a46fdd677783eec470e3df09aa138891bfebf", kGit},
      {"pyxis", "0.11.1", "", kPyxis, "v0.11.1", "a4c8352bd1b9d9b456ce69e387f581a3c85891d3", kGit},
      {"pyxis", "0.12.0", "", kPyxis, "v0.12.0", "1ef8e0164107443bc9aba4fe2ff77abbdc51fc7f", kGit},
      {"pyxis", "0.13.0", "", kPyxis, "v0.13.0", "5ef18f4b2cba109f975d1330a09c95e28a18122f", kGit},
      {"pyxis", "0.14.0", "", kPyxis, "v0.14.0", "ea7bb88a4f31f3535334f92cbcc1324d60b113d8", kGit},
      {"pyxis", "0.15.0", "", kPyxis, "v0.15.0", "f0d112257c866853511410d2a90ce4802df88a46", kGit},
      {"pyxis", "0.16.1", "", kPyxis, "v0.16.1", "f0aaa63184098a353ef65cbe29b9cea730dea086", kGit},
      {"pyxis", "0.17.0", "", kPyxis, "v0.17.0", "06eb95370e38275ffd3d714d4ab38f810a595a18", kGit},
      {"pyxis", "0.18.0", "", kPyxis, "v0.18.0", "cd450010e62121ab408b119fd0e34e34c64ff058", kGit},
      {"pyxis", "0.19.0", "", kPyxis, "v0.19.0", "e006b893e4b63303da154bf1800076dcd6a64bc9", kGit},
      {"pyxis", "0.20.0", "", kPyxis, "v0.20.0", "424563865a491f2d8f3c396a095d18db81f1fb07", kGit},
      {"pyxis", "0.20.1", "", kPyxis, "v0.20.1", "d3ff5b87de45e0cb23dfe626c5edba1238e980e0", kGit},
      {"pyxis", "0.21.0", "", kPyxis, "v0.21.0", "c908f63181e78d6b71a30d71f816009a8709c917", kGit},
      {"pyxis", "0.22.0", "", kPyxis, "v0.22.0", "ba50e1f85622f37f07cca4c7eb4921fa1b72a0ef", kGit},
      {"pyxis", "0.23.0", "", kPyxis, "v0.23.0", "5c41426e55affe344014a4fca1540c379169e0cc", kGit},
      {"pyxis", "0.24.0", "", kPyxis, "v0.24.0", "107519944221822ea1dace4db8e7234b2eaa4cd5", kGit},
      // Enroot is built from its tag (NVIDIA's "From source" installation, doc/installation.md): its
      // release packages have no published digest. The submodules (makeself, musl, linux headers) are the
      // commits the tag's tree records, which git checks by their ids.
      {"enroot", "3.4.0", "", kEnroot, "v3.4.0", "e3e8c53434cdd1850ada2c43e06634fdf1a97097", kGit},
      {"enroot", "3.4.1", "", kEnroot, "v3.4.1", "4dd13f69358cbc878135354ba3eac78db4a3970f", kGit},
      {"enroot", "3.5.0", "", kEnroot, "v3.5.0", "c7dc4a6b66e817af5ceb7d5315850696067b3f80", kGit},
  };
  return table;
}

// What the base AMI ships of a component (ParallelCluster's release table), as the recipes judge it.
const char* parallelcluster::Release::*shipped_field(const std::string& component) {
  if (component == "nvidia_driver") return &parallelcluster::Release::nvidia_driver;
  if (component == "cuda") return &parallelcluster::Release::cuda;
  if (component == "efa_installer") return &parallelcluster::Release::efa_installer;
  if (component == "enroot") return &parallelcluster::Release::enroot;
  if (component == "pyxis") return &parallelcluster::Release::pyxis;
  return nullptr;
}

// The components fetched as a file or git source, and what else picks the row.
const char* const kFetched[] = {"nvidia_driver", "cuda",       "cudnn", "efa_installer", "nccl",
                                "aws_ofi_nccl",  "nccl_tests", "pyxis", "enroot"};

}  // namespace

const std::vector<PinnedDownload>& pinned_downloads() {
  static const std::vector<PinnedDownload> all = [] {
    std::vector<PinnedDownload> rows = file_rows();
    rows.insert(rows.end(), git_rows().begin(), git_rows().end());
    return rows;
  }();
  return all;
}

const PinnedDownload* pinned_download(const std::string& component, const std::string& version,
                                      const std::string& variant) {
  for (const auto& row : pinned_downloads())
    if (component == row.component && version == row.version && variant == row.variant) return &row;
  return nullptr;
}

const std::vector<SigningKey>& signing_keys() {
  static const std::vector<SigningKey> table = {
      {"nvidia-cuda-deb",
       "https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/3bf863cc.pub",
       "EB693B3035CD5710E231E123A4B469963BF863CC",
       "NVIDIA Data Center Driver Installation Guide, 'GPG Keys Used to Sign the Packages' (deb: 3bf863cc; "
       "NVIDIA/cuda-repo-management#4, 2022-04-28); the full fingerprint as apt reports it for the CUDA "
       "repository in NVIDIA/cuda-repo-management#39 (2026-02-02)"},
      // rpm: d42d0685 (the same guide); no full fingerprint was found published, so Fabric Manager is
      // installed on Ubuntu only.
      {"nvidia-cuda-rpm",
       "https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/D42D0685.pub", "",
       "NVIDIA Data Center Driver Installation Guide names key d42d0685; its fingerprint is not published"},
      {"neuron", "https://apt.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB",
       "00FA2C1079260870A76D2C285749CAD8646D9185",
       "bottlerocket-os/bottlerocket's kernel packages (gpgkey-00FA2C1079260870A76D2C285749CAD8646D9185.asc, "
       "which checks aws-neuronx-dkms's signature; 2025); its key id 5749CAD8646D9185 in the Neuron "
       "documentation's setup troubleshooting (gpg_key_update, 2022-11)"},
      {"neuron-rpm", "https://yum.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB",
       "00FA2C1079260870A76D2C285749CAD8646D9185", "the same key as neuron (bottlerocket-os/bottlerocket)"},
      // Intel publishes the key only at this URL: no fingerprint was found in its documentation or elsewhere.
      {"habana", "https://vault.habana.ai/artifactory/api/gpg/key/public", "",
       "docs.habana.ai installation guides give the key's URL only (read 2026-11-29)"},
  };
  return table;
}

const SigningKey& signing_key(const std::string& name) {
  for (const auto& key : signing_keys())
    if (name == key.name) return key;
  throw std::out_of_range("no signing key '" + name + "' in ami/src/downloads.cpp");
}

std::string package_key(const std::string& component, const std::string& os) {
  const bool apt = os.rfind("ubuntu", 0) == 0;
  if (component == "fabric_manager" || component == "dcgm_exporter")
    return apt ? "nvidia-cuda-deb" : "nvidia-cuda-rpm";
  if (component == "neuron_sdk") return apt ? "neuron" : "neuron-rpm";
  if (component == "gaudi_software") return "habana";
  return "";
}

void check_downloads(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  parallelcluster::Release base;
  const bool official =
      spec.base_ami.empty() && parallelcluster::base_ami(spec.parallelcluster_version, spec.os, &base);
  for (const auto& [component, pinned] : spec.versions) {
    const std::string first = "versions." + component + " " + pinned;
    if (const std::string key = package_key(component, spec.os); !key.empty()) {
      const SigningKey& k = signing_key(key);
      if (*k.fingerprint == '\0')
        found->push_back(
            {first, "its package repository on " + spec.os,
             "no fingerprint of the " + std::string(k.name) +
                 " signing key is recorded, and pcdino installs nothing as root from a repository "
                 "whose key it cannot check (record the published fingerprint in "
                 "ami/src/downloads.cpp to allow it)",
             k.source});
      continue;
    }
    if (std::find(std::begin(kFetched), std::end(kFetched), component) == std::end(kFetched)) continue;
    std::string version = pinned, variant;
    if (component == "cuda") version = cuda_full_version(pinned);
    if (component == "cudnn") {
      const auto cuda = spec.versions.find("cuda");
      if (cuda == spec.versions.end()) continue;
      variant = "cuda" + cuda->second.substr(0, cuda->second.find('.'));
    }
    const auto field = shipped_field(component);
    if (official && field != nullptr && *(base.*field) != '\0' && version == base.*field) continue;
    if (pinned_download(component, version, variant) != nullptr) continue;
    std::string known;
    for (const auto& row : pinned_downloads())
      if (component == row.component && variant == row.variant)
        known += (known.empty() ? "" : ", ") + std::string(row.version);
    found->push_back({first, "its download",
                      "no pinned download with a recorded sha256 or commit" +
                          (variant.empty() ? "" : " for " + variant) + " (known: " + known + ")",
                      "ami/src/downloads.cpp"});
  }
}

}  // namespace pcdino::ami
