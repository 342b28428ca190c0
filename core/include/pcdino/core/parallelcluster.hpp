// What each AWS ParallelCluster release installs on its official AMIs, and for which operating systems it
// publishes them: one row per release, each with its source (the cookbook at the release's tag, its
// CHANGELOG, or the release page). The image generator (ami/), its compatibility check and the cluster
// generator (cluster/) read these rows; nothing else names a release's components.
//
// An empty field is a fact pcdino could not find: it is shown as "unknown", never guessed, and a check that
// needs it refuses (or, where the image can bring its own, the image installs its pinned version).
#pragma once

#include <string>
#include <vector>

namespace pcdino::parallelcluster {

/// One release: what its official AMIs hold. Fabric Manager is installed at the driver's version (the
/// cookbook's fabric_manager resource: `fabric_manager_version` is the driver's), so it has no column.
struct Release {
  const char* release;        ///< "3.16.3"
  const char* slurm;          ///< built into /opt/slurm: "25.11.8"
  const char* nvidia_driver;  ///< "595.112.07"; "" = unknown
  const char* cuda;           ///< full version in /usr/local/cuda-<major.minor>: "12.4.1"; "" = unknown
  const char* efa_installer;  ///< "1.51.0"; "" = unknown
  const char* enroot;         ///< "" = unknown (or none installed, before 3.11.0)
  const char* pyxis;          ///< "" = unknown (or none installed)
  std::string source;         ///< where each column was read
};

/// Every release from 3.6.0 (Slurm only before 3.10.0), oldest first.
const std::vector<Release>& releases();

/// The row of `version` ("3.16.3"), or nullptr for a release the table does not hold.
const Release* find_release(const std::string& version);

/// The newest release in the table: what the examples and the defaults target.
const Release& newest_release();

/// What the official AMI of `version` on `os` holds: the release's row, with the exceptions one OS keeps
/// (Amazon Linux 2 kept driver 550.127.08 through 3.14.0 and CUDA 12.4.1 in 3.13; later, unknown). Returns
/// false for a release the table does not hold.
bool base_ami(const std::string& version, const std::string& os, Release* out);

/// An operating system of ParallelCluster's official AMIs (Image.Os) over releases.
struct OsSupport {
  const char* os;       ///< "ubuntu2204"
  const char* first;    ///< first release with official AMIs for it
  const char* removed;  ///< first release without them; "" = none known
  const char*
      known_through;  ///< newest release whose support was read in a source ("" = all through the table)
  /// First release whose official AMI has a Lustre client (FSx for Lustre mounts); "" = none known (the
  /// first AMIs had none and no later release was found to add one): such a node cannot mount FSx for Lustre.
  const char* lustre_from;
  const char* source;
  /// The OS vendor's end of support ("2026-06-30"; "" = none tabled): after it the OS gets no security
  /// updates, whatever ParallelCluster still publishes for it.
  const char* end_of_support = "";
  const char* end_of_support_source = "";  ///< where that date was read, and when
};

/// Every OS row.
const std::vector<OsSupport>& operating_systems();

/// The row of `os`, or nullptr.
const OsSupport* find_os(const std::string& os);

/// Why `version` has no official AMI for `os` ("" if it has one, or if no removal is known: see
/// os_support_note). Names the releases that do, with the source.
std::string os_support_problem(const std::string& version, const std::string& os);

/// A caveat ("" if none): `version` is newer than the newest release whose support of `os` was read in a
/// source, and no removal was found. `ami check` prints it as a note; it does not refuse.
std::string os_support_note(const std::string& version, const std::string& os);

/// Whether `os` is past its vendor's end of support on `today` ("YYYY-MM-DD", UTC): false for an OS with
/// no end-of-support date in the table.
bool past_end_of_support(const std::string& os, const std::string& today);

/// "" for an OS with no end-of-support date in the table; else what a check prints of it: "<os>'s vendor
/// support ended on DATE" (or "ends on DATE", as `today` is past it or not), with the source.
std::string end_of_support_note(const std::string& os, const std::string& today);

/// Today's date in UTC, "YYYY-MM-DD": what the two above are given by the programs.
std::string utc_date_today();

/// Why FSx for Lustre does not mount on the official AMI of `version` on `os` ("" if it does), with the
/// source: the OS's official AMI without a Lustre client (Ubuntu 24.04 from 3.13.0).
std::string lustre_problem(const std::string& version, const std::string& os);

/// The numeric components of dotted version `v` ("510.47.03" -> {510, 47, 3}): a non-digit ends a
/// component and every later one ("2.12.7-1" -> {2, 12, 7}); {} when it does not start with a digit. A
/// component too large for a long ends them too, before it ("2.99999999999999999999.1" -> {2}).
std::vector<long> version_numbers(const std::string& v);

/// -1, 0, 1 as dotted version `a` is older than, equal to or newer than `b` ("3.9.0" < "3.16.3"); missing
/// components count 0, and a non-digit ends the comparable part ("2.12.7-1" compares as 2.12.7).
int compare_versions(const std::string& a, const std::string& b);

}  // namespace pcdino::parallelcluster
