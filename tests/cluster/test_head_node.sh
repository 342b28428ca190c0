#!/usr/bin/env bash
# Integration (issue #20): the package and the head node's OnNodeConfigured action on the local cluster.
# CPack's tarball, unpacked into an empty prefix, runs `pcdino --version`; the generated head-node.sh
# (cluster/examples/p5-efa), run against a Slurm tree laid out as ParallelCluster 3.11.1's (/opt/slurm/etc
# under a test prefix, Pyxis's example configuration in /opt/parallelcluster/examples), makes Slurm load
# spank_pcdino.so from that package: after the daemons restart, `sbatch --accel-profile` works and a job
# sees the profile's variables; a second run rewrites nothing and Pyxis's line stays; a Pyxis line already
# there (3.11.0's) is kept, warned of for want of container_scope=job; verify.sh sees the plugin loaded, and
# fails when it is listed but not loadable; the node check's site file and its prolog.d link to the image's
# wrapper are there, written once; the containers section turns Pyxis on with container_scope=job and sets up
# Enroot on the head node, and compute-node.sh sets it up on a compute node, on its local scratch (issue #63);
# `head-node.sh --remove` leaves a ParallelCluster-shaped tree as it was before the script ran, on 3.11.1's
# and 3.11.0's shape, and gives the local cluster's own files back (issue #71).
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
[ -f "$PCDINO_BUILD_DIR/spank/spank_pcdino.so" ] || fatal "no spank_pcdino.so (libslurm-dev missing at configure time?)"
W="$PCDINO_BUILD_DIR/test-work/cluster_head_node"
rm -rf "$W" && mkdir -p "$W/jobs" "$W/prefix"
EX="$PCDINO_SOURCE_DIR/cluster/examples/p5-efa"
version=$(sed -n 's/^project(pcdino VERSION \([0-9.]*\).*/\1/p' "$PCDINO_SOURCE_DIR/CMakeLists.txt")

# 1. The package: CPack from this build (what scripts/package runs after building).
run bash -c "cd '$PCDINO_BUILD_DIR' && cpack -G TGZ -B '$W/pkg'"
assert_rc 0 "cpack makes the package"
os=$(sed -n 's/^PCDINO_PACKAGE_OS:STRING=//p' "$PCDINO_BUILD_DIR/CMakeCache.txt")
pkg="$W/pkg/pcdino-$version-$os-x86_64.tar.gz"
assert_eq "$(ls "$W"/pkg/*.tar.gz)" "$pkg" "named pcdino-<version>-<os>-x86_64.tar.gz"
tar -xzf "$pkg" -C "$W/prefix" --strip-components=1
run env -i PATH=/usr/bin:/bin "$W/prefix/bin/pcdino" --version
assert_rc 0 "pcdino --version runs from the unpacked package"
assert_contains "$OUT" "pcdino $version" "and reports the package's version"
txt=$(cat "$W/prefix/share/pcdino/package.txt")
assert_contains "$txt" "os=$os" "package.txt names the OS it was built on"
assert_contains "$txt" "needs=libyaml-cpp.so" "and the system libraries it needs"
[ -f "$W/prefix/lib/slurm/spank_pcdino.so" ] && [ -f "$W/prefix/share/pcdino/spank/accel-profiles.yaml" ]
assert_eq "$?" 0 "it holds the plugin and its profiles"

