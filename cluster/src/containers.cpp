#include "pcdino/cluster/containers.hpp"

#include <filesystem>

#include "pcdino/core/text_template.hpp"
#include "script_helpers.hpp"

namespace pcdino::cluster {

namespace {

// The variables and functions both scripts share. Enroot's configuration names its folders with a per-user
// or per-group last part that enroot makes itself ("/run/enroot/user-$(id -u)") when missing. On a cluster
// of many users that part must not be anyone's to make: Enroot takes a folder of that name as it is (enroot
// 4.1.2's `mkdir -p`), so a user who made another's first would own that user's containers. The folders above
// it are made root's, 0755, and the prolog (kEnrootFoldersProlog) makes each job's user's own, 0700; only
// ENROOT_TEMP_PATH is every user's, 1777 with the sticky bit as /tmp. A system folder like /run keeps its
// mode.
const char* const kContainersVars = R"SH(EXAMPLES=${PARALLELCLUSTER_EXAMPLES:-@EXAMPLES@}
ENROOT_SYSCONF_DIR=${ENROOT_SYSCONF_DIR:-/etc/enroot}
ENROOT_SHARE_DIR=${ENROOT_SHARE_DIR:-/usr/share/enroot}
NODE_ROOT=${NODE_ROOT:-}
CACHE_BY=@CACHE@
RUN_FOLDERS=""
# shared_folder PATH MODE: PATH (its part above the first component with a '$') made with MODE if missing;
# one under /run (a tmpfs) is also kept in RUN_FOLDERS for boot_folders. A 0755 folder that an earlier
# version left writable by everyone (1777) is made root's 0755 again.
shared_folder() {
  local dir=$1 mode=$2
  case "$dir" in /*) ;; *) return 0 ;; esac
  if [[ $dir == *'$'* ]]; then dir=${dir%/*\$*}; fi
  if [ -z "$dir" ] || [ "$dir" = / ]; then return 0; fi
  case "$dir" in /run/*) [[ $RUN_FOLDERS == *"d $dir "* ]] || RUN_FOLDERS+="d $dir $mode root root -"$'\n' ;; esac
  if [ ! -d "$NODE_ROOT$dir" ]; then
    make_dir "$NODE_ROOT$dir"
    chmod "$mode" "$NODE_ROOT$dir"
    echo "$PROG: made $NODE_ROOT$dir ($mode)"
  elif [ "$mode" = 0755 ] && [ -n "$(find "$NODE_ROOT$dir" -maxdepth 0 -perm -0002)" ]; then
    case "$dir" in /tmp | /var/tmp | /dev/shm | /run)
      fail "$dir holds each user's Enroot folder but every user can write it: another could make a user's first" ;;
    esac
    chown root:root "$NODE_ROOT$dir"
    chmod 0755 "$NODE_ROOT$dir"
    echo "$PROG: made $NODE_ROOT$dir root's, 0755 (it was writable by every user)"
  fi
}
# enroot_setup SCRATCH ROLE: enroot.conf from ParallelCluster's example; on a compute node (ROLE compute) the
# containers' data, cache and temporary files under SCRATCH/enroot when SCRATCH is given (the example keeps
# them on the root disk and in memory) and the cache per user unless CACHE_BY is group; on the head node
# (ROLE head) no runtime, data or cache path, so that Enroot's own per-user defaults hold there (users import
# images outside any job, where no prolog makes their folders): $XDG_RUNTIME_DIR/enroot, ~/.local/share/enroot,
# ~/.cache/enroot. The folders it names; Enroot's PMI hook, which `srun --mpi=pmix` in a container needs
# (Pyxis's setup page).
enroot_setup() {
  local scratch=$1 role=$2 tmp key value hook
  [ -f "$EXAMPLES/enroot/enroot.conf" ] ||
    fail "no $EXAMPLES/enroot/enroot.conf: this image has no Enroot example (ParallelCluster 3.11.1 and later)"
  tmp=$(mktemp)
  if [ "$role" = head ]; then
    grep -vE '^[[:space:]]*ENROOT_(RUNTIME|DATA|CACHE)_PATH([[:space:]]|$)' "$EXAMPLES/enroot/enroot.conf" >"$tmp" || true
    echo "# pcdino cluster generate: Enroot's per-user defaults for runtime, data and cache on the head node" >>"$tmp"
  elif [ -n "$scratch" ]; then
    [ -d "$NODE_ROOT$scratch" ] || fail "no local scratch at $NODE_ROOT$scratch (the queue's EphemeralVolume)"
    grep -vE '^[[:space:]]*ENROOT_(DATA|CACHE|TEMP)_PATH([[:space:]]|$)' "$EXAMPLES/enroot/enroot.conf" >"$tmp" || true
    {
      echo "# pcdino cluster generate: the containers' files on this node's local scratch"
      echo "ENROOT_DATA_PATH $scratch/enroot/data/user-\$(id -u)"
      echo "ENROOT_CACHE_PATH $scratch/enroot/cache/group-\$(id -g)"
      echo "ENROOT_TEMP_PATH $scratch/enroot/tmp"
    } >>"$tmp"
  else
    cp "$EXAMPLES/enroot/enroot.conf" "$tmp"
  fi
  if [ "$CACHE_BY" = user ]; then
    # shellcheck disable=SC2016  # $(id -u) is enroot.conf's, expanded by Enroot
    sed -i -E 's#^([[:space:]]*ENROOT_CACHE_PATH[[:space:]]+.*/)group-\$\(id -g\)[[:space:]]*$#\1user-$(id -u)#' "$tmp"
  fi
  make_dir "$ENROOT_SYSCONF_DIR/hooks.d"
  put "$tmp" "$ENROOT_SYSCONF_DIR/enroot.conf" 0644
  rm -f "$tmp"
  while read -r key value; do
    case "$key" in
      ENROOT_TEMP_PATH) shared_folder "$value" 1777 ;;
      ENROOT_*_PATH) shared_folder "$value" 0755 ;;
    esac
  done <"$ENROOT_SYSCONF_DIR/enroot.conf"
  hook=$ENROOT_SHARE_DIR/hooks.d/50-slurm-pmi.sh
  [ -f "$hook" ] || fail "no $hook: Enroot's PMI hook (srun --mpi=pmix in a container needs it)"
  put "$hook" "$ENROOT_SYSCONF_DIR/hooks.d/50-slurm-pmi.sh" 0755
}
# pyxis_runtime: the runtime_path of Pyxis's example line (Pyxis's default /run/pyxis), made 0755 as Pyxis's
# slurmd does: Pyxis makes each user's folder in it as root, and one that exists is taken as it is, so no user
# may make another's (a 1777 folder would let one).
pyxis_runtime() {
  local path
  [ -f "$EXAMPLES/pyxis/pyxis.conf" ] || fail "no $EXAMPLES/pyxis/pyxis.conf: this image has no Pyxis example"
  path=$(grep -oE 'runtime_path=[^[:space:]]+' "$EXAMPLES/pyxis/pyxis.conf" | head -n 1 | cut -d= -f2) || true
  shared_folder "${path:-/run/pyxis}" 0755
}
# boot_folders: systemd-tmpfiles makes the folders under /run again at each boot (tmpfiles.d(5)): /run is
# emptied by a reboot (`scontrol reboot`), and Enroot cannot make its per-user folder in a missing one.
boot_folders() {
  [ -n "$RUN_FOLDERS" ] || return 0
  make_dir "$NODE_ROOT/etc/tmpfiles.d"
  put_text "# Generated by pcdino cluster generate: Enroot's and Pyxis's folders in /run, made at each boot.
${RUN_FOLDERS%$'\n'}" "$NODE_ROOT/etc/tmpfiles.d/pcdino-containers.conf"
}
)SH";

