# shellcheck shell=bash
# local-cluster's configuration files, sourced by sbatch/local-cluster: what `up` writes under DIR/etc before
# the daemons start (the node check's site file and wrapper, the prologs, slurm.conf, cgroup.conf,
# plugstack.conf, the munge and JWT keys) and the Slurm release each line depends on. It reads the options
# local-cluster parsed (DIR, PORT, NODES, ...) and calls its die, log and node_names.

# --- the node check ----------------------------------------------------------------------------------
# The pcdino program whose node check the nodes run ("" = none found): the first of LOCAL_CLUSTER_PCDINO,
# PCDINO_BIN (the tests'), PATH's, the build folder's that runs here (a build of another Debian does not).
pcdino_program() {
  local p
  for p in "${LOCAL_CLUSTER_PCDINO:-}" "${PCDINO_BIN:-}" "$(command -v pcdino 2>/dev/null || true)" \
    "${PCDINO_BUILD_DIR:-$SOURCE_DIR/build}/cli/pcdino" "$SOURCE_DIR/build/cli/pcdino"; do
    if [ -n "$p" ] && [ -x "$p" ] && "$p" --version >/dev/null 2>&1; then
      readlink -f "$p"
      return 0
    fi
  done
  return 0
}

# The slurm.conf lines of the prologs, as ParallelCluster runs them (a glob of prolog.d): with the node check,
# its wrapper as Prolog at allocation (DeferBatch: the batch script starts only once every node's prolog
# passed) and as HealthCheckProgram on idle nodes (drained ones included, so that it can return those pcdino
# drained); a failed prolog requeues the job unheld (nohold_on_prolog_fail in sched_conf).
# With Pyxis, the prolog that makes each job's user's Enroot folders (pcdino cluster enroot-prolog).
prolog_conf() {
  [ -n "$(ls -A "$DIR/etc/prolog.d" 2>/dev/null)" ] || { echo "# No prolog (--node-check off and no --pyxis)."; return 0; }
  echo "Prolog=$DIR/etc/prolog.d/*"
  [ -x "$DIR/etc/node-check" ] || { echo "# No node check (--node-check off, or no pcdino program found)."; return 0; }
  # A failed prolog requeues a --no-requeue job too only with ForceRequeueOnFail, which 22.05 does not know.
  local flags=Alloc,DeferBatch
  if slurm_at_least 23.02; then
    flags=$flags,ForceRequeueOnFail
  fi
  cat <<EOF
PrologFlags=$flags
HealthCheckProgram=$DIR/etc/node-check
HealthCheckInterval=$HEALTH_INTERVAL
HealthCheckNodeState=IDLE
EOF
  # Slurm 26.05's HealthCheckTimeout (core/slurm_features.hpp's health_check_timeout); earlier releases refuse
  # the key and kill the program after 60 s.
  if slurm_at_least 26.05; then
    echo "HealthCheckTimeout=$HEALTH_TIMEOUT"
  else
    echo "# No HealthCheckTimeout: Slurm $(slurm_release) kills a HealthCheckProgram after a fixed 60 s (26.05 and later)."
  fi
}

# The prolog that makes each job's user's Enroot folders (with --pyxis), from pcdino itself, for the
# enroot.conf of the --pyxis prefix; the folders above the users' are root's, 0755, on every node.
write_enroot_prolog() {
  rm -f "$DIR/etc/prolog.d/94_pcdino_enroot_folders"
  [ -n "$PYXIS" ] || return 0
  local pcdino
  pcdino=$(pcdino_program)
  [ -n "$pcdino" ] || die 69 "--pyxis needs a pcdino program that runs here (its enroot-folders prolog)"
  mkdir -p "$DIR/etc/prolog.d"
  "$pcdino" cluster enroot-prolog --enroot-conf "$PYXIS/etc/enroot/enroot.conf" >"$DIR/etc/enroot-folders.tmp.$$" ||
    die 69 "$pcdino cluster enroot-prolog failed"
  chmod 0755 "$DIR/etc/enroot-folders.tmp.$$"
  mv -f "$DIR/etc/enroot-folders.tmp.$$" "$DIR/etc/enroot-folders"
  ln -sfn "$DIR/etc/enroot-folders" "$DIR/etc/prolog.d/94_pcdino_enroot_folders"
}

# The node check's site file and the wrapper Slurm runs, from pcdino itself (`pcdino node-check --wrapper`):
# the same as on a ParallelCluster node, with this cluster's paths.
# yaml_quote TEXT: TEXT as a single-quoted YAML scalar.
yaml_quote() { printf "'%s'" "${1//\'/\'\'}"; }

