// `pcdino node-check` (issue #60): this node's health as Slurm's Prolog and HealthCheckProgram can afford to
// check it, with no MPI and no other node: the shared filesystems mounted, readable and writable, local
// scratch, Slurm's view of the node, the NVIDIA GPUs (Xid errors, ECC, retired pages, row remapping, NVLink,
// DCGM level 1), EFA devices against the instance type, the SPANK plugin and the image manifest. Every probe
// runs under its own time limit (a hung FSx ends its probe with "did not finish within N s"), and every
// failed check is `drain` (no job may start here) or `warn` (logged and exported). The doctor's per-node
// checks are these probes (probe_this_node()): one home for each.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/node_check_site.hpp"
#include "pcdino/doctor/doctor.hpp"
#include "pcdino/doctor/probes.hpp"

namespace pcdino::doctor {

// --- the probes (the doctor's and the node check's) --------------------------------------------------------

/// The shared_fs check of `dir`: a file of `bytes` created, written, synced, read back and removed within
/// `seconds`; its write and read rates in MB/s set in `rates` ({write, read}) and judged against the floors
/// (0 = not judged). A read-only or full filesystem fails with the system's error and the path: a drain,
/// except shared_dir_failure()'s warnings.
Check check_shared_dir(const std::string& dir, std::size_t bytes, double min_write_mb_s, double min_read_mb_s,
                       double seconds, std::pair<double, double>* rates = nullptr);

/// The shared_fs check's failed verdict for a probe's `error` and its errno: a warning where the error is
/// the filesystem's own (filesystem_wide_error(): full, over quota, root squashed), which every node would
/// report alike; a drain otherwise.
Check shared_dir_failure(const std::string& error, int error_number);

/// Whether `storage.mount_dir` is a mount point of this node (in `mountinfo`, /proc/self/mountinfo's format)
/// of a filesystem its StorageType mounts as (storage_filesystems()): a missing mount leaves an empty
/// directory of the root disk that jobs would fill. Reads no file of the mount, so a hung one cannot stop it.
Check check_mount(const SharedStorage& storage, const std::string& mountinfo = "/proc/self/mountinfo");

/// The scratch check: free space of `dir` (for users: statvfs f_bavail) against `min_gib` (GiB).
Check check_scratch(const std::string& dir, double min_gib);

/// The slurm_view check: `scontrol show node -o NODE` (within `seconds`) against this host's CPUs, memory
/// and NVIDIA device files; Slurm's view of the node in `view` when it answered.
Check check_slurm_view(const std::string& node, double seconds, SlurmNodeView* view = nullptr);

/// The libfabric check: the providers fi_getinfo reports (within `seconds`) include `expected`.
Check check_providers(const std::vector<std::string>& expected, double seconds);

/// The efa check: the EFA devices libfabric shows (efa_devices(), within `seconds`) against `expected`, the
/// EFA interfaces of the node's instance type (the cluster catalogue); not judged (ok) when 0.
Check check_efa(int expected, double seconds);

/// The image check: the versions of this node against the manifest at `manifest` (compare_manifest(); the
/// GPU stack only on a node with NVIDIA device files); ok, said so, when there is no manifest there.
Check check_image(const std::string& manifest, double seconds);

/// The EFA interfaces a node of `instance_type` has when its Slurm features include "efa" (ParallelCluster's
/// feature of a compute resource with Efa/Enabled), from the cluster catalogue; 0 otherwise or unknown.
int expected_efa_devices(const std::string& instance_type, const std::vector<std::string>& features);

/// The NVIDIA GPUs a node should have: Slurm's gres (SlurmNodeView::gpus), else, on a node whose features
/// say "gpu" (ParallelCluster's), its instance type's in the cluster catalogue; 0 otherwise.
int expected_gpus(const SlurmNodeView& view);

// --- the node check ----------------------------------------------------------------------------------------

/// One probe of the node check: what it checks, and whether it runs on a node (facts gathered first).
struct NodeFacts {
  std::string node;                    ///< Slurm's node name
  std::optional<SlurmNodeView> slurm;  ///< Slurm's view of it (nullopt: scontrol did not answer)
  int nvidia_device_files = 0;         ///< /dev/nvidia<N>
  bool nvidia_smi = false;             ///< nvidia-smi is on PATH
  bool dcgmi = false;                  ///< dcgmi is on PATH
  std::string prober;                  ///< run_node_check()'s `prober` ("" = probe files on a thread)
};

/// A row of the node check's table: its checks' name, what it looks at, and its run (under the site's
/// probe_seconds; nullopt where it does not apply to the node).
struct NodeProbe {
  const char* name;
  const char* what;
  std::vector<Check> (*run)(const NodeCheckSite& site, const NodeFacts& facts);
  /// Its time limit in seconds from the site's probe_seconds (nullptr: probe_seconds itself).
  double (*limit)(const NodeCheckSite& site) = nullptr;
  /// What it means when it does not finish in time (a slow DCGM host engine is not the node's fault).
  Severity on_timeout = Severity::kDrain;
};

/// The NVIDIA rows of node_probes() (gpu_xid, gpus, nvlink, dcgm where site.dcgm) on a node that has NVIDIA
/// device files, nvidia-smi or GPUs in Slurm's gres; none elsewhere. The doctor's per-node check runs them
/// too.
std::vector<Check> nvidia_health_checks(const NodeCheckSite& site, const NodeFacts& facts);

/// This node's facts for the probes: Slurm's view when given, its NVIDIA device files, nvidia-smi and dcgmi
/// on PATH.
NodeFacts node_facts(const std::string& node, const std::optional<SlurmNodeView>& slurm);

/// The probes, in the order of the report. The GPU rows apply where the node has NVIDIA device files,
/// nvidia-smi, or GPUs in Slurm's gres.
const std::vector<NodeProbe>& node_probes();

/// The slurm_view probe's name and what it looks at: run_node_check() runs it first, apart from
/// node_probes(), since the others read its facts.
extern const NodeProbe kSlurmViewProbe;

/// Every probe of the report in its order (kSlurmViewProbe, then node_probes()): what `pcdino node-check
/// --list` prints, one "name<TAB>what" line each.
std::vector<const NodeProbe*> node_check_probes();

/// The seconds run_node_check() gives `probe`: its own limit (probe_seconds; dcgm's three times that)
/// within half of the check's (site.limit.seconds; the rest is for Slurm's view of the node and the
/// scontrol lines that act on the verdict), and at least 1 s.
double probe_limit(const NodeCheckSite& site, const NodeProbe& probe);

/// The limit slurmd gives a HealthCheckProgram on the Slurm that `scontrol show config` printed as
/// `show_config`: its HealthCheckTimeout where SLURM_VERSION has the key (core/slurm_features.hpp's
/// health_check_timeout: 26.05 on), else the fixed 60 s of earlier releases; CheckLimit's default where
/// the text names no Slurm (scontrol did not answer).
CheckLimit health_check_limit(const std::string& show_config);

/// One check with the seconds its probe took.
struct TimedCheck {
  Check check;
  std::string probe;  ///< the node_probes() row it came from
  double seconds = 0;
};

/// The node check's result.
struct NodeCheckReport {
  std::string node;
  std::vector<TimedCheck> checks;
  double seconds = 0;  ///< wall time of the whole check (the probes run side by side)
  CheckLimit limit;    ///< what it ran within (NodeCheckSite::limit)

