#!/usr/bin/env bash
# Integration: spank_pcdino.so in the local two-node cluster's plugstack.conf. Its options appear in
# --help; srun -N2 -n4 tasks each get the right RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
# MASTER_ADDR and profile variables; an unknown profile is refused at submission; a job without the option
# gets the default profile; --accel-device-bind=per-task narrows the devices per task; a world-writable
# profile file is refused with a log line and slurmd keeps running; an MPI stage runs with no exports.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
PLUGIN="$PCDINO_BUILD_DIR/spank/spank_pcdino.so"
[ -f "$PLUGIN" ] || fatal "no $PLUGIN (libslurm-dev missing at configure time?)"
W="$PCDINO_BUILD_DIR/test-work/spank_plugin"
rm -rf "$W" && mkdir -p "$W/jobs"
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18117}"
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include  # the plugin's profile provides what jobs need

cat >"$W/accel.yaml" <<'YAML'
profiles:
  cpu-test:
    description: "local test profile"
    env:
      - name: PCDINO_PROFILE_VAR
        value: "from-cpu-test"
      - name: PCDINO_ON_ANY_KERNEL
        value: "yes"
        when: ["kernel >= 2.6"]
      - name: PCDINO_OLD_OFI_ONLY
        value: "wrong"
        when: ["aws-ofi-nccl <= 1.5"]
      - name: OMPI_MCA_btl
        value: "tcp,self"
      - name: OMPI_MCA_btl_tcp_if_include
        value: "lo"
  gpu-test:
    devices: cuda
    env:
      - name: PCDINO_PROFILE_VAR
        value: "from-gpu-test"
  neuron-test:
    devices: neuron
    env:
      - name: PCDINO_PROFILE_VAR
        value: "from-neuron-test"
YAML
chmod 0644 "$W/accel.yaml"
# Slurm re-reads plugstack.conf at every launch: replace it by rename, never in place.
echo "required $PLUGIN config=$W/accel.yaml default=cpu-test" >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"

for cmd in sbatch srun; do
  run "$cmd" --help
  assert_contains "$OUT" "--accel-profile=NAME" "$cmd --help shows --accel-profile"
  assert_contains "$OUT" "--accel-device-bind=MODE" "$cmd --help shows --accel-device-bind"
done

report='echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE local_world=$LOCAL_WORLD_SIZE master=$MASTER_ADDR port=$MASTER_PORT omp=$OMP_NUM_THREADS var=$PCDINO_PROFILE_VAR any=$PCDINO_ON_ANY_KERNEL old=$PCDINO_OLD_OFI_ONLY cvd=$CUDA_VISIBLE_DEVICES'

# 1. No option: the default profile; four tasks on two nodes.
job=$(sbatch --parsable -N2 -n4 -o "$W/jobs/default_%j.out" --wrap "srun bash -c '$report'")
wait_job "$job"
out=$(sort "$W/jobs/default_$job.out")
port=$((29500 + job % 500))
expected="rank=0 local=0 world=4 local_world=2 master=node1 port=$port omp=1 var=from-cpu-test any=yes old= cvd=
rank=1 local=1 world=4 local_world=2 master=node1 port=$port omp=1 var=from-cpu-test any=yes old= cvd=
rank=2 local=0 world=4 local_world=2 master=node1 port=$port omp=1 var=from-cpu-test any=yes old= cvd=
rank=3 local=1 world=4 local_world=2 master=node1 port=$port omp=1 var=from-cpu-test any=yes old= cvd="
assert_eq "$out" "$expected" "srun -N2 -n4: rank variables and the default profile in every task"

# 2. An unknown profile fails at submission, naming the choices.
run sbatch --accel-profile=bogus --wrap true
assert_rc 255 "unknown profile refused by sbatch"
assert_contains "$ERR" "--accel-profile=bogus: no such profile; choose one of: cpu-test, gpu-test, neuron-test, none" \
  "message names the option and the allowed values"
run sbatch --accel-profile='../x' --wrap true
assert_rc 255 "malformed profile name refused by sbatch"

