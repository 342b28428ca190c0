# pcdino submit --dry-run: run 'workshop' in /fsx/output/workshop

# ---- /fsx/output/workshop/logs/meanstd.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage meanstd: per-channel mean and std of the dataset.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash 10c22c6f2c1b6f0d.
#SBATCH --job-name=workshop-meanstd
#SBATCH --output=/fsx/output/workshop/logs/meanstd_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/meanstd_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --no-requeue

set -uo pipefail
rm -f /fsx/output/workshop/logs/meanstd.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage meanstd, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino meanstd --config /fsx/output/workshop/logs/submitted_pipeline.yaml --threads 8
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage meanstd failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "meanstd", "config_hash": "10c22c6f2c1b6f0d", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/meanstd.complete.tmp && mv -f /fsx/output/workshop/logs/meanstd.complete.tmp /fsx/output/workshop/logs/meanstd.complete

# ---- /fsx/output/workshop/logs/train.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage train: DINO pretraining of the ViT.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash c2978a7d1bb957d8.
#SBATCH --job-name=workshop-train
#SBATCH --output=/fsx/output/workshop/logs/train_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/train_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --time=2-00:00:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --signal=USR1@120

set -uo pipefail
rm -f /fsx/output/workshop/logs/train.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage train, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2
restarts=/fsx/output/workshop/logs/train_restarts.jsonl  # why this script requeued its job
err_file=/fsx/output/workshop/logs/train_err_%j.err
err_file=${err_file//%j/$SLURM_JOB_ID}
restart=${SLURM_RESTART_COUNT:-0}
agreed=$(grep -F "\"job_id\": \"${SLURM_JOB_ID}\"," "$restarts" 2>/dev/null | grep -c '"fault": false')
ran=$(grep -c "^pcdino: stage train, job ${SLURM_JOB_ID} (start " "$err_file" 2>/dev/null)
if [ "${ran:-0}" -gt 0 ]; then faults=$((ran - 1 - agreed)); else faults=$((restart - agreed)); fi
if [ "$faults" -gt 3 ]; then
  echo "error: pcdino: stage train failed for good: started again after $faults fault(s), more than slurm.max_restarts (3); \`pcdino status\` lists each restart and why" >&2
  exit 79
fi

# The accelerator environment: spank_pcdino.so sets it in every task when the cluster loads it;
# otherwise these exports, which srun hands on to the tasks.
plugstack=$(scontrol show config 2>/dev/null | sed -n 's/^PlugStackConfig *= *//p')
if grep -qs spank_pcdino "${plugstack:-/etc/slurm/plugstack.conf}" "${plugstack:-/etc/slurm/plugstack.conf}.d"/*; then
  echo "pcdino: accelerator environment from spank_pcdino.so" >&2
else
  export NCCL_DEBUG=WARN
  export NCCL_SOCKET_IFNAME='^docker,lo,veth'
fi

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino train --config /fsx/output/workshop/logs/submitted_pipeline.yaml --threads 8
rc=$?
# The trainer checkpointed on SIGUSR1 (time limit) or SIGTERM (preemption): back into the queue. A
# fault (a rank lost or silent) within the budget: back too. Either start resumes from checkpoint.pth.
why="" fault=false
case "$rc" in
  75) why='checkpointed on SIGUSR1 or SIGTERM (time limit, preemption or scontrol requeue)' fault=false ;;
  74) why='a rank heard nothing from its peers for --comm-timeout (a node hung or lost)' fault=true ;;
  14) why='Open MPI ended a rank when the runtime reported a peer lost (a node lost or its process killed)' fault=true ;;
  17) why='Open MPI 4 ended a rank that lost the connection to a peer (a node lost or its process killed)' fault=true ;;
  129|1[3-9][0-9]|2[0-5][0-9]) why='a task ended by a signal (its node lost, the OOM killer or a kill)' fault=true ;;
esac
# The node whose task failed first, unless it only lost a peer (74, 14, 17): kept out of the next start. Only
# the lines before the step was cancelled count: once it is, every task left is killed, and a node lost whole
# (its slurmd gone) has no line of its own, so the first "Killed" names a healthy node.
bad=""
if [ "$fault" = true ]; then
  bad=$(awk -v start="(start $((restart + 1)))" 'index($0, start) { n = NR } { line[NR] = $0 }
    END { for (i = n + 1; i <= NR && line[i] !~ /\*\*\* STEP .* CANCELLED/; i++) print line[i] }' "$err_file" 2>/dev/null |
    sed -n -e 's/^srun: error: \([^: ]*\): tasks\{0,1\} [0-9,-]*: \(.*\)$/\1 \2/p' \
      -e 's/.*process rank [0-9]* with PID [0-9]* on node \([^ ]*\) \(exited.*\)$/\1 \2/p' |
    head -n 1 | grep -v -e 'exit code 74$' -e 'exit code 14$' -e 'exit code 17$' -e 'exit status 74' \
      -e 'exit status 14' -e 'exit status 17' |
    cut -d ' ' -f 1)
  if [ -n "$bad" ]; then
    excluded=$(scontrol show job -o "$SLURM_JOB_ID" | sed -n 's/.* ExcNodeList=\([^ ]*\).*/\1/p')
    [ "$excluded" != "(null)" ] || excluded=""
    # The partition's nodes in service (not drained, down, failing or not responding: sinfo's %t ends in *)
    # that the next start may have.
    usable=$(comm -23 <(sinfo -h -N -p "${SLURM_JOB_PARTITION:-}" -t idle,mixed,allocated,completing -o '%N %t' 2>/dev/null |
      awk '$2 !~ /\*$/ { print $1 }' | sort -u) \
      <(scontrol show hostnames "${excluded:+$excluded,}$bad" 2>/dev/null | sort -u) | wc -l)
    if [ "$usable" -lt "${SLURM_JOB_NUM_NODES:-1}" ]; then
      echo "pcdino: $bad failed this start, but without it the partition has $usable node(s) in service for ${SLURM_JOB_NUM_NODES:-1}: not left out" >&2
      bad=""
    fi
  fi
fi
if [ -n "$why" ] && { [ "$fault" = false ] || [ "$faults" -lt 3 ]; }; then
  printf '{"job_id": "%s", "start": %d, "time": "%s", "nodes": "%s", "exit_code": %d, "fault": %s, "excluded": "%s", "why": "%s"}\n' \
    "${SLURM_JOB_ID}" "$((restart + 1))" "$(date -Is)" "${SLURM_JOB_NODELIST}" "$rc" "$fault" "$bad" "$why" >>"$restarts"
  if [ -n "$bad" ]; then
    echo "pcdino: exit $rc ($why); requeueing job ${SLURM_JOB_ID} without $bad, where it failed" >&2
    # The requeue's SIGTERM would end this script: KillWait (slurm.conf) is its time to finish.
    trap '' TERM
    if scontrol requeuehold "${SLURM_JOB_ID}"; then
      scontrol update JobId="${SLURM_JOB_ID}" ExcNodeList="${excluded:+$excluded,}$bad" ||
        echo "pcdino: could not keep $bad out of the next start" >&2
      for _ in 1 2 3 4 5; do scontrol release "${SLURM_JOB_ID}" && break; sleep 1; done
    else
      scontrol requeue "${SLURM_JOB_ID}"
    fi
  else
    echo "pcdino: exit $rc ($why); requeueing job ${SLURM_JOB_ID}" >&2
    scontrol requeue "${SLURM_JOB_ID}"
  fi
  exit "$rc"
fi
if [ -n "$why" ]; then
  echo "error: pcdino: exit $rc ($why); not requeued: the job already started again after $faults fault(s), slurm.max_restarts is 3" >&2
  # The restarts this script asked for, and why (a requeue Slurm made itself has no line).
  sed -n "s/^{\"job_id\": \"${SLURM_JOB_ID}\", \"start\": \([0-9]*\),.*\"exit_code\": \([0-9]*\),.*\"why\": \"\(.*\)\"}$/pcdino:   after start \1: exit \2, \3/p" "$restarts" >&2
fi
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage train failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "train", "config_hash": "c2978a7d1bb957d8", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/train.complete.tmp && mv -f /fsx/output/workshop/logs/train.complete.tmp /fsx/output/workshop/logs/train.complete

# ---- /fsx/output/workshop/logs/extract.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage extract: CLS features of the held-out images.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash a1eafa11b77ba1cb.
#SBATCH --job-name=workshop-extract
#SBATCH --output=/fsx/output/workshop/logs/extract_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/extract_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --exclusive
#SBATCH --no-requeue

set -uo pipefail
rm -f /fsx/output/workshop/logs/extract.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage extract, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2

# The accelerator environment: spank_pcdino.so sets it in every task when the cluster loads it;
# otherwise these exports, which srun hands on to the tasks.
plugstack=$(scontrol show config 2>/dev/null | sed -n 's/^PlugStackConfig *= *//p')
if grep -qs spank_pcdino "${plugstack:-/etc/slurm/plugstack.conf}" "${plugstack:-/etc/slurm/plugstack.conf}.d"/*; then
  echo "pcdino: accelerator environment from spank_pcdino.so" >&2
else
  export NCCL_DEBUG=WARN
  export NCCL_SOCKET_IFNAME='^docker,lo,veth'
fi

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino extract --config /fsx/output/workshop/logs/submitted_pipeline.yaml --threads 8
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage extract failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "extract", "config_hash": "a1eafa11b77ba1cb", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/extract.complete.tmp && mv -f /fsx/output/workshop/logs/extract.complete.tmp /fsx/output/workshop/logs/extract.complete

# ---- /fsx/output/workshop/logs/labels.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage labels: class labels of the held-out images.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash cd1602b7e0ed905c.
#SBATCH --job-name=workshop-labels
#SBATCH --output=/fsx/output/workshop/logs/labels_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/labels_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --time=00:30:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --no-requeue

set -uo pipefail
rm -f /fsx/output/workshop/logs/labels.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage labels, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino labels --config /fsx/output/workshop/logs/submitted_pipeline.yaml
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage labels failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "labels", "config_hash": "cd1602b7e0ed905c", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/labels.complete.tmp && mv -f /fsx/output/workshop/logs/labels.complete.tmp /fsx/output/workshop/logs/labels.complete

# ---- /fsx/output/workshop/logs/knn.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage knn: weighted kNN evaluation of the CLS features.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash 470ac4949cf6b9b8.
#SBATCH --job-name=workshop-knn
#SBATCH --output=/fsx/output/workshop/logs/knn_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/knn_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --no-requeue

set -uo pipefail
rm -f /fsx/output/workshop/logs/knn.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage knn, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino knn --config /fsx/output/workshop/logs/submitted_pipeline.yaml --threads 8
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage knn failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "knn", "config_hash": "470ac4949cf6b9b8", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/knn.complete.tmp && mv -f /fsx/output/workshop/logs/knn.complete.tmp /fsx/output/workshop/logs/knn.complete

# ---- /fsx/output/workshop/logs/plots.sbatch ----
#!/bin/bash
# pcdino pipeline 'workshop', stage plots: UMAP, training curves, kNN plots and index.html.
# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash 4fbcfdd34b0bdc27.
#SBATCH --job-name=workshop-plots
#SBATCH --output=/fsx/output/workshop/logs/plots_out_%j.out
#SBATCH --error=/fsx/output/workshop/logs/plots_err_%j.err
#SBATCH --open-mode=append
#SBATCH --chdir=/fsx/output/workshop
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --partition=train-g4dn-2xl
#SBATCH --no-requeue

set -uo pipefail
rm -f /fsx/output/workshop/logs/plots.complete  # this stage is complete again only when this job succeeds
started=$(date +%s)
echo "pcdino: stage plots, job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NODELIST} at $(date -Is)" >&2

srun --mpi=pmix --kill-on-bad-exit=1 /opt/pcdino/bin/pcdino plots --config /fsx/output/workshop/logs/submitted_pipeline.yaml
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "pcdino: stage plots failed with exit code $rc" >&2
  exit "$rc"
fi
printf '{"stage": "plots", "config_hash": "4fbcfdd34b0bdc27", "job_id": "%s", "finished": "%s", "seconds": %d}\n' \
  "${SLURM_JOB_ID}" "$(date -Is)" "$(($(date +%s) - started))" >/fsx/output/workshop/logs/plots.complete.tmp && mv -f /fsx/output/workshop/logs/plots.complete.tmp /fsx/output/workshop/logs/plots.complete

# ---- sbatch commands ----
meanstd=$(sbatch --parsable /fsx/output/workshop/logs/meanstd.sbatch)
train=$(sbatch --parsable --dependency=afterok:$meanstd --kill-on-invalid-dep=yes /fsx/output/workshop/logs/train.sbatch)
extract=$(sbatch --parsable --dependency=afterok:$train --kill-on-invalid-dep=yes /fsx/output/workshop/logs/extract.sbatch)
labels=$(sbatch --parsable /fsx/output/workshop/logs/labels.sbatch)
knn=$(sbatch --parsable --dependency=afterok:$extract:$labels --kill-on-invalid-dep=yes /fsx/output/workshop/logs/knn.sbatch)
plots=$(sbatch --parsable --dependency=afterok:$knn --kill-on-invalid-dep=yes /fsx/output/workshop/logs/plots.sbatch)
