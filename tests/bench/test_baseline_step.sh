#!/usr/bin/env bash
# The Python baseline of the training benchmarks (bench/baseline_dino_step.py) computes the step it claims
# to: its attention through F.scaled_dot_product_attention gives DINO's explicit softmax(q k^T / sqrt(d)) v
# losses, and the step under torch.compile (one graph, fullgraph; the aot_eager backend here, which traces and
# differentiates the graph as inductor does but needs no compiler) gives the eager step's losses. On a
# PyTorch without them (Debian 12's 1.13), those options are refused with exit 69 naming the option.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/python.sh"
: "${PCDINO_SOURCE_DIR:?}"

PY=$(torch_python) || fatal "no Python with PyTorch"
STEP=("$PY" "$PCDINO_SOURCE_DIR/bench/baseline_dino_step.py" --depth 1 --batch 4 --out-dim 64 --steps 3
  --warmup 0 --drop-path 0 --threads 2 --losses)
version=$("$PY" -c 'import torch; print(torch.__version__)')
echo "PyTorch $version ($PY)"

# same_losses A B DESCRIPTION: the two runs' losses agree to 1e-5 (relative), line by line.
same_losses() {
  local diff
  diff=$(paste <(echo "$1") <(echo "$2") | awk '{ d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1;
    if (NF != 2 || d > 1e-5 * (m > 1 ? m : 1)) print NR ": " $0 }')
  if [ -z "$diff" ]; then pass "$3"; else fail "$3: losses differ at"$'\n'"$diff"; fi
}

run "${STEP[@]}" --attention explicit
assert_rc 0 "the eager step with explicit attention"
explicit=$OUT
assert_eq "$(grep -cE '^[0-9]+\.[0-9]{6}$' <<<"$explicit")" 3 "three finite losses, one a line"

if "$PY" -c 'import torch.nn.functional as F; F.scaled_dot_product_attention' 2>/dev/null; then
  run "${STEP[@]}" --attention sdpa
  assert_rc 0 "the eager step with F.scaled_dot_product_attention"
  same_losses "$OUT" "$explicit" "sdpa and explicit attention give the same losses"
  run "${STEP[@]}" --compile default --compile-backend aot_eager
  assert_rc 0 "the step through torch.compile as one graph"
  same_losses "$OUT" "$explicit" "the compiled step gives the eager step's losses"
  run "${STEP[@]}" --compile default --compile-backend no-such-backend
  assert_rc 2 "an unknown backend is bad usage"
  assert_contains "$ERR" "--compile-backend no-such-backend" "the message names the option"
else
  run "${STEP[@]}" --attention sdpa
  assert_rc 69 "--attention sdpa on PyTorch $version"
  assert_contains "$ERR" "--attention sdpa needs" "the message names the option"
  run "${STEP[@]}" --compile default
  assert_rc 69 "--compile on PyTorch $version"
  assert_contains "$ERR" "--compile needs torch.compile" "the message names the option"
fi
finish
