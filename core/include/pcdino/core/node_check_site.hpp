// What a cluster's nodes should show, as `pcdino node-check` reads it (issue #60): the shared filesystems
// (ParallelCluster's SharedStorage mount directories), local scratch, the image manifest and the probes' time
// limit, in one small YAML file beside slurm.conf. `pcdino cluster generate` writes it for a ParallelCluster
// site (the head node's OnNodeConfigured puts it in /opt/slurm/etc/pcdino), `sbatch/local-cluster` for its
// own; the program that Slurm runs as Prolog and HealthCheckProgram is node_check_wrapper().
#pragma once

#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino {

/// One shared filesystem, by ParallelCluster's SharedStorage names.
struct SharedStorage {
  std::string mount_dir;     ///< MountDir: "/fsx"
  std::string storage_type;  ///< StorageType: "FsxLustre", "Efs", "Ebs", ...; "" = any filesystem
};

/// The time the whole node check runs within, and whose limit that is (NodeCheckSite::limit).
struct CheckLimit {
  double seconds = 60;  ///< every probe runs within half of it, the rest is Slurm's view and actions
  /// What `pcdino node-check` prints after "within N s": whose limit it is.
  std::string source = "Slurm's fixed limit for a HealthCheckProgram through 25.11";
};

/// The node check's site file.
struct NodeCheckSite {
  std::vector<SharedStorage> shared_storage;           ///< each must be mounted, readable and writable
  std::vector<std::string> local_scratch;              ///< judged where they exist (queues differ)
  int min_scratch_gib = 1;                             ///< free space each needs (GiB, 2^30 bytes)
  std::string manifest = "/opt/pcdino/manifest.json";  ///< the image manifest ("" = not compared)
  int probe_seconds = 10;  ///< each probe's time limit; a hung filesystem ends its probe there (1..20)
  bool dcgm = true;        ///< `dcgmi diag -r 1` where dcgmi exists
  /// The node exporter's textfile collector, where the verdict goes as the doctor's metrics ("" = none).
  std::string textfile_dir = MonitoringConfig{}.textfile_dir;
  /// The drain guard (doctor::apply_drain_guard): a finding that this share (%) of the node's partitions'
  /// nodes are already drained for drains no more of them; 100 turns it off. Half by default: a fault of
  /// one node in two is the cluster's, and a partition keeps nodes to run on while it is found.
  int drain_guard_percent = 50;
  std::string source;  ///< the file it was read from ("" = defaults)
  /// Not a key of the file: the node check takes it from the Slurm it runs under
  /// (doctor::health_check_limit(): HealthCheckTimeout where Slurm has it, 26.05 on).
  CheckLimit limit;
};

/// The most ProbeSeconds may be: slurmd kills a HealthCheckProgram after 60 s (slurmd.c
/// run_script_health_check, through 25.11; HealthCheckTimeout's default from 26.05), and the check takes at
/// most 5 s + 3 x ProbeSeconds capped at half its limit (30 s), plus its Slurm actions.
inline constexpr int kMaxProbeSeconds = 20;

/// The keys of the site file, in the order write_node_check_site() writes them, with what each holds.
struct NodeCheckSiteKey {
  const char* key;
  const char* what;
};
const std::vector<NodeCheckSiteKey>& node_check_site_keys();

/// Reads the site file at `path`. Throws ConfigError "path:line:col: Key: ..." for an unknown key, a
/// MountDir that is not an absolute path, a StorageType not in storage_filesystems(), a number out of range.
NodeCheckSite read_node_check_site(const std::string& path);

/// The same from `text` (`source` names it in messages).
NodeCheckSite parse_node_check_site(const std::string& text, const std::string& source);

/// The site file's text for `site`, with a header comment naming `generator`; parse_node_check_site() reads
/// it back equal.
std::string write_node_check_site(const NodeCheckSite& site, const std::string& generator);

/// A StorageType and the filesystem types /proc/self/mountinfo shows for it.
struct StorageFilesystems {
  const char* storage_type;
  std::vector<std::string> filesystems;
};

/// ParallelCluster's StorageType values (cluster schema v3.11.1, SharedStorage) and how a node mounts each:
/// FSx for Lustre and File Cache with the Lustre client, EFS (efs-utils) and FSx for ONTAP/OpenZFS over NFS,
/// EBS formatted ext4 or xfs (aws-parallelcluster-cookbook v3.11.1, aws-parallelcluster-environment
/// resources lustre, efs, manage_ebs).
const std::vector<StorageFilesystems>& storage_filesystems();

/// Where the node check's wrapper finds things: Slurm's commands, its configuration, the pcdino program and
/// the site file.
struct NodeCheckPaths {
  std::string pcdino = "/opt/pcdino/bin/pcdino";
  std::string site = "/opt/slurm/etc/pcdino/node-check.yaml";
  std::string slurm_conf = "/opt/slurm/etc/slurm.conf";
  std::vector<std::string> path = {"/opt/slurm/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"};
  std::string json = "/var/log/pcdino/node-check.json";  ///< the last report ("%n": the node's name)
};

/// Where the pcdino image keeps node_check_wrapper() for ParallelCluster's paths (NodeCheckPaths' defaults):
/// `pcdino ami`'s install script writes it, head-node.sh links it into prolog.d, slurm.conf names it
/// HealthCheckProgram.
extern const char* const kImageNodeCheckWrapper;

/// The script Slurm runs as Prolog and HealthCheckProgram (neither takes arguments): slurmd starts both with
/// almost no environment (no PATH; the health check without SLURM_CONF: slurmd.c run_script_health_check,
/// prep_script_slurmd.c), so it sets them and execs `pcdino node-check --slurm --site SITE --json JSON`.
std::string node_check_wrapper(const NodeCheckPaths& paths);

}  // namespace pcdino