# 3. none: rank variables only. 4. Per-task devices from the step's list.
job=$(sbatch --parsable --accel-profile=none -N1 -n1 -o "$W/jobs/none_%j.out" --wrap "srun bash -c '$report'")
wait_job "$job"
assert_contains "$(cat "$W/jobs/none_$job.out")" "rank=0 local=0 world=1" "--accel-profile=none keeps rank variables"
assert_contains "$(cat "$W/jobs/none_$job.out")" "var= " "--accel-profile=none sets no profile variable"
job=$(CUDA_VISIBLE_DEVICES=0,1 sbatch --parsable --accel-profile=gpu-test --accel-device-bind=per-task -N2 -n4 \
  -o "$W/jobs/bind_%j.out" --wrap "srun bash -c '$report'")
wait_job "$job"
assert_eq "$(grep -o 'local=[01] .*cvd=[0-9,]*' "$W/jobs/bind_$job.out" | sed 's/ world.*cvd=/ cvd=/' | sort -u)" \
  $'local=0 cvd=0\nlocal=1 cvd=1' "--accel-device-bind=per-task: device [local rank] per task"
assert_contains "$(cat "$W/jobs/bind_$job.out")" "var=from-gpu-test" "chosen profile applied"
# NeuronCores come as ranges ("0-3"): one core per task; the rank-0 address of Neuron's collectives is the
# first node's address, never a loopback one (the local cluster's nodes may resolve to nothing else:
# then it is left unset), on a port other than MASTER_PORT.
neuron_report='echo local=$LOCAL_RANK cores=$NEURON_RT_VISIBLE_CORES root=$NEURON_RT_ROOT_COMM_ID port=$MASTER_PORT'
job=$(NEURON_RT_VISIBLE_CORES=0-3 sbatch --parsable --accel-profile=neuron-test --accel-device-bind=per-task -N2 \
  -n4 -o "$W/jobs/neuron_%j.out" --wrap "srun bash -c '$neuron_report'")
wait_job "$job"
assert_eq "$(grep -o 'local=[0-3] cores=[0-9-]*' "$W/jobs/neuron_$job.out" | sort -u | tr '\n' ' ')" \
  "local=0 cores=0 local=1 cores=1 " "--accel-device-bind=per-task: core [local rank] of 0-3"
assert_not_contains "$(cat "$W/jobs/neuron_$job.out")" "root=127." "no loopback rank-0 address"
while read -r line; do
  root=$(sed -n 's/.*root=\([^ ]*\).*/\1/p' <<<"$line")
  port=$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$line")
  [ -z "$root" ] || [ "${root##*:}" != "$port" ] || fail "NEURON_RT_ROOT_COMM_ID shares MASTER_PORT: $line"
done <"$W/jobs/neuron_$job.out"

# 5. An MPI stage under the plugin needs no exports: --export=NONE, srun --mpi=pmix, two nodes.
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 2 10 >"$W/expected.json"
printf 'meta:\n  name_of_run: spank\n  output_dir: "%s"\n  dataset_dir: "%s"\ntrain_scDINO:\n  fraction_for_mean_std_calc: 1.0\n' \
  "$W/out" "$W/data" >"$W/pipeline.yaml"
job=$(sbatch --parsable --export=NONE -N2 -n2 -o "$W/jobs/stage_%j.out" \
  --wrap "srun --mpi=pmix '$PCDINO_BIN' meanstd -c '$W/pipeline.yaml' --threads 1")
wait_job "$job"
assert_contains "$(scontrol show job "$job")" "ExitCode=0:0" "meanstd with --export=NONE under the plugin succeeded"
assert_contains "$(cat "$W/jobs/stage_$job.out")" "from 2 rank(s)" "two ranks took part"
run /usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/compare_mean_std.py" 1e-7 "$W/expected.json" \
  "$W/out/spank/mean_and_std_of_dataset.txt"
assert_rc 0 "and its result is right ($OUT)"

# 6. A profile file others can write is refused with a log line; jobs still run; slurmd survives.
chmod 0666 "$W/accel.yaml"
job=$(sbatch --parsable -N2 -n2 -o "$W/jobs/insecure_%j.out" --wrap "srun bash -c '$report'")
wait_job "$job"
chmod 0644 "$W/accel.yaml"
out=$(cat "$W/jobs/insecure_$job.out")
assert_contains "$out" "rank=1 local=0 world=2" "tasks still get rank variables"
assert_not_contains "$out" "from-cpu-test" "no profile variable from a world-writable file"
assert_contains "$(cat "$LOCAL_CLUSTER_DIR"/log/slurmd-node*.log)" \
  "pcdino: refusing $W/accel.yaml: writable by group or others (mode 666)" "slurmd log says why"
run "$LC" status
assert_rc 0 "every slurmd still running"

cluster_down
finish