# 2. A ParallelCluster 3.11.1-shaped tree: the local cluster's folder is <prefix>/opt/slurm, Pyxis's example
# configuration is where the cookbook leaves it. No Pyxis here: its stand-in line is optional, not required.
SLURM_PREFIX="$W/opt/slurm"
EXAMPLES="$W/opt/parallelcluster/examples"
mkdir -p "$EXAMPLES/pyxis" "$EXAMPLES/enroot" "$W/share/enroot/hooks.d"
pyxis_line="optional /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis"
echo "$pyxis_line" >"$EXAMPLES/pyxis/pyxis.conf"
# Enroot's example (the containers section, issue #63): a stand-in with the folders ParallelCluster's tutorial
# makes (/run/enroot, /var/enroot), and Enroot's PMI hook where its package puts it.
cat >"$EXAMPLES/enroot/enroot.conf" <<'CONF'
ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)
ENROOT_CACHE_PATH /var/enroot/cache/group-$(id -g)
ENROOT_DATA_PATH /run/enroot/data/user-$(id -u)
ENROOT_MOUNT_HOME n
CONF
printf '#!/bin/bash\n# stand-in for 50-slurm-pmi.sh\n' >"$W/share/enroot/hooks.d/50-slurm-pmi.sh"
# enroot_env ROOT: the environment that keeps the scripts' Enroot part under ROOT (/etc/enroot, /run, /var).
enroot_env() { echo "ENROOT_SYSCONF_DIR=$1/etc/enroot ENROOT_SHARE_DIR=$W/share/enroot NODE_ROOT=$1"; }
cluster_up "$SLURM_PREFIX" "${TEST_CLUSTER_PORT:-18417}"
# The image's node-check wrapper, as its 85-pcdino.sh writes it (ami/examples/current), and ParallelCluster's
# prolog.d (3.6+).
mkdir -p "$W/prefix/libexec/pcdino" "$SLURM_PREFIX/etc/scripts/prolog.d"
"$W/prefix/bin/pcdino" node-check --wrapper --site /opt/slurm/etc/pcdino/node-check.yaml --pcdino "$W/prefix/bin/pcdino" \
  >"$W/prefix/libexec/pcdino/node-check" && chmod 0755 "$W/prefix/libexec/pcdino/node-check"
head_node() {
  # shellcheck disable=SC2046 # enroot_env: words
  run env SLURM_PREFIX="$SLURM_PREFIX" PCDINO_PREFIX="$W/prefix" PARALLELCLUSTER_EXAMPLES="$EXAMPLES" \
    PCDINO_STATE="$W/state" $(enroot_env "$W/head") bash "$EX/head-node.sh" "$@"
}
# What the local cluster had before (section 8 gives it back): its plugstack.conf and its node check's link.
local_plugstack=$(cat "$SLURM_PREFIX/etc/plugstack.conf")
local_node_check=$(readlink "$SLURM_PREFIX/etc/scripts/prolog.d/95_pcdino_node_check" || true)
head_node
assert_rc 0 "head-node.sh runs"
assert_contains "$OUT" "plugstack.conf loads spank_pcdino.so" "and says what it did"
assert_eq "$(readlink "$SLURM_PREFIX/etc/scripts/prolog.d/95_pcdino_node_check")" "$W/prefix/libexec/pcdino/node-check" \
  "the image's node-check wrapper is a prolog of prolog.d (issue #60)"
assert_contains "$(cat "$SLURM_PREFIX/etc/pcdino/node-check.yaml")" $'  - MountDir: /fsx\n    StorageType: FsxLustre' \
  "its site file names the cluster's FSx"
run "$LC" down
run "$LC" up
assert_rc 0 "the daemons restart"

report='echo var=$NCCL_SOCKET_IFNAME rank=$RANK world=$WORLD_SIZE'
for cmd in sbatch srun; do
  run "$cmd" --help
  assert_contains "$OUT" "--accel-profile=NAME" "$cmd --help lists --accel-profile: Slurm loads the plugin"
done
job=$(sbatch --parsable --accel-profile=nvidia-efa -N2 -n2 -o "$W/jobs/job_%j.out" -e "$W/jobs/job_%j.err" \
  --wrap "srun bash -c '$report'")
wait_job "$job"
assert_eq "$(sort "$W/jobs/job_$job.out")" $'var=^docker,lo,veth rank=0 world=2\nvar=^docker,lo,veth rank=1 world=2' \
  "sbatch --accel-profile=nvidia-efa: both tasks see the profile's variables"
# Slurm reads Pyxis's line too: optional here, so the missing library is only logged.
assert_contains "$(cat "$W/jobs/job_$job.err")" "spank: /usr/local/lib/slurm/spank_pyxis.so: Dlopen of plugin file failed" \
  "Slurm reads Pyxis's line through the include"
