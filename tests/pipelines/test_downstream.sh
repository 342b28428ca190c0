#!/usr/bin/env bash
# Integration: the downstream tail on a small real dataset (8x8 TIFFs written by tifffile): mean/std, a
# one-epoch training run, CLS features with 1 and 2 MPI ranks (equal rows), labels, kNN, plots, for a trained and
# a randomly initialised network; and the stages' answers to bad input (exit codes and messages).
source "$(dirname "$0")/../lib/assert.sh"
own_mpi_session_dir
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
HERE="$(cd "$(dirname "$0")" && pwd)"
W="$PCDINO_BUILD_DIR/test-work/downstream"
rm -rf "$W" && mkdir -p "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self

/usr/bin/python3 "$HERE/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
SEED=4 SPLIT=0.5 BATCH=10 DOWNSTREAM="downstream_analyses:
  compute_cls_features:
    batch_size_per_gpu: 7
    resize: false
  kNN:
    global:
      n_neighbors: [1, 5, 20]
      temperature: 0.1
  umap_eval:
    n_neighbors: 10
    epochs: 50" tiny_pipeline "$W/pipeline.yaml" tail "$W"
RUN="$W/out/tail"

run "$PCDINO_BIN" meanstd -c "$W/pipeline.yaml" --threads 1
assert_rc 0 "meanstd"
run "$PCDINO_BIN" train -c "$W/pipeline.yaml" --threads 1 --set train_scDINO.hyperparameters.online_knn_every=1
assert_rc 0 "train one epoch"
run /usr/bin/python3 - "$RUN/scDINO_ViTs/dino_vit/metrics.jsonl" <<'PY'
import json, math, sys
records = [json.loads(l) for l in open(sys.argv[1])]
kinds = [r["record"] for r in records]
assert kinds[0] == "start" and kinds[-1] == "epoch" and "iteration" in kinds, kinds
for r in records[1:]:
    assert 0 <= r["teacher_entropy"] <= math.log(64) + 1e-6, r  # out_dim 64
    assert abs(r["loss"] - r["teacher_entropy"] - r["kl"]) < 1e-6 and r["kl"] >= -1e-6, r
assert 0 <= records[0]["online_knn_top1"] <= 100 and 0 <= records[-1]["online_knn_top1"] <= 100
epoch = records[-1]
assert epoch["phase_clock"] == "host_clock" and all(s > 0 for s in epoch["seconds_per_step"].values()), epoch
PY
assert_rc 0 "metrics.jsonl: the untrained online kNN, iteration records, the epoch's entropy, KL, kNN and phase times on the host's clock ($OUT)"

run "$PCDINO_BIN" extract --help
assert_rc 0 "pcdino extract --help runs pcdino-extract"
assert_contains "$OUT" "--checkpoint" "extract --help lists its options"

run mpirun --oversubscribe -np 1 "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --threads 1 --output "$W/np1.h5" --no-csv
assert_rc 0 "extract, 1 rank"
run mpirun --oversubscribe -np 2 "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --threads 1
assert_rc 0 "extract, 2 ranks"
assert_contains "$ERR" "30 held-out images embedded (192 dimensions) by 2 rank(s)" "2 ranks embed the 30 held-out images"
assert_contains "$ERR" "(epoch 1)" "the checkpoint's epoch is reported"
run h5diff -d 1e-5 "$W/np1.h5" "$RUN/CLS_features/features.h5" /features
assert_rc 0 "1 and 2 ranks give the same feature rows ($OUT)"
run h5diff "$W/np1.h5" "$RUN/CLS_features/features.h5" /paths
assert_rc 0 "1 and 2 ranks give the same paths in the same order"
[ -f "$RUN/CLS_features/channel_all_model_checkpoint_features.csv" ] || fail "workshop features CSV missing"
assert_eq "$(wc -l <"$RUN/CLS_features/channel_all_model_checkpoint_features.csv")" 30 "features CSV has a row per image"

rm -f "$RUN/CLS_features/class_labels.csv"
run "$PCDINO_BIN" labels -c "$W/pipeline.yaml"
assert_rc 0 "labels"
assert_eq "$(wc -l <"$RUN/CLS_features/class_labels.csv")" 30 "a label per held-out image"