write_node_check() {
  if [ "$NODE_CHECK" = off ]; then
    rm -f "$DIR/etc/node-check" "$DIR/etc/prolog.d/95_pcdino_node_check"
    return 0
  fi
  local pcdino
  pcdino=$(pcdino_program)
  if [ -z "$pcdino" ]; then
    if [ -x "$DIR/etc/node-check" ]; then
      log "no pcdino program that runs here: the node check written before stays"
    else
      log "no pcdino program that runs here (LOCAL_CLUSTER_PCDINO, PCDINO_BIN, PATH, the build folder's): no node check"
    fi
    return 0
  fi
  {
    echo "# pcdino node check: what every node of this cluster should show (pcdino node-check --help)."
    echo "# Written by sbatch/local-cluster."
    if [ -n "$SHARED" ] && [ "$(namespaces_work)" = yes ]; then
      echo "SharedStorage:"
      echo "  - MountDir: $(yaml_quote "$SHARED")"
    fi
    echo 'Manifest: ""'
    echo "ProbeSeconds: ${LOCAL_CLUSTER_PROBE_SECONDS:-10}"
    echo "TextfileDir: $(yaml_quote "$DIR/textfile")"
  } >"$DIR/etc/node-check.yaml.tmp.$$"
  mv -f "$DIR/etc/node-check.yaml.tmp.$$" "$DIR/etc/node-check.yaml"
  local args=(--site "$DIR/etc/node-check.yaml" --slurm-conf "$CONF" --pcdino "$pcdino"
    --json "$DIR/log/node-check-%n.json") d
  for d in "$DIR/node/bin" "$(dirname "$(command -v scontrol)")" /usr/sbin /usr/bin /sbin /bin; do
    args+=(--path "$d")
  done
  "$pcdino" node-check --wrapper "${args[@]}" >"$DIR/etc/node-check.tmp.$$" ||
    die 69 "$pcdino node-check --wrapper failed"
  chmod 0755 "$DIR/etc/node-check.tmp.$$"
  mv -f "$DIR/etc/node-check.tmp.$$" "$DIR/etc/node-check"
  mkdir -p "$DIR/etc/prolog.d"
  ln -sfn "$DIR/etc/node-check" "$DIR/etc/prolog.d/95_pcdino_node_check"
}

# slurm_release: the installed slurmd's version, e.g. 22.05.8 ("slurm 22.05.8" from slurmd -V).
slurm_release() { slurmd -V | awk '{print $2}'; }
# slurm_at_least MAJOR.MINOR: whether that slurmd is that release or newer (core/slurm_features.hpp holds the
# same releases for the programs).
slurm_at_least() { [ "$(printf '%s\n' "$1" "$(slurm_release)" | sort -V | head -n 1)" = "$1" ]; }

# slurmctld's own metrics (Slurm 25.11's MetricsType; older releases refuse the key): OpenMetrics text on
# slurmctld's port, GET /metrics/nodes, /metrics/jobs, /metrics/partitions, /metrics/scheduler (Slurm
# 25.11.7, src/slurmctld/http.c), which the head node's Prometheus scrapes on ParallelCluster
# (cluster/src/prometheus.cpp).
# The scheduler's parameters: backfill every 2 s instead of Slurm's 30 (a requeued job waits cred_expire, then
# up to bf_interval before it starts again: every requeue test waited on it; a backfill pass over a few nodes
# costs nothing); with the node check, a failed prolog requeues its job unheld (nohold_on_prolog_fail, as
# ParallelCluster's slurm.conf has it; 22.05's slurmctld reads it too).
sched_conf() {
  local params=bf_interval=2
  [ -x "$DIR/etc/node-check" ] && params+=,nohold_on_prolog_fail
  echo "SchedulerParameters=$params"
}

metrics_conf() {
  if slurm_at_least 25.11; then
    echo "MetricsType=metrics/openmetrics"
  else
    echo "# No MetricsType: Slurm $(slurm_release) has no metrics plugin (25.11 and later)."
  fi
  metrics_auth_conf
}

# Who may read those metrics (--metrics-auth-users; Slurm 26.05's MetricsAuthUsers, core/slurm_features.hpp's
# metrics_auth_users). 26.05's slurmctld authenticates an HTTP request only through the http_auth plugins that
# SlurmctldHttpAuthParameters loads (src/interfaces/http_auth.c: none without it, and then every request is
# refused, root's too); a JWT from `scontrol token` (AuthAltTypes=auth/jwt) is checked against the same HS256
# key, kept where Slurm keeps it by default, StateSaveLocation/jwt_hs256.key (Slurm's jwt.html).
jwt_key() { echo "$DIR/state/jwt_hs256.key"; }
metrics_auth_conf() {
  if [ -z "$METRICS_AUTH_USERS" ]; then
    if slurm_at_least 26.05; then echo "# No MetricsAuthUsers (--metrics-auth-users): the metrics endpoints answer anyone."; fi
    return 0
  fi
  cat <<EOF
MetricsAuthUsers=$METRICS_AUTH_USERS
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$(jwt_key)
SlurmctldHttpAuthParameters=jwt_key=$(jwt_key)
EOF
}