run sbatch --accel-profile=bogus --wrap true
assert_rc 255 "an unknown profile is refused at submission"
assert_eq "$(cat "$SLURM_PREFIX/etc/plugstack.conf.d/pyxis.conf")" "$pyxis_line container_scope=job" \
  "Pyxis turned on from the example, with container_scope=job (containers)"
head_conf=$(cat "$W/head/etc/enroot/enroot.conf")
assert_not_contains "$head_conf" "ENROOT_RUNTIME_PATH" "the head node keeps Enroot's per-user runtime default"
assert_not_contains "$head_conf" "ENROOT_DATA_PATH" "and its data default (~/.local/share/enroot)"
assert_not_contains "$head_conf" "ENROOT_CACHE_PATH" "and its cache default (~/.cache/enroot)"
assert_eq "$(stat -c %a "$W/head/run/pyxis")" 755 "Pyxis's runtime folder, 0755 as Pyxis makes it"
[ ! -e "$W/head/run/enroot" ] && [ ! -e "$W/head/var/enroot" ]
assert_eq "$?" 0 "no folder every user shares on the head node"
assert_eq "$(readlink "$SLURM_PREFIX/etc/scripts/prolog.d/94_pcdino_enroot_folders")" "$SLURM_PREFIX/etc/pcdino/enroot-folders" \
  "the compute nodes' prolog that makes each job's user's Enroot folders is in prolog.d"
assert_eq "$(stat -c '%a %U' "$SLURM_PREFIX/etc/pcdino/enroot-folders")" "755 root" "root's, executable"
assert_eq "$(cat "$SLURM_PREFIX/etc/pcdino/enroot-folders")" "$("$PCDINO_BIN" cluster enroot-prolog)" \
  "it is pcdino cluster enroot-prolog's, for /etc/enroot/enroot.conf"
[ -x "$W/head/etc/enroot/hooks.d/50-slurm-pmi.sh" ]
assert_eq "$?" 0 "Enroot's PMI hook enabled"

