#include "pcdino/core/parallelcluster.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>
#include <sstream>

namespace pcdino::parallelcluster {

namespace {

// Where the rows were read (checked 2026-11-27). Tags up to v3.11.1 were read in the repositories
// themselves; 3.12.0 in a maintainer's fork that carries the v3.12.0 tag (hanwen-cluster/aws-parallelcluster
// 35ae6817, its cookbook's release-3.12 head b53aec29 of the same minute); later releases from their
// release pages and the cookbook's CHANGELOG pull requests. A "from X" in a release's notes is the previous
// release's value.
const char* const kVersionsRb = "cookbooks/aws-parallelcluster-slurm/attributes/versions.rb:2";
}  // namespace

const std::vector<Release>& releases() {
  // Read at each release's tag in aws-parallelcluster-cookbook.
  const auto at_tag = [](const char* release) {
    return std::string("aws-parallelcluster-cookbook v") + release + " " + kVersionsRb;
  };
  static const std::vector<Release> table = [&] {
    std::vector<Release> t;
    for (const auto& [release, slurm] :
         std::vector<std::pair<const char*, const char*>>{{"3.6.0", "23.02.2"},
                                                          {"3.6.1", "23.02.2"},
                                                          {"3.7.0", "23.02.4"},
                                                          {"3.7.1", "23.02.5"},
                                                          {"3.7.2", "23.02.6"},
                                                          {"3.8.0", "23.02.7"},
                                                          {"3.9.0", "23.11.4"},
                                                          {"3.9.1", "23.11.4"},
                                                          {"3.9.2", "23.11.7"},
                                                          {"3.9.3", "23.11.7"}})
      t.push_back({release, slurm, "", "", "", "", "", at_tag(release)});
    // From 3.10.0 the components too, each file with the lines read.
    const std::string slurm = std::string(" ") + kVersionsRb + "; ";
    t.push_back(
        {"3.10.0", "23.11.7", "535.183.01", "12.2.2", "1.32.0", "", "",
         "aws-parallelcluster-cookbook v3.10.0" + slurm +
             "cookbooks/aws-parallelcluster-platform/attributes/platform.rb, recipes/install/cuda.rb:22-23, "
             "aws-parallelcluster-environment/attributes/environment.rb:72"});
    t.push_back(
        {"3.10.1", "23.11.7", "535.183.01", "12.2.2", "1.32.0", "", "",
         "aws-parallelcluster-cookbook v3.10.1" + slurm +
             "cookbooks/aws-parallelcluster-platform/attributes/platform.rb, recipes/install/cuda.rb:22-23, "
             "aws-parallelcluster-environment/attributes/environment.rb:72"});
    t.push_back(
        {"3.11.0", "23.11.10", "550.90.07", "12.4.1", "1.34.0", "3.4.1", "0.20.0",
         "aws-parallelcluster-cookbook v3.11.0" + slurm +
             "cookbooks/aws-parallelcluster-platform/attributes/platform.rb:13,14,18, "
             "recipes/install/cuda.rb:22-23, aws-parallelcluster-environment/attributes/environment.rb:73"});
    t.push_back(
        {"3.11.1", "23.11.10", "550.90.07", "12.4.1", "1.34.0", "3.4.1", "0.20.0",
         "aws-parallelcluster-cookbook v3.11.1" + slurm +
             "cookbooks/aws-parallelcluster-platform/attributes/platform.rb:13,19, "
             "recipes/install/cuda.rb:22-23, aws-parallelcluster-environment/attributes/environment.rb:73, "
             "cookbooks/aws-parallelcluster-slurm/attributes/slurm_attributes.rb:26"});
    const std::vector<Release> later = {
        {"3.12.0", "23.11.10", "550.127.08", "12.4.1", "1.36.0", "3.4.1", "0.20.0",
         "hanwen-cluster/aws-parallelcluster v3.12.0 (35ae6817) CHANGELOG.md 3.12.0; its cookbook's "
         "release-3.12 "
         "head b53aec29: versions.rb '23-11-10-1', platform.rb driver '550.127.08', cuda.rb 12.4 patch 1, "
         "environment.rb efa '1.36.0', enroot '3.4.1', pyxis '0.20.0'"},
        {"3.13.0", "24.05.7", "570.86.15", "12.8.0", "1.38.1", "3.4.1", "0.20.0",
         "aws-parallelcluster-cookbook CHANGELOG.md 3.13.0 (PRs #2887, #2909, #2952): 'Upgrade Slurm to "
         "version "
         "24.05.7', 'NVIDIA driver to version 570.86.15 ... for all OSs except AL2', 'CUDA Toolkit to "
         "version "
         "12.8.0', 'EFA installer to 1.38.1'; enroot and Pyxis: aws-samples/aws-eda-slurm-cluster "
         "source/cdk/config_schema.py ('confirmed')"},
        {"3.13.1", "24.05.8", "570.86.15", "12.8.0", "1.41.0", "3.4.1", "0.20.0",
         "aws-parallelcluster-cookbook CHANGELOG.md 3.13.1 (PRs #2934, #2953): 'Upgrade Slurm to version "
         "24.05.8', 'EFA installer to 1.41.0 (from 1.38.1)', no NVIDIA line; enroot and Pyxis: "
         "aws-eda-slurm-cluster config_schema.py"},
        {"3.13.2", "24.05.8", "570.86.15", "12.8.0", "1.41.0", "3.4.1", "0.20.0",
         "aws-parallelcluster-cookbook CHANGELOG.md 3.13.2 (PR #2976): 'There were no changes for this "
         "version'"},
        {"3.14.0", "24.11.6", "570.172.08", "12.8.1", "1.43.2", "", "",
         "aws-parallelcluster CHANGELOG.md 3.14.0 (PR #7010) and the cookbook's (PRs #3012, #3027): 'Upgrade "
         "Slurm to version 24.11.6', 'NVIDIA driver to version 570.172.08 ... except Amazon Linux 2', 'CUDA "
         "Toolkit to version 12.8.1', 'EFA installer to 1.43.2'"},
        {"3.14.1", "", "", "", "", "", "", "release notes not read (its components are unknown)"},
        {"3.14.2", "", "", "", "", "", "", "release notes not read (its components are unknown)"},
        {"3.15.0", "", "", "", "", "", "",
         "release notes not read; awslabs/awsome-distributed-ai PR #1211 gives '3.15.x' figures without "
         "saying "
         "which release brought them (see 3.15.1)"},
        {"3.15.1", "25.11.4", "580.126.20", "13.0.2", "1.47.0", "", "",
         "awslabs/awsome-distributed-ai PR #1211 ('3.15.x ... upgrades Slurm to 25.11.4, EFA installer to "
         "1.47.0, NVIDIA driver to 580.126.20, CUDA to 13.0.2'), the driver and CUDA confirmed by "
         "aws-parallelcluster CHANGELOG.md 3.16.0 (PR #7523) 'from 580.126.20', 'from 13.0.2'"},
        // The 3.16.0 CHANGELOG's CUDA 13.3.1 is not taken: CUDA 13.3 needs a driver >= 610.43.02 (NVIDIA's
        // table), not its 580.173.02, and a later cookbook change (PR #3249) pairs 595 with 13.2.2.
        {"3.16.0", "25.11.6", "580.173.02", "", "", "", "",
         "aws-parallelcluster CHANGELOG.md 3.16.0 (PR #7523): 'NVIDIA driver, Fabric Manager, and IMEX to "
         "version 580.173.02' (its 'CUDA Toolkit to version 13.3.1' contradicts that driver); release page "
         "v3.16.1: Slurm 'from 25.11.6'"},
        {"3.16.1", "25.11.8", "580.173.02", "", "", "", "",
         "release page v3.16.1: 'Upgrade Slurm to version 25.11.8 (from 25.11.6)', its only change"},
        {"3.16.2", "25.11.8", "595.71.05", "", "1.49.0", "", "",
         "release page v3.16.3: driver 'from 595.71.05', EFA installer 'from 1.49.0'; its CUDA (13.2.2 by "
         "aws-parallelcluster-cookbook PR #3249, or 13.3.1) was not read at the tag"},
        {"3.16.3", "25.11.8", "595.112.07", "", "1.51.0", "", "",
         "release page v3.16.3 (2026-11-17): 'NVIDIA driver, Fabric Manager, and IMEX to version "
         "595.112.07', "
         "'EFA installer to 1.51.0' (libfabric-aws 2.7.0-1, openmpi40-aws 4.1.8-1, openmpi50-aws 5.0.9-11); "
         "no "
         "Slurm line (25.11.8 since 3.16.1); its CUDA was not read at the tag"},
    };
    t.insert(t.end(), later.begin(), later.end());
    return t;
  }();
  return table;
}

const Release* find_release(const std::string& version) {
  for (const auto& row : releases())
    if (version == row.release) return &row;
  return nullptr;
}

const Release& newest_release() {
  return releases().back();
}

bool base_ami(const std::string& version, const std::string& os, Release* out) {
  const Release* row = find_release(version);
  if (row == nullptr) return false;
  *out = *row;
  // Amazon Linux 2 kept 3.12's driver and CUDA: cookbook CHANGELOG.md 3.13.0 'Upgrade NVIDIA driver to
  // version 570.86.15 (from 550.127.08) for all OSs except AL2', 'Upgrade CUDA Toolkit to version 12.8.0
  // (from 12.4.1) for all OSs except AL2'; 3.14.0 the same for 570.172.08 and 12.8.1 ('except Amazon Linux
  // 2'). After 3.14.0 nothing says: unknown.
  if (os == "alinux2" && compare_versions(version, "3.13.0") >= 0) {
    const bool stated = compare_versions(version, "3.14.0") <= 0;
    out->nvidia_driver = stated ? "550.127.08" : "";
    out->cuda = stated ? "12.4.1" : "";
  }
  return true;
}

const std::vector<OsSupport>& operating_systems() {
  static const std::vector<OsSupport> table = {
      {"alinux2", "3.0.0", "", "3.14.0", "3.0.0",
       "aws-parallelcluster cli/src/pcluster/constants.py SUPPORTED_OSES (v3.11.1, v3.12.0); CHANGELOG "
       "3.13.0 "
       "and 3.14.0 name its own driver; its support after 3.14.0 was not read",
       "2026-06-30",
       "AWS's Amazon Linux 2 FAQs (aws.amazon.com/amazon-linux-2/faqs/), end of support 2026-06-30; read "
       "2026-11-29 as quoted by phylax.com.au's AL2 end-of-support checklist"},
      {"alinux2023", "3.10.0", "", "3.14.0", "3.10.0",
       "aws-parallelcluster CHANGELOG.md 3.10.0 'Add support for Amazon Linux 2023'; cookbook CHANGELOG "
       "3.14.0 "
       "(P6e-GB200 'tested on Amazon Linux 2023, Ubuntu 22.04 and Ubuntu 24.04')"},
      {"ubuntu2004", "3.0.0", "3.14.0", "", "3.0.0",
       "aws-parallelcluster-cookbook CHANGELOG.md 3.14.0 'Ubuntu 20.04 is no longer supported' (PR #2929)"},
      {"ubuntu2204", "3.7.0", "", "3.14.0", "3.7.0",
       "aws-parallelcluster CHANGELOG.md 3.7.0 'Add support for Ubuntu 22'; cookbook CHANGELOG 3.14.0 "
       "(P6e-GB200 tested on it)"},
      {"ubuntu2404", "3.13.0", "", "3.14.0", "",
       "aws-parallelcluster-cookbook CHANGELOG.md 3.13.0 (PR #2902): 'Add support for Ubuntu 24.04. Notice "
       "that "
       "ParallelCluster official AMI for Ubuntu 24.04 does not support Lustre'; no later release was found "
       "to "
       "add a Lustre client"},
      {"rhel8", "3.6.0", "", "3.12.0", "3.6.0",
       "aws-parallelcluster CHANGELOG.md 3.6.0 'Add support for RHEL8.7'; constants.py SUPPORTED_OSES "
       "v3.12.0"},
      {"rhel9", "3.9.0", "", "3.12.0", "3.9.0",
       "aws-parallelcluster CHANGELOG.md 3.9.0 'Add support for RHEL9'; constants.py SUPPORTED_OSES v3.12.0"},
  };
  return table;
}

const OsSupport* find_os(const std::string& os) {
  for (const auto& row : operating_systems())
    if (os == row.os) return &row;
  return nullptr;
}

std::string os_support_problem(const std::string& version, const std::string& os) {
  const OsSupport* row = find_os(os);
  if (row == nullptr) return "ParallelCluster publishes no official AMI for '" + os + "' known to pcdino";
  const bool too_old = compare_versions(version, row->first) < 0;
  const bool removed = *row->removed != '\0' && compare_versions(version, row->removed) >= 0;
  if (!too_old && !removed) return "";
  return "official " + os + " AMIs exist from ParallelCluster " + row->first +
         (*row->removed ? std::string(" until ") + row->removed + " (removed there)" : std::string(" on")) +
         " (source: " + row->source + ")";
}

std::string os_support_note(const std::string& version, const std::string& os) {
  const OsSupport* row = find_os(os);
  if (row == nullptr || *row->known_through == '\0' || compare_versions(version, row->known_through) <= 0)
    return "";
  return os + "'s official AMIs were read in sources through ParallelCluster " + row->known_through +
         "; no removal was found up to " + version + ", but its support there is not confirmed";
}

bool past_end_of_support(const std::string& os, const std::string& today) {
  const OsSupport* row = find_os(os);
  // ISO dates compare as text.
  return row != nullptr && *row->end_of_support != '\0' && today > std::string(row->end_of_support);
}

std::string end_of_support_note(const std::string& os, const std::string& today) {
  const OsSupport* row = find_os(os);
  if (row == nullptr || *row->end_of_support == '\0') return "";
  return os + "'s vendor support " + (past_end_of_support(os, today) ? "ended" : "ends") + " on " +
         row->end_of_support + ": no security updates after it (source: " + row->end_of_support_source + ")";
}

std::string utc_date_today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char day[11];
  std::strftime(day, sizeof day, "%Y-%m-%d", &utc);
  return day;
}