  /// Some check failed with Severity::kDrain.
  bool drain() const;
  /// "ok", "warn" or "drain": the worst failed check's.
  std::string verdict() const;
  /// The line for Slurm's Reason field: "pcdino: " and the drain checks ("gpu_xid: gpu 0000:3b:00 Xid 79
  /// (...); shared_fs: ..."), at most 250 characters; "" when nothing drains the node.
  std::string reason() const;
};

/// Runs every probe of node_probes() that applies on this node, each on a thread of its own under its limit
/// (the slurm_view probe first, at most 5 s: the others read its facts), and waits for each until its limit:
/// a probe still running then is a failed check, "did not finish within N s", of its on_timeout severity.
/// `prober`: a pcdino program that writes and reads the shared filesystems' files in a process of its own
/// (`PROBER node-check --probe-filesystem DIR`), so that a process stuck in a hung mount is that one, not
/// this ("" = on a thread of this process). In all, at most 5 s + 3 x probe_seconds, each probe within
/// probe_limit() (half of site.limit: 30 s under Slurm's 60).
NodeCheckReport run_node_check(const NodeCheckSite& site, const std::string& node,
                               const std::string& prober = "");

/// What `pcdino node-check --probe-filesystem DIR` prints for probe_filesystem(DIR, bytes): one JSON object.
std::string filesystem_probe_json(const FilesystemProbe& probe);

/// The shared_fs check of `dir` through `prober` (see run_node_check()), within `seconds`.
Check check_shared_dir_in_child(const std::string& dir, std::size_t bytes, double seconds,
                                const std::string& prober);

/// A drain the drain guard held back: no node is drained for a finding that a share of its partitions'
/// nodes already carry, since a fault they all share (a filesystem, a switch, a bad image) is not the node's.
struct WithheldDrain {
  std::string check;       ///< the check's name ("shared_fs")
  int drained = 0;         ///< other nodes of the partitions drained by the node check for it
  int nodes = 0;           ///< nodes in this node's partitions, this one included
  std::string partitions;  ///< this node's partitions, comma-separated
};

/// The drain guard: for each drain finding of `report`, the nodes of this node's partitions (from `nodes`,
/// `scontrol show nodes -o`) that are drained with a node-check reason naming that check ("pcdino: CHECK:
/// ..."); where they are at least `share` of those nodes (NodeCheckSite::drain_guard_share), the finding
/// becomes a warning in `report`, its detail saying why. A node Slurm does not list, or in no partition, is
/// judged as before. Returns what it held back.
std::vector<WithheldDrain> apply_drain_guard(NodeCheckReport& report, const std::vector<SlurmNodeView>& nodes,
                                             double share);

/// The human report: a line naming the node and the limit it ran within, one line per check (NAME,
/// ok/WARN/DRAIN, seconds, detail), then the verdict.
std::string format_node_check(const NodeCheckReport& report);

/// node-check.json: {"node", "verdict", "reason", "seconds", "limit_seconds", "limit", "checks": [{"name",
/// "probe", "ok", "severity", "seconds", "detail"}]}.
std::string node_check_json(const NodeCheckReport& report);

/// What Slurm's side of the check does, from the report and Slurm's view of the node.
enum class SlurmContext {
  kProlog,       ///< slurmd's Prolog (SLURM_JOB_ID set): drain and fail, so that the job is requeued
  kHealthCheck,  ///< slurmd's HealthCheckProgram: drain, or return to service what pcdino drained
};

/// The scontrol command lines the node check runs for Slurm: on a drain finding `scontrol update
/// NodeName=N State=DRAIN Reason="pcdino: ..."` (unless the node is already drained with that reason, or
/// drained by someone else); in the health check on a clean report, `State=RESUME` for a node drained with a
/// reason the node check wrote ("pcdino: ..."), never for one an admin, Slurm or `pcdino doctor --drain`
/// ("pcdino doctor: ...", what the node check does not probe) drained.
std::vector<std::vector<std::string>> slurm_actions(const NodeCheckReport& report, const SlurmNodeView* view,
                                                    SlurmContext context);

}  // namespace pcdino::doctor
