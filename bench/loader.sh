#!/usr/bin/env bash
# The training loader alone, side by side with the reference's (issue #72): images/s of reading, decoding,
# every crop and augmentation and the batch tensors, per loader thread, with 1 to all cores' threads.
#   pcdino: build/bench/pcdino_loader_bench (pcdino train's make_batch under its Prefetcher);
#   reference: bench/loader_reference.py, a torch DataLoader with as many workers (Debian's
#   python3-torchvision: scripts/install-deps bench).
# Two sets, generated on first use under BUILD/bench-work/loader:
#   tiff: the workshop's cells (tests/pipelines/make_workshop_cells.py: 5-channel 50x50 uint16 TIFFs as
#         tifffile writes them), workshop.yaml's crops (2 x 224, 8 x 96 px), scDINO's channel-wise multi-crop;
#         pcdino also reads them packed (pcdino dataset pack: HDF5 shards), against the same baseline;
#   jpeg: ImageNet-like 3-channel JPEGs of about 500x375 px (bench/make_jpegs.py), DINO's defaults (2 x 224,
#         8 x 96 px) and its RGB DataAugmentationDINO.
# Each row is the best of BENCH_REPEAT runs of IMAGES images (batches of 32, one untimed batch first);
# "vs base" is pcdino's images/s over the reference's at the same number of threads.
#
# usage: bench/loader.sh [BUILD_DIR]    env: IMAGES (512), THREADS ("1 .. nproc"), SETS ("tiff jpeg")
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
W="$BUILD/bench-work/loader"
IMAGES=${IMAGES:-512}
THREADS=${THREADS:-$(seq -s ' ' 1 "$(nproc)")}
SETS=${SETS:-tiff jpeg}
mkdir -p "$W"
[ -d "$W/tiff" ] || torch_py "$ROOT/tests/pipelines/make_workshop_cells.py" "$W/tiff" 8 64 50
[ -d "$W/jpeg" ] || torch_py "$ROOT/bench/make_jpegs.py" "$W/jpeg" 8 64
[ -f "$W/packed/pack.json" ] || "$BUILD/cli/pcdino" dataset pack --dataset-dir "$W/tiff" -o "$W/packed" >/dev/null

seconds_of() {  # the "seconds" of the JSON line a loader prints last
  "$@" | tail -n 1 | torch_py -c 'import json, sys; print(json.load(sys.stdin)["seconds"])'
}

bench_header
for set in $SETS; do
  rgb=()
  [ "$set" = jpeg ] && rgb=(--rgb)
  for t in $THREADS; do
    s=$(best_of seconds_of torch_py "$ROOT/bench/loader_reference.py" --set "$set" "$W/$set" --workers "$t" \
      --images "$IMAGES")
    bench_row "reference $set" "$set" 1 "$t" warm "$IMAGES" "$s" baseline
    s=$(best_of seconds_of "$BUILD/bench/pcdino_loader_bench" "$W/$set" "${rgb[@]}" --threads "$t" \
      --images "$IMAGES")
    bench_row "pcdino $set" "$set" 1 "$t" warm "$IMAGES" "$s"
    if [ "$set" = tiff ]; then  # the same cells packed (pcdino dataset pack), against the same baseline
      s=$(best_of seconds_of "$BUILD/bench/pcdino_loader_bench" "$W/packed" --threads "$t" --images "$IMAGES")
      bench_row "pcdino tiff, packed" packed 1 "$t" warm "$IMAGES" "$s"
    fi
  done
done
echo "(2 x 224 + 8 x 96 px crops; batches of 32; $(nproc) cores; reference: torch $(torch_py -c \
  'import torch, torchvision; print(torch.__version__ + ", torchvision " + torchvision.__version__)'))"