run "$PCDINO_BIN" knn -c "$W/pipeline.yaml"
assert_rc 0 "knn"
assert_contains "$(cat "$RUN/kNN/global_kNN.txt")" "20-NN Top1: " "global_kNN.txt in the workshop's format"
run /usr/bin/python3 -c "
import json, sys
j = json.load(open('$RUN/kNN/knn.json'))
assert [r['k'] for r in j['results']] == [1, 5, 20], j['results']
assert j['bank'] == 24 and j['queries'] == 6, (j['bank'], j['queries'])
assert all(0 <= r['top1'] <= r['top2'] <= r['top5'] <= 100 for r in j['results'])
assert sum(map(sum, j['confusion_matrix']['counts'])) == 6
print(j['results'][0]['top1'])"
assert_rc 0 "knn.json holds every k, the split sizes and the confusion matrix ($OUT)"

run "$PCDINO_BIN" plots -c "$W/pipeline.yaml"
assert_rc 0 "plots"
for plot in umap training diagnostics knn_accuracy confusion_matrix; do
  [ "$(head -c 4 "$RUN/plots/$plot.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$plot.png is not a PNG"
  grep -q "<svg" "$RUN/plots/$plot.svg" || fail "$plot.svg is not an SVG"
  grep -q "src=\"$plot.png\"" "$RUN/plots/index.html" || fail "index.html does not show $plot.png"
done
[ "$(wc -l <"$RUN/plots/umap.csv")" = 31 ] || fail "umap.csv: a header and one row per held-out image"
assert_contains "$(cat "$RUN/plots/index.html")" "-NN: top-1" "index.html gives the best kNN accuracy"
compgen -G "$RUN/plots/*tmp*" >/dev/null && fail "temporary files left in plots/"
run "$PCDINO_BIN" plots -c "$W/pipeline.yaml" --gnuplot /nonexistent/gnuplot
assert_rc 69 "no gnuplot"
assert_contains "$ERR" "gnuplot-nox" "the message says what to install"
run "$PCDINO_BIN" plots -c "$W/pipeline.yaml" --set downstream_analyses.umap_eval.n_components=3
assert_rc 78 "a 3-D UMAP for a 2-D plot"
assert_contains "$ERR" "umap_eval.n_components" "the message names the key"
run "$PCDINO_BIN" plots -c "$W/pipeline.yaml" --set downstream_analyses.umap_eval.n_neighbors=40
assert_rc 65 "more UMAP neighbours than features"
assert_contains "$ERR" "features.h5 has 30 rows" "the message names the file and its rows"

run "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --random-init --threads 1 --output "$W/random.h5"
assert_rc 0 "extract with a randomly initialised ViT"
run "$PCDINO_BIN" knn -c "$W/pipeline.yaml" --features "$W/random.h5" --name-of-run random
assert_rc 0 "knn of the random network's features"
run mpirun --oversubscribe -np 2 "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --raw-pixels --output "$W/raw.h5" --no-csv
assert_rc 0 "extract the raw pixels, 2 ranks"
assert_contains "$ERR" "30 held-out images embedded (64 dimensions)" "raw pixels: 8 x 8 x 1 values per image"
run "$PCDINO_BIN" knn -c "$W/pipeline.yaml" --features "$W/raw.h5" --name-of-run raw
assert_rc 0 "knn of the raw pixels"

# Bad input.
run "$PCDINO_BIN" knn -c "$W/pipeline.yaml" --set 'downstream_analyses.kNN.global.n_neighbors=[5, 100]'
assert_rc 78 "k larger than the bank"
assert_contains "$ERR" "n_neighbors: k = 100 is larger than the bank (24" "the message names the option and the bank"
run "$PCDINO_BIN" knn -c "$W/pipeline.yaml" --features "$W/absent.h5"
assert_rc 66 "missing features file"
assert_contains "$ERR" "absent.h5" "the message names the file"
mkdir -p "$W/rgb/out/tail"
printf '{"mean": [0.1, 0.2, 0.3], "std": [0.1, 0.1, 0.1]}\n' >"$W/rgb/out/tail/mean_and_std_of_dataset.txt"
run mpirun --oversubscribe -np 2 "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --output-dir "$W/rgb/out" \
  --checkpoint "$RUN/scDINO_ViTs/dino_vit/checkpoint.pth"
assert_rc 65 "a checkpoint for 1 channel against 3-channel statistics, 2 ranks"
assert_contains "$ERR" "takes 1 input channels but" "the message names the mismatch"
run "$PCDINO_BIN" extract -c "$W/pipeline.yaml" --checkpoint "$W/data/class0/$(ls "$W/data/class0" | head -1)"
assert_rc 65 "a TIFF given as checkpoint"
finish