# new_key FILE BYTES: FILE made of BYTES random bytes, readable by its owner only, unless it exists: a key is
# made once and kept (munge's credentials and JWTs stay valid across restarts).
new_key() {
  [ ! -s "$1" ] || return 0
  (umask 077 && dd if=/dev/urandom of="$1.tmp" bs="$2" count=1 status=none)
  mv -f "$1.tmp" "$1"
}

# Expedited requeues (--expedited-requeue; Slurm 25.11: sbatch --requeue=expedite, allowed by
# SlurmctldParameters): a job's own requeue is eligible at once instead of after cred_expire; `pcdino submit`
# asks for them where `scontrol show config` lists the parameter. Off by default, as ParallelCluster has it.
requeue_conf() {
  if [ "$EXPEDITE" = on ]; then
    echo "SlurmctldParameters=enable_expedited_requeue"
  else
    echo "# No expedited requeues (--expedited-requeue off)."
  fi
}

write_config() {
  local host mem_mb cpus node i
  host=$(hostname -s)
  cpus=$(nproc)
  mem_mb=$(awk -v n="$NODES" '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 / n }' /proc/meminfo)
  mkdir -p "$DIR/tmp" "$DIR/spool"
  for node in $(node_names); do mkdir -p "$DIR/tmp/$node" "$DIR/spool/$node"; done

  write_node_check
  write_enroot_prolog
  local tmp="$CONF.tmp.$$"
  cat >"$tmp" <<EOF
# Generated by sbatch/local-cluster: a single-host cluster with $NODES slurmd daemons.
ClusterName=pcdino-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=$NODE_FAILURE
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$SHORT_LINK/spool/%n
SlurmctldPidFile=$DIR/spool/slurmctld.pid
SlurmdPidFile=$DIR/spool/%n/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# srun --mpi=pmix with several nodes on one host needs a per-node TmpFS.
TmpFS=$SHORT_LINK/tmp/%n
# No cgroups here: track processes through /proc and do no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The nodes share this host's cores and memory: trust the configuration, not the hardware probe.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
PlugStackConfig=$DIR/etc/plugstack.conf
MailProg=/bin/true
$(metrics_conf)
$(requeue_conf)
$(prolog_conf)
$(sched_conf)
InactiveLimit=0
KillWait=10
MinJobAge=600
Waittime=0
SlurmctldTimeout=120
SlurmdTimeout=$NODE_FAILURE
EOF
  i=1
  for node in $(node_names); do
    echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + i)) CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem_mb State=UNKNOWN" >>"$tmp"
    i=$((i + 1))
  done
  echo "PartitionName=local Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP" >>"$tmp"
  mv -f "$tmp" "$CONF"

  # From Slurm 24.05 on, slurmd starts a cgroup plugin whatever ProctrackType and TaskPlugin say, and stops
  # where it cannot (a container, a chroot: "Unable to initialize cgroup plugin"); CgroupPlugin=disabled is
  # 24.05's (cgroup.conf(5); 23.11 and 22.05 know no such value).
  rm -f "$DIR/etc/cgroup.conf"
  if slurm_at_least 24.05; then
    echo "CgroupPlugin=disabled" >"$DIR/etc/cgroup.conf.tmp.$$"
    mv -f "$DIR/etc/cgroup.conf.tmp.$$" "$DIR/etc/cgroup.conf"
  fi

  # SPANK plugins are added here (e.g. spank_pcdino.so); Slurm re-reads it at each job launch, so it is
  # replaced by rename, never edited in place.
  if [ ! -e "$DIR/etc/plugstack.conf" ]; then
    echo "# SPANK plugins for the local cluster (see spank/)." >"$DIR/etc/plugstack.conf.tmp.$$"
    mv -f "$DIR/etc/plugstack.conf.tmp.$$" "$DIR/etc/plugstack.conf"
  fi
  # Pyxis's line (--pyxis), its runtime folder in the state folder. container_scope=job: the job's epilog
  # removes every container of the job on the node, so that a start ended by a node failure (Pyxis's own
  # removal killed with the step) leaves nothing behind to block the requeued start, which has the same job
  # and step ids (global scope, Pyxis's default, names an unnamed container pyxis_JOB.STEP on every start).
  { grep -v 'spank_pyxis\.so' "$DIR/etc/plugstack.conf" || true
    [ -z "$PYXIS" ] || echo "required $PYXIS/lib/slurm/spank_pyxis.so runtime_path=$DIR/pyxis container_scope=job"
  } >"$DIR/etc/plugstack.conf.tmp.$$"
  mv -f "$DIR/etc/plugstack.conf.tmp.$$" "$DIR/etc/plugstack.conf"
  mkdir -p "$DIR/pyxis"

  new_key "$DIR/munge/munge.key" 1024
  chmod 0400 "$DIR/munge/munge.key"
  # The HS256 key of --metrics-auth-users: 32 random bytes (Slurm's jwt.html); Slurm refuses a key that
  # others can read (auth_jwt.c).
  [ -z "$METRICS_AUTH_USERS" ] || new_key "$(jwt_key)" 32
}

