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

/// head-node.sh's containers part ("" without the section): Pyxis's example line, with container_scope=job
/// added where it names no scope, in /opt/slurm/etc/plugstack.conf.d/pyxis.conf (a pyxis.conf already there
/// is kept), /opt/slurm/etc/plugstack.conf's include line, and Enroot set up as on the compute nodes (no
/// local scratch) for `enroot import` on the head node. Uses the head's SLURM_PREFIX, etc and put/put_text
/// helpers.
std::string containers_head_node_section(const SiteSpec& site);

/// compute-node.sh ("" without the section): each queue's OnNodeConfigured action, its argument the queue's
/// local_scratch ("" for none). It writes /etc/enroot/enroot.conf from ParallelCluster's example with
/// ENROOT_DATA_PATH, ENROOT_CACHE_PATH and ENROOT_TEMP_PATH under SCRATCH/enroot where a scratch is given,
/// makes the folders the configuration names (mode 1777, as the tutorial), enables Enroot's 50-slurm-pmi.sh
/// hook and makes Pyxis's runtime folder. Idempotent. PARALLELCLUSTER_EXAMPLES, ENROOT_SYSCONF_DIR,
/// ENROOT_SHARE_DIR and NODE_ROOT (a prefix of every folder it makes) in its environment move it off the
/// system's paths (the tests).
std::string compute_node_script(const SiteSpec& site);

/// Where commands.sh uploads compute-node.sh: containers.s3_prefix + "/compute-node.sh".
std::string compute_node_script_url(const SiteSpec& site);

}  // namespace pcdino::cluster
