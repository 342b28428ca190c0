# shellcheck shell=bash
# Containers in the tests (sourced, after assert.sh): Pyxis and enroot (scripts/container-runtime, kept under
# /var/cache/pcdino/stacks) and pcdino's CPU image made from this build (scripts/container-image), shared
# by the tests of one build folder.

# container_setup: sets RUNTIME (the prefix local-cluster --pyxis takes) and IMAGE (the .sqsh of this build's
# pcdino); the test ends skipped (77) where it cannot have them here: not root, or no third-party sources.
# The image is made again only when this build's programs (or scripts/container-image) are newer than it (a lock keeps tests apart).
container_setup() {
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (debootstrap, chroot, mount namespaces)"; exit 77; }
  local start=$SECONDS rc=0
  RUNTIME=$("$PCDINO_SOURCE_DIR/scripts/container-runtime") || rc=$?
  [ "$rc" = 66 ] && { echo "skipped: no Pyxis/enroot sources (../shared/third_party)"; exit 77; }
  [ "$rc" = 0 ] || fatal "scripts/container-runtime failed ($rc)"
  echo "Pyxis and enroot in $RUNTIME ($((SECONDS - start)) s)"
  local dir="$PCDINO_BUILD_DIR/test-work/container-image"
  IMAGE=$dir/pcdino-cpu.sqsh
  mkdir -p "$dir"
  exec 8>"$dir/lock"
  flock 8
  local newer
  newer=$(find "$PCDINO_BUILD_DIR/cli" "$PCDINO_SOURCE_DIR/scripts/container-image" -maxdepth 1 \
    \( -name 'pcdino*' -o -name container-image \) -type f -newer "$IMAGE" 2>/dev/null | head -n 1)
  if [ ! -f "$IMAGE" ] || [ -n "$newer" ]; then
    start=$SECONDS
    rm -rf "$dir/package"
    # pcdino's package from this build, laid out as scripts/package's tarball (cmake --install builds nothing).
    run cmake --install "$PCDINO_BUILD_DIR" --prefix "$dir/package/pcdino-test"
    assert_rc 0 "this build installed as a package"
    tar -czf "$dir/pcdino-test.tar.gz" -C "$dir/package" pcdino-test
    run "$PCDINO_SOURCE_DIR/scripts/container-image" cpu --package "$dir/pcdino-test.tar.gz" --out "$IMAGE"
    assert_rc 0 "scripts/container-image cpu"
    [ "$RC" = 0 ] || fatal "no image: $ERR"
    assert_contains "$ERR" "slurm.container_image: " "it says where the image goes"
    echo "image made in $((SECONDS - start)) s: $(grep -o '[0-9.]*[KMGT]B ([0-9]* bytes)' <<<"$ERR")"
  else
    pass "the image of this build: $IMAGE"
  fi
  flock -u 8
  export LOCAL_CLUSTER_PYXIS=$RUNTIME
}