// Slurm's prolog on every compute node (ParallelCluster's prolog.d), as root before a job's first step: the
// job's user's own Enroot folders, made before Pyxis runs enroot as that user. Each ENROOT_*_PATH of the
// node's enroot.conf that ends in user-$(id -u) becomes DIR/user-UID, the user's, 0700; one that ends in
// group-$(id -g) DIR/group-GID, root's and the group's, 2770. A folder of that name that is not so (another
// user's, a link, a file) is moved aside and logged, never used: it was made before the folders above became
// root's. It never fails the job or drains the node: a folder it cannot make fails that user's containers
// alone, with Enroot's own error.
const char* const kEnrootFoldersProlog = R"SH(#!/bin/bash
# Generated by pcdino: Slurm's prolog for containers (Pyxis and Enroot). As root before each job on this node,
# makes the job's user's own Enroot folders that @CONF@ names (user-UID: the user's, 0700;
# group-GID: root's and the group's, 2770), moving aside any of those names that someone else made.
CONF=@CONF@
log() {
  echo "pcdino enroot-folders: $*" >&2
  command -v logger >/dev/null && logger -t pcdino-enroot-folders -- "$*"
  return 0
}
uid=${SLURM_JOB_UID:-}
case "$uid" in '' | *[!0-9]*) log "no SLURM_JOB_UID: nothing made"; exit 0 ;; esac
[ "$uid" != 0 ] || exit 0
gid=${SLURM_JOB_GID:-$(id -g "$uid" 2>/dev/null)}
case "$gid" in '' | *[!0-9]*) log "no group of uid $uid: nothing made"; exit 0 ;; esac
[ -f "$CONF" ] || exit 0
# own DIR NAME OWNER GROUP MODE
own() {
  local dir=$1 path="$1/$2" owner=$3 group=$4 mode=$5 seen aside
  # The folder above must be root's and no one else's to write: then no user can make or swap the name.
  seen=$(stat -c '%u %a' -- "$dir" 2>/dev/null) || { log "no $dir: $path not made"; return 0; }
  case "$seen" in 0\ 755 | 0\ 750 | 0\ 700 | 0\ 711) ;; *)
    log "$dir is not root's 0755 (owner uid ${seen% *}, mode ${seen#* }): $path not made (another user could swap it)"
    return 0 ;;
  esac
  if [ -L "$path" ] || { [ -e "$path" ] && [ "$(stat -c '%u %g %F' -- "$path")" != "$owner $group directory" ]; }; then
    aside="$path.moved-aside.$(date +%s).$$"
    mv -T -- "$path" "$aside" || { log "cannot move aside $path"; return 0; }
    log "$path was not the user's (owner uid $(stat -c %u -- "$aside")): moved to $aside"
  fi
  if [ ! -d "$path" ]; then
    install -d -o "$owner" -g "$group" -m "$mode" -- "$path" || log "cannot make $path"
  fi
  return 0
}
while read -r key value; do
  case "$key" in ENROOT_RUNTIME_PATH | ENROOT_DATA_PATH | ENROOT_CACHE_PATH) ;; *) continue ;; esac
  case "$value" in
    /*/'user-$(id -u)') own "${value%/*}" "user-$uid" "$uid" "$gid" 0700 ;;
    /*/'group-$(id -g)') own "${value%/*}" "group-$gid" 0 "$gid" 2770 ;;
  esac