std::string lustre_problem(const std::string& version, const std::string& os) {
  const OsSupport* row = find_os(os);
  if (row == nullptr) return "";
  if (*row->lustre_from != '\0' && compare_versions(version, row->lustre_from) >= 0) return "";
  return "ParallelCluster " + version + "'s official " + os +
         " AMI has no Lustre client known to pcdino, so FSx for Lustre does not mount on its nodes: use "
         "another OS (ubuntu2204, alinux2023) or a custom AMI with the Lustre client (source: " +
         row->source + ")";
}

std::vector<long> version_numbers(const std::string& v) {
  std::vector<long> out;
  std::stringstream in(v);
  std::string part;
  while (std::getline(in, part, '.')) {
    std::size_t i = 0;
    long n = 0;
    for (; i < part.size() && std::isdigit(static_cast<unsigned char>(part[i])); ++i) {
      const int digit = part[i] - '0';
      // A component past a long (19 digits) is no number: it ends the comparable part (the image-spec
      // fuzzer's nccl "2.1000...0002.7-1" overflowed here: undefined behaviour).
      if (n > (std::numeric_limits<long>::max() - digit) / 10) return out;
      n = n * 10 + digit;
    }
    if (i == 0) break;
    out.push_back(n);
    if (i < part.size()) break;  // "7-1" in "2.12.7-1": stop after 7
  }
  return out;
}

int compare_versions(const std::string& a, const std::string& b) {
  const auto x = version_numbers(a), y = version_numbers(b);
  for (std::size_t i = 0; i < std::max(x.size(), y.size()); ++i) {
    const long p = i < x.size() ? x[i] : 0, q = i < y.size() ? y[i] : 0;
    if (p != q) return p < q ? -1 : 1;
  }
  return 0;
}

}  // namespace pcdino::parallelcluster
