#!/usr/bin/env bash
# Integration (issue #70): two unprivileged users share the local two-node cluster with Pyxis and Enroot set up
# as pcdino cluster generate sets them up (the folders above each user's root's, 0755; the containers prolog
# making each job's user's own, 0700; the cache per user). User A cannot make, read or replace anything in B's
# container folders, before B's job or during it, from the host or from a job of A's; B's contained job runs
# from B's own image, as B; A's from A's.
# Skipped (77) where the third-party sources are missing or the test is not root.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/container.sh"
source "$(dirname "$0")/../lib/users.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
test_users
W="$PCDINO_BUILD_DIR/test-work/container_users"
rm -rf "$W" && mkdir -p "$W"
chmod 0755 "$W"
container_setup

# Each user's own image, in a folder only its user can read.
for u in "$USER_A" "$USER_B"; do
  install -d -o "$u" -g "$u" -m 0700 "$W/$u"
  install -o "$u" -g "$u" -m 0600 "$IMAGE" "$W/$u/image.sqsh"
done
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-19527}"
D=$LOCAL_CLUSTER_DIR
# The folders above each user's, on each node: root's, 0755.
assert_eq "$(stat -c '%U %a' "$D"/enroot/node1/{run,data,cache} | sort -u)" "root 755" \
  "node1's Enroot folders above each user's are root's, 0755"
user_do "$USER_A" mkdir "$D/enroot/node1/data/user-$UID_B"
assert_rc 1 "A cannot make B's data folder before B's first job"
user_do "$USER_A" mkdir "$D/enroot/node1/cache/user-$UID_B"
assert_rc 1 "nor B's cache"

# B's contained job: B's image, as B; and the prolog made B's folders, B's alone.
report='echo uid=$(id -u) image=$(sed -n s/^name=//p /etc/pcdino/image.txt)'
user_do "$USER_B" sbatch --parsable -N1 -w node1 -o "$W/$USER_B/job_%j.out" --chdir "$W/$USER_B" \
  --wrap "srun --container-image=$W/$USER_B/image.sqsh bash -c '$report'"
assert_rc 0 "B submits a contained job"
job_b=$OUT
wait_job "$job_b" 300
out_b=$(cat "$W/$USER_B/job_$job_b.out" 2>&1)
assert_contains "$out_b" "uid=$UID_B image=pcdino-cpu" "B's job ran in B's image, as B"
for f in run data cache; do
  assert_eq "$(stat -c '%U %a' "$D/enroot/node1/$f/user-$UID_B")" "$USER_B 700" "node1's $f/user-$UID_B: B's, 0700"
done
user_do "$USER_A" ls "$D/enroot/node1/data/user-$UID_B"
assert_rc 2 "A cannot list B's containers"
user_do "$USER_A" mv "$D/enroot/node1/data/user-$UID_B" "$D/enroot/node1/data/taken"
assert_rc 1 "nor move B's folder away"
user_do "$USER_A" find "$D/enroot/node1/cache/user-$UID_B" -type f
assert_rc 1 "nor read B's layer cache"

# A's job, on the same node, tries B's folders from inside a job and runs its own image.
user_do "$USER_A" sbatch --parsable -N1 -w node1 -o "$W/$USER_A/job_%j.out" --chdir "$W/$USER_A" --wrap "
  ls /run/pcdino-enroot/data/user-$UID_B >/dev/null 2>&1 && echo A-read-B || echo A-refused
  mkdir /run/pcdino-enroot/data/user-$UID_B/x 2>/dev/null && echo A-wrote-B || echo A-refused-write
  srun --container-image=$W/$USER_A/image.sqsh bash -c '$report'"
assert_rc 0 "A submits a job on the same node"
job_a=$OUT
wait_job "$job_a" 300
out_a=$(cat "$W/$USER_A/job_$job_a.out" 2>&1)
assert_contains "$out_a" "A-refused" "A's job cannot read B's folder on the node"
assert_contains "$out_a" "A-refused-write" "nor write in it"
assert_contains "$out_a" "uid=$UID_A image=pcdino-cpu" "A's own contained step ran, as A"

# B's next job on that node: the prolog keeps B's folders as they are.
user_do "$USER_B" sbatch --parsable -N1 -w node1 -o "$W/$USER_B/again_%j.out" --chdir "$W/$USER_B" \
  --wrap "srun --container-image=$W/$USER_B/image.sqsh bash -c '$report'"
job_b2=$OUT
wait_job "$job_b2" 300
assert_contains "$(cat "$W/$USER_B/again_$job_b2.out" 2>&1)" "uid=$UID_B image=pcdino-cpu" "B's next job runs in B's image"
cluster_down
finish