done <"$CONF"
exit 0
)SH";

// Pyxis's line: a pyxis.conf already in plugstack.conf.d (a site's own, or one written before) is kept.
const char* const kHeadSection = R"SH(
# Containers: Pyxis's example line with container_scope=job, the include line, Enroot as on the compute nodes.
[ -d "$etc" ] || fail "no $etc: not a ParallelCluster head node (or SLURM_PREFIX is wrong)"
[ -f "$EXAMPLES/pyxis/pyxis.conf" ] || fail "no $EXAMPLES/pyxis/pyxis.conf: this image has no Pyxis example"
make_dir "$etc/plugstack.conf.d"
if [ ! -e "$etc/plugstack.conf.d/pyxis.conf" ]; then
  pyxis=$(grep -E '^[[:space:]]*(required|optional)[[:space:]]+[^[:space:]]*spank_pyxis\.so' "$EXAMPLES/pyxis/pyxis.conf" |
    head -n 1) || true
  [ -n "$pyxis" ] || fail "no spank_pyxis.so line in $EXAMPLES/pyxis/pyxis.conf"
  case " $pyxis " in *" container_scope="*) ;; *) pyxis="$pyxis @SCOPE@" ;; esac
  put_text "$pyxis" "$etc/plugstack.conf.d/pyxis.conf"