# 3. Idempotent: a second run rewrites nothing (same bytes, same modification times).
snapshot() {
  find "$SLURM_PREFIX/etc" "$SLURM_PREFIX/lib" "$W/head" -maxdepth 3 \( -name 'plugstack*' -o -name '*.yaml' \
    -o -name '*.so' -o -name '*.conf' -o -name '*.sh' \) -type f -printf '%p %T@ %m %u\n' | sort
  cat "$SLURM_PREFIX/etc/plugstack.conf" "$SLURM_PREFIX"/etc/plugstack.conf.d/*
}
before=$(snapshot)
head_node
assert_rc 0 "head-node.sh runs a second time"
assert_not_contains "$OUT" "wrote" "and writes nothing"
assert_not_contains "$OUT" "made" "and makes no folder"
assert_eq "$(snapshot)" "$before" "plugstack.conf, its includes, the plugin and profiles are unchanged"
assert_eq "$(grep -c 'plugstack.conf.d' "$SLURM_PREFIX/etc/plugstack.conf")" 1 "one include line"
# A run that dies between writing a file and renaming it (here: mv fails) leaves its copy out of Slurm's
# include glob (temporary files in plugstack.conf.d/ failed every job: aws-parallelcluster#6459).
echo "# changed" >>"$SLURM_PREFIX/etc/plugstack.conf.d/pcdino.conf"
mkdir -p "$W/failing-mv" && printf '#!/bin/sh\nexit 1\n' >"$W/failing-mv/mv" && chmod +x "$W/failing-mv/mv"
PATH="$W/failing-mv:$PATH" head_node
assert_rc 1 "head-node.sh stops when a rename fails"
assert_eq "$(cd "$SLURM_PREFIX/etc/plugstack.conf.d" && echo *)" "pcdino.conf pyxis.conf" \
  "its unrenamed copy is not among the files the include line reads"
run srun -N1 true
assert_rc 0 "srun works with the copy left there"
head_node
assert_contains "$OUT" "wrote $SLURM_PREFIX/etc/plugstack.conf.d/pcdino.conf" "the next run writes the file"
assert_eq "$(find "$SLURM_PREFIX" "$W/head" -name '*.pcdino-new')" "" "and leaves no copy"

# 4. verify.sh (ami/examples/current) on this node: the plugin is loaded and its libraries found; then the
# plugin is broken (listed, not loadable) and verify.sh says so and fails.
verify() {
  run env MANIFEST="$PCDINO_SOURCE_DIR/ami/examples/current/files/manifest.json" PCDINO_PREFIX="$W/prefix" \
    SLURM_PREFIX="$SLURM_PREFIX" bash "$PCDINO_SOURCE_DIR/ami/examples/current/verify.sh"
}
verify
assert_contains "$OUT" "ok      spank_pcdino loaded by srun (--accel-profile)" "verify.sh: loaded"
assert_contains "$OUT" "ok      pcdino libraries" "verify.sh: the package's libraries are found"
assert_contains "$OUT" "ok      pcdino $version" "verify.sh: the package's version"
echo "not a shared object" >"$SLURM_PREFIX/lib/slurm/spank_pcdino.so.new"
mv -f "$SLURM_PREFIX/lib/slurm/spank_pcdino.so.new" "$SLURM_PREFIX/lib/slurm/spank_pcdino.so"
verify
assert_rc 1 "verify.sh fails"
assert_contains "$OUT" "MISMATCH spank_pcdino: listed in $SLURM_PREFIX/etc/plugstack.conf.d/pcdino.conf but srun does not load it" \
  "naming where it is listed"
head_node
assert_contains "$OUT" "wrote $SLURM_PREFIX/lib/slurm/spank_pcdino.so" "head-node.sh repairs the plugin"
verify
assert_contains "$OUT" "ok      spank_pcdino loaded" "and it loads again"
cluster_down

# 5. ParallelCluster 3.11.0's shape: plugstack.conf with its include line and a Pyxis link already there.
T="$W/pc-3.11.0/opt/slurm"
mkdir -p "$T/etc/plugstack.conf.d" "$T/etc/scripts/prolog.d"
echo "include $T/etc/plugstack.conf.d/*" >"$T/etc/plugstack.conf"
echo "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis" >"$W/pc-3.11.0/pyxis.conf"
ln -s "$W/pc-3.11.0/pyxis.conf" "$T/etc/plugstack.conf.d/pyxis.conf"
# tree DIR: every path under DIR with its type, mode, owner and link target, and every file's checksum.
tree() { (cd "$1" && find . -printf '%p %y %m %u %l\n' | sort && find . -type f -exec md5sum {} + | sort -k 2); }
pc3110=$(tree "$W/pc-3.11.0")
pc3110() {
  # shellcheck disable=SC2046 # enroot_env: words
  run env SLURM_PREFIX="$T" PCDINO_PREFIX="$W/prefix" PARALLELCLUSTER_EXAMPLES="$EXAMPLES" \
    PCDINO_STATE="$W/pc-3.11.0/state" $(enroot_env "$W/pc-3.11.0") bash "$EX/head-node.sh" "$@"
}
pc3110
assert_rc 0 "head-node.sh on a 3.11.0-shaped tree"
assert_contains "$OUT" "pyxis.conf (kept) has no container_scope=job" "a kept Pyxis line without job scope is warned of"
assert_eq "$(cat "$T/etc/plugstack.conf")" "include $T/etc/plugstack.conf.d/*" "plugstack.conf untouched"
[ -L "$T/etc/plugstack.conf.d/pyxis.conf" ]
assert_eq "$?" 0 "Pyxis's link kept"
assert_contains "$(cat "$T/etc/plugstack.conf.d/pcdino.conf")" "spank_pcdino.so config=$T/etc/accel-profiles.yaml default=nvidia-efa" \
  "pcdino's line beside it"

# 6. No pcdino image on the head node: a clear failure, nothing written.
# shellcheck disable=SC2046 # enroot_env: words
run env SLURM_PREFIX="$W/none/opt/slurm" PCDINO_PREFIX="$W/none/opt/pcdino" PCDINO_STATE="$W/none/state" \
  $(enroot_env "$W/none") bash "$EX/head-node.sh"
assert_rc 1 "head-node.sh without the pcdino package fails"
assert_contains "$ERR" "no $W/none/opt/pcdino/lib/slurm/spank_pcdino.so: the head node must run the pcdino image" \
  "naming the missing file"

# 7. compute-node.sh (containers), as each queue's OnNodeConfigured runs it with the queue's local scratch:
# the example's configuration with the containers' data, cache and temporary files on the scratch, the folders
# made (root's 0755 above each user's folder, the temporary one 1777), the PMI hook; a second run changes nothing; no argument keeps the example; a scratch that is
# not there fails, naming it.
compute_node() {  # compute_node ROOT [SCRATCH]
  local root=$1
  shift
  # shellcheck disable=SC2046 # enroot_env: words
  run env PARALLELCLUSTER_EXAMPLES="$EXAMPLES" $(enroot_env "$root") bash "$EX/compute-node.sh" "$@"
}
C="$W/compute"
mkdir -p "$C/scratch"
compute_node "$C" /scratch
assert_rc 0 "compute-node.sh /scratch"
conf=$(cat "$C/etc/enroot/enroot.conf")
assert_contains "$conf" 'ENROOT_DATA_PATH /scratch/enroot/data/user-$(id -u)' "the containers' data on the scratch"
assert_contains "$conf" 'ENROOT_CACHE_PATH /scratch/enroot/cache/user-$(id -u)' "their cache too, each user's own"
assert_contains "$conf" 'ENROOT_TEMP_PATH /scratch/enroot/tmp' "and the temporary files of imports"
assert_contains "$conf" 'ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)' "the example's runtime path kept (tmpfs)"
assert_eq "$(grep -c '^ENROOT_DATA_PATH' <<<"$conf")" 1 "the example's data path replaced, not doubled"
assert_eq "$(stat -c %a "$C/scratch/enroot/data" "$C/scratch/enroot/cache" "$C/scratch/enroot/tmp" "$C/run/enroot" \
  "$C/run/pyxis" | tr '\n' ' ')" "755 755 1777 755 755 " \
  "the folders above each user's root's (0755: the prolog makes each user's), the temporary one 1777, Pyxis's 0755"
[ ! -e "$C/var/enroot" ]
assert_eq "$?" 0 "nothing of the example's cache on the root disk"
cmp -s "$C/etc/enroot/hooks.d/50-slurm-pmi.sh" "$W/share/enroot/hooks.d/50-slurm-pmi.sh"
assert_eq "$?" 0 "Enroot's PMI hook enabled"
# /run is emptied by a reboot: systemd-tmpfiles (the real one, in the node's root) makes its folders again.
assert_eq "$(grep -v '^#' "$C/etc/tmpfiles.d/pcdino-containers.conf")" \
  $'d /run/enroot 0755 root root -\nd /run/pyxis 0755 root root -' "tmpfiles.d names the folders under /run"
mv "$C/run" "$C/run.before-reboot"
run systemd-tmpfiles --create --root="$C" "$C/etc/tmpfiles.d/pcdino-containers.conf"
assert_rc 0 "systemd-tmpfiles reads it"
assert_eq "$(stat -c %a "$C/run/enroot" "$C/run/pyxis" | tr '\n' ' ')" "755 755 " "and makes them, as before the reboot"
rm -rf "$C/run" && mv "$C/run.before-reboot" "$C/run"
before=$(find "$C" -printf '%p %T@ %m\n' | sort)
compute_node "$C" /scratch
assert_rc 0 "compute-node.sh a second time"
assert_eq "$(find "$C" -printf '%p %T@ %m\n' | sort)" "$before" "changes nothing"
compute_node "$W/compute-noscratch"
assert_rc 0 "compute-node.sh without a local scratch"
assert_eq "$(cat "$W/compute-noscratch/etc/enroot/enroot.conf")" \
  "$(sed 's#^ENROOT_CACHE_PATH /var/enroot/cache/group-$(id -g)$#ENROOT_CACHE_PATH /var/enroot/cache/user-$(id -u)#' "$EXAMPLES/enroot/enroot.conf")" \
  "the example with each user's own cache"
# A node set up by an earlier version, its folders every user's (1777): made root's 0755 again.
chmod 1777 "$C/scratch/enroot/data" "$C/run/enroot"
compute_node "$C" /scratch
assert_rc 0 "compute-node.sh on a node whose folders were 1777"
assert_contains "$OUT" "made $C/scratch/enroot/data root's, 0755 (it was writable by every user)" "says so"
assert_eq "$(stat -c %a "$C/scratch/enroot/data" "$C/run/enroot" | tr '\n' ' ')" "755 755 " "and tightens them"
compute_node "$W/compute-missing" /scratch
assert_rc 1 "a scratch that is not mounted fails"
assert_contains "$ERR" "no local scratch at $W/compute-missing/scratch" "naming it"

# 8. --remove (issue #71). A fresh 3.11.1-shaped head node (Enroot's package left its own enroot.conf): after
# head-node.sh and --remove, every path, mode, owner, link and content is as before, the record gone.
R="$W/pc-3.11.1"
mkdir -p "$R/opt/slurm/etc/scripts/prolog.d" "$R/opt/slurm/lib" "$R/head/etc/enroot"
echo "ClusterName=pc" >"$R/opt/slurm/etc/slurm.conf"
printf '#!/bin/bash\n' >"$R/opt/slurm/etc/scripts/prolog.d/90_pcluster_health_check_manager"
echo "# Enroot's own" >"$R/head/etc/enroot/enroot.conf"
pristine=$(tree "$R")
pc3111() {
  # shellcheck disable=SC2046 # enroot_env: words
  run env SLURM_PREFIX="$R/opt/slurm" PCDINO_PREFIX="$W/prefix" PARALLELCLUSTER_EXAMPLES="$EXAMPLES" \
    PCDINO_STATE="$R/state" $(enroot_env "$R/head") bash "$EX/head-node.sh" "$@"
}
pc3111
assert_rc 0 "head-node.sh on a fresh 3.11.1-shaped tree"
assert_contains "$(cat "$R/state/record")" "saved $R/head/etc/enroot/enroot.conf" "a copy of Enroot's own enroot.conf is kept"
pc3111
assert_not_contains "$OUT" "wrote" "a second run changes nothing"
pc3111 --remove
assert_rc 0 "head-node.sh --remove"
assert_contains "$OUT" "restored $R/head/etc/enroot/enroot.conf" "puts Enroot's own file back"
assert_contains "$OUT" "removed $R/opt/slurm/etc/plugstack.conf.d/pcdino.conf" "removes pcdino's plugin line"
assert_contains "$OUT" "pcluster update-cluster" "and says what only an update of the cluster changes"
assert_eq "$(tree "$R")" "$pristine" "the tree is as it was before head-node.sh"
pc3111 --remove
assert_contains "$OUT" "nothing to remove" "a second --remove finds nothing to do"
pc3111 --bogus
assert_rc 64 "an unknown argument is a usage error"
# The 3.11.0 tree of section 5: ParallelCluster's plugstack.conf and Pyxis link stay; pcdino's lines go.
pc3110 --remove
assert_rc 0 "--remove on the 3.11.0-shaped tree"
assert_eq "$(tree "$W/pc-3.11.0")" "$pc3110" "ParallelCluster's plugstack.conf and Pyxis link as they were, pcdino's files gone"
# The local cluster's tree: its plugstack.conf and node check link are its own again, pcdino's files gone.
head_node --remove
assert_rc 0 "--remove on the local cluster's tree"
assert_eq "$(cat "$SLURM_PREFIX/etc/plugstack.conf")" "$local_plugstack" "plugstack.conf as the local cluster wrote it"
assert_eq "$(readlink "$SLURM_PREFIX/etc/scripts/prolog.d/95_pcdino_node_check" || true)" "$local_node_check" \
  "the node check's prolog link as it was"
[ ! -e "$SLURM_PREFIX/etc/plugstack.conf.d/pcdino.conf" ] && [ ! -e "$SLURM_PREFIX/etc/pcdino" ] &&
  [ ! -e "$SLURM_PREFIX/etc/scripts/prolog.d/94_pcdino_enroot_folders" ] && [ ! -e "$W/state" ]
assert_eq "$?" 0 "pcdino's plugin line, site files, prolog link and the record are gone"
finish
