#!/usr/bin/env bash
# Bad files a user can hand pcdino (issue #73): a truncated TIFF, TIFFs whose header claims 2^31 x 2^31
# pixels or 30000 x 30000 in 1 KiB, a truncated checkpoint and a pack whose index points past its shard.
# Each stops with the named file and the exit code that says what is wrong (65 data), and the program's
# peak memory stays within a few MiB of what it takes on a good file: nothing is allocated for what a header
# claims before the file is known to hold it.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_BUILD_DIR:?}" "${PCDINO_SOURCE_DIR:?}"
[ -x /usr/bin/time ] || { echo "skipped: no GNU time (/usr/bin/time; scripts/install-deps installs it)"; exit 77; }
W="$PCDINO_BUILD_DIR/test-work/bad_files"
rm -rf "$W" && mkdir -p "$W"
MARGIN_KIB=$((16 * 1024))

# peak CMD...: runs CMD under GNU time's maximum RSS (KiB, in $PEAK), with run's RC, OUT and ERR.
peak() {
  run /usr/bin/time -f 'peak %M' -o "$W/time" "$@"
  PEAK=$(sed -n 's/^peak //p' "$W/time")
}

/usr/bin/python3 - "$W" <<'PY'
import os, struct, sys
import numpy as np, tifffile
w = sys.argv[1]
for name in ("good", "truncated", "huge", "big"):
    os.makedirs(f"{w}/{name}/cells", exist_ok=True)
cell = np.random.default_rng(1).integers(0, 65535, (64, 64, 5), dtype=np.uint16)
tifffile.imwrite(f"{w}/good/cells/a.tif", cell)
tifffile.imwrite(f"{w}/truncated/cells/a.tif", cell)
os.truncate(f"{w}/truncated/cells/a.tif", 1024)

def one_page(width, height):
    # A little-endian TIFF of one 8-bit page whose header claims width x height and whose one strip is 8 bytes.
    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
               (273, 4, 1, 8 + 2 + 12 * 9 + 4), (277, 3, 1, 1), (278, 4, 1, height), (279, 4, 1, 8)]
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        ifd += struct.pack("<HHI", tag, kind, count) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
    body = b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + bytes(8)
    return body + bytes(1024 - len(body))

open(f"{w}/huge/cells/a.tif", "wb").write(one_page(2**31, 2**31))
open(f"{w}/big/cells/a.tif", "wb").write(one_page(30000, 30000))  # 900 MB claimed, under the 1 GiB cap
PY
[ -f "$W/big/cells/a.tif" ] || fatal "cannot write the TIFFs (python3-tifffile)"

peak "$PCDINO_BIN" dataset check "$W/good"
assert_rc 0 "a good cell is read"
base=$PEAK
for case in truncated huge big; do
  peak "$PCDINO_BIN" dataset check "$W/$case"
  assert_rc 65 "$case TIFF: data error"
  assert_contains "$ERR" "$W/$case/cells/a.tif" "$case TIFF: the message names the file"
  assert_eq "$([ "$PEAK" -le $((base + MARGIN_KIB)) ] && echo bounded)" bounded \
    "$case TIFF: peak RSS $PEAK KiB, within 16 MiB of a good file's $base KiB"
done
assert_contains "$(cat "$W/time" 2>/dev/null; "$PCDINO_BIN" dataset check "$W/big" 2>&1)" "in a file of 1024 bytes" \
  "the 900 MB claim is refused by the file's size, before allocating it"

# A pack whose index claims more images than its shard holds.
run "$PCDINO_BIN" dataset pack --dataset-dir "$W/good" -o "$W/pack" --threads 1
assert_rc 0 "pack the good cell"
/usr/bin/python3 - "$W/pack/pack.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["num_images"] = m["shards"][0]["count"] = 2**40
json.dump(m, open(sys.argv[1], "w"))
PY
peak "$PCDINO_BIN" dataset check "$W/pack"
assert_rc 65 "a pack whose index points past its shard: data error"
assert_contains "$ERR" "$W/pack" "the message names the pack"
assert_eq "$([ "$PEAK" -le $((base + MARGIN_KIB)) ] && echo bounded)" bounded \
  "the pack: peak RSS $PEAK KiB, within 16 MiB of a good file's $base KiB"

# A truncated checkpoint: CLS extraction names it and stops with a data error.
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 2 8 >/dev/null
tiny_pipeline "$W/pipeline.yaml" bad "$W"
run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml"
run "$PCDINO_BIN" train -c "$W/pipeline.yaml" --threads 1 --device cpu --model-dir "$W/model"
assert_rc 0 "a checkpoint to cut"
size=$(stat -c %s "$W/model/checkpoint.pth")
cp "$W/model/checkpoint.pth" "$W/cut.pth" && truncate -s $((size / 2)) "$W/cut.pth"
peak "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --checkpoint "$W/cut.pth" --output "$W/f.h5" --no-csv --device cpu
assert_rc 65 "a truncated checkpoint: data error"
assert_contains "$ERR" "$W/cut.pth" "the message names the checkpoint"
assert_eq "$(ls "$W/f.h5" 2>/dev/null)" "" "and no features file is left"
finish