elif ! grep -q '@SCOPE@' "$etc/plugstack.conf.d/pyxis.conf"; then
  echo "$PROG: warning: $etc/plugstack.conf.d/pyxis.conf (kept) has no @SCOPE@: a job requeued after a" \
    "node failure can meet its lost start's container"
fi
plugstack_include
enroot_setup "" head
pyxis_runtime
boot_folders
# The compute nodes' prolog that makes each job's user's Enroot folders (prolog.d, shared from here).
[ -d "$etc/scripts/prolog.d" ] || fail "no $etc/scripts/prolog.d: ParallelCluster 3.6 or later makes it"
make_dir "$etc/pcdino"
folders=$(mktemp)
cat >"$folders" <<'PROLOG'
@PROLOG@PROLOG
put "$folders" "$etc/pcdino/enroot-folders" 0755
rm -f "$folders"
if [ "$(readlink "$etc/scripts/prolog.d/94_pcdino_enroot_folders" 2>/dev/null)" != "$etc/pcdino/enroot-folders" ]; then
  remember "$etc/scripts/prolog.d/94_pcdino_enroot_folders"
  ln -sfn "$etc/pcdino/enroot-folders" "$etc/scripts/prolog.d/94_pcdino_enroot_folders"
  echo "$PROG: wrote $etc/scripts/prolog.d/94_pcdino_enroot_folders -> $etc/pcdino/enroot-folders"
fi
echo "$PROG: Pyxis on ($etc/plugstack.conf.d/pyxis.conf), Enroot set up ($ENROOT_SYSCONF_DIR/enroot.conf)"
)SH";

const char* const kComputeScript = R"SH(#!/usr/bin/env bash
# Generated by `pcdino cluster generate` from @SPEC@: the compute nodes' OnNodeConfigured action, for
# containers through Pyxis (slurm.container_image). Sets up Enroot as ParallelCluster's tutorial does (its
# example enroot.conf, the folders it names) with the containers' files on the queue's local scratch, the
# script's argument, where the queue has one; enables Enroot's PMI hook; makes Pyxis's runtime folder; has
# systemd-tmpfiles make the folders under /run again at each boot.
# head-node.sh turns Pyxis on for all nodes (/opt/slurm is the head node's). Idempotent.
#   compute-node.sh [LOCAL_SCRATCH]
set -euo pipefail
PROG=compute-node.sh
RECORD=""  # no record of what it changed: a compute node is replaced, not undone
SCRATCH=${1:-}
@HELPERS@@VARS@
enroot_setup "$SCRATCH" compute
pyxis_runtime
boot_folders
echo "$PROG: Enroot set up ($ENROOT_SYSCONF_DIR/enroot.conf${SCRATCH:+, containers on $SCRATCH})"
)SH";

std::string vars(const SiteSpec& site) {
  return fill_template(kContainersVars,
                       {{"EXAMPLES", kParallelClusterExamples}, {"CACHE", site.containers.cache}});
}

}  // namespace

std::string enroot_folders_prolog(const std::string& enroot_conf) {
  return fill_template(kEnrootFoldersProlog, {{"CONF", enroot_conf}});
}

std::string containers_head_node_section(const SiteSpec& site) {
  if (!site.containers.enabled) return "";
  return vars(site) + fill_template(kHeadSection, {{"SCOPE", kPyxisContainerScope},
                                                   {"PROLOG", enroot_folders_prolog(kEnrootConf)}});
}

std::string compute_node_script(const SiteSpec& site) {
  if (!site.containers.enabled) return "";
  return fill_template(kComputeScript, {{"SPEC", std::filesystem::path(site.source).filename().string()},
                                        {"HELPERS", kScriptHelpers},
                                        {"VARS", vars(site)}});
}

std::string compute_node_script_url(const SiteSpec& site) {
  return head_node_s3_prefix(site) + "/compute-node.sh";
}

}  // namespace pcdino::cluster
