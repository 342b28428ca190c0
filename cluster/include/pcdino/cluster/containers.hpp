// Containers on ParallelCluster's official image (a site spec's `containers` section; issue #63): the head
// node's and the compute nodes' OnNodeConfigured parts that turn on Pyxis and set up Enroot, following
// ParallelCluster's tutorial "Running containerized jobs with Pyxis" (3.11.1 and later: Pyxis installed but
// off, its example configuration in /opt/parallelcluster/examples) and Pyxis's setup page (NVIDIA/pyxis wiki,
// Setup: the PMI hook, tmpfs and local storage for Enroot's paths).
#pragma once

#include <string>

#include "pcdino/cluster/site.hpp"

namespace pcdino::cluster {

/// Where ParallelCluster's images keep the examples (aws-parallelcluster-cookbook v3.11.1: the Pyxis line in
/// pyxis/pyxis.conf, the include line in spank/plugstack.conf, enroot/enroot.conf).
inline constexpr const char* kParallelClusterExamples = "/opt/parallelcluster/examples";
/// Pyxis's argument that makes a container live for the job, removed by Pyxis's job epilog (Pyxis 0.24.0's
/// config.c and pyxis_slurmd.c): a requeued start keeps its job and step ids, and a start ended by a node
/// failure leaves its container on the surviving nodes ("File already exists: pyxis_<job>.<step>", found by
/// train.node_failure_container).
inline constexpr const char* kPyxisContainerScope = "container_scope=job";

/// Where Enroot reads its configuration on a node (enroot's --sysconfdir on ParallelCluster's images).
inline constexpr const char* kEnrootConf = "/etc/enroot/enroot.conf";

/// Slurm's prolog for containers (head-node.sh links it into ParallelCluster's prolog.d as
/// 94_pcdino_enroot_folders; sbatch/local-cluster --pyxis into its own): as root before a job's first step on
/// a node, each ENROOT_RUNTIME_PATH, ENROOT_DATA_PATH and ENROOT_CACHE_PATH of `enroot_conf` that ends in
/// user-$(id -u) is made the job's user's (SLURM_JOB_UID), mode 0700, one ending in group-$(id -g) root's and
/// the job's group's, 2770; a folder of that name that is not so (another user's, a link) is moved aside with
/// a log line. Only in a folder that is root's and no one else's to write. Always exits 0.
std::string enroot_folders_prolog(const std::string& enroot_conf = kEnrootConf);

/// head-node.sh's containers part ("" without the section): Pyxis's example line, with container_scope=job
/// added where it names no scope, in /opt/slurm/etc/plugstack.conf.d/pyxis.conf (a pyxis.conf already there
/// is kept), /opt/slurm/etc/plugstack.conf's include line, Enroot for `enroot import` on the head node with
/// its own per-user defaults for runtime, data and cache (no prolog makes folders there), and
/// enroot_folders_prolog() in /opt/slurm/etc/pcdino/enroot-folders, linked into prolog.d. Uses the head's
/// SLURM_PREFIX, etc and put/put_text helpers.
std::string containers_head_node_section(const SiteSpec& site);

/// compute-node.sh ("" without the section): each queue's OnNodeConfigured action, its argument the queue's
/// local_scratch ("" for none). It writes /etc/enroot/enroot.conf from ParallelCluster's example with
/// ENROOT_DATA_PATH, ENROOT_CACHE_PATH and ENROOT_TEMP_PATH under SCRATCH/enroot where a scratch is given and
/// the cache per user (containers.cache), makes the folders above the per-user ones root's, 0755 (the prolog
/// makes each user's), ENROOT_TEMP_PATH 1777, enables Enroot's 50-slurm-pmi.sh hook and makes Pyxis's
/// runtime folder. Idempotent. PARALLELCLUSTER_EXAMPLES, ENROOT_SYSCONF_DIR,
/// ENROOT_SHARE_DIR and NODE_ROOT (a prefix of every folder it makes) in its environment move it off the
/// system's paths (the tests).
std::string compute_node_script(const SiteSpec& site);

/// Where commands.sh uploads compute-node.sh: containers.s3_prefix + "/compute-node.sh".
std::string compute_node_script_url(const SiteSpec& site);

}  // namespace pcdino::cluster
