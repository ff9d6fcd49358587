#!/usr/bin/env bash
# `make gpu-check OUT=DIR`: the one prepared check for a machine with CUDA, unattended, < 8 minutes.
#
#   1. the CUDA-marked tests                 -> DIR/pytest-cuda.log
#   2. suite bench, eager, bf16, ViT-S/16     -> DIR/bench-eager/overhead.{csv,md,json}
#      (depth 12, dim 384, 6 heads, 197 tokens = 224 px, batch 128; every scheme, timm, variants)
#   3. runs per hour of the default shape: solo vs 2, 4, 8 co-located on GPU 0 vs packs of 4, 16
#                                             -> DIR/throughput/throughput.{csv,md,json}
#   4. ablations/smoke.yaml end to end on CUDA, analysed -> DIR/smoke/{runs,tables}/
#   5. a deep run: depth 96, 300 steps, Pre-LN vs LayerScale (suite train, synthetic data)
#                                             -> DIR/deep-{preln,layerscale}/summary.json
#   6. suite bench --compile, same shape, preln vs layerscale vs timm's -> DIR/bench-compiled/
#
# Every step runs under `timeout`, capped by what is left of a global budget (BUDGET_S, 460 s by
# default), so the whole script ends inside 8 minutes whatever hangs; a step that would start with
# under 20 s left is skipped and says so (and counts as a failure: nothing may go unmeasured
# silently). Each step's output is tee'd to DIR/<step>.log and its exit status and duration go to
# DIR/summary.txt; DIR/tables.md gathers the tables, each with its command and provenance.
# Without a CUDA device it prints "no CUDA device: nothing run" and exits 0. Exit status: 0 only if
# every step ran and succeeded and the tables exist, else 1.
set -u

START=$SECONDS  # the budget counts everything, the CUDA probe included
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-results/gpu-check}"
BUDGET_S="${BUDGET_S:-460}"
cd "$ROOT" || exit 1
PY="${GPU_CHECK_PYTHON:-$ROOT/.venv/bin/python}"  # override: a test's stand-in interpreter
[ -x "$PY" ] || PY="$(command -v python3)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

if ! timeout 90 "$PY" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    echo "no CUDA device: nothing run"
    exit 0
fi

mkdir -p "$OUT"
FAILED=0
: > "$OUT/summary.txt"

# step NAME LIMIT_S CMD...: run CMD under timeout min(LIMIT_S, budget left), tee'd to OUT/NAME.log.
step() {
    local name="$1" limit="$2"
    shift 2
    local left=$((BUDGET_S - (SECONDS - START)))
    if [ "$left" -lt 20 ]; then
        echo "$name: SKIPPED (time budget spent)" | tee -a "$OUT/summary.txt"
        FAILED=1
        return
    fi
    [ "$limit" -gt "$left" ] && limit="$left"
    echo "== $name (limit ${limit} s): $*" | tee -a "$OUT/summary.txt"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && FAILED=1
    local why=""
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why=" (timed out)"
    echo "$name: rc=$rc$why, $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
}

{
    date -u +"started %Y-%m-%dT%H:%M:%SZ"
    git -C "$ROOT" rev-parse HEAD 2>/dev/null
    timeout 20 nvidia-smi 2>&1
    timeout 30 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
} > "$OUT/environment.txt" 2>&1

VIT_S=(--device cuda --dtype bf16 --depth 12 --dim 384 --heads 6 --tokens 197 --batch 128)
DEEP=(data.name=synthetic model.depth=96 model.dim=192 model.heads=3 model.patch_size=4 train.steps=300
      train.eval_every=100 train.log_every=10)

step pytest-cuda 60 "$PY" -m pytest -m cuda -q -p no:cacheprovider tests
step bench-eager 90 "$PY" -m suite bench "${VIT_S[@]}" --variants --rounds 15 --out "$OUT/bench-eager"
step throughput 80 "$PY" -m suite bench --throughput --device cuda --runs 16 --run-steps 100 --co-located 2 4 8 \
    --packed 4 16 --out "$OUT/throughput"
step smoke 40 bash -c "\"$PY\" -m suite run ablations/smoke.yaml --device cuda --out \"$OUT/smoke\" \
    && \"$PY\" -m suite analyze \"$OUT/smoke\""
step deep-preln 40 "$PY" -m suite train "${DEEP[@]}" model.residual=preln --device cuda --out "$OUT/deep-preln"
step deep-layerscale 40 "$PY" -m suite train "${DEEP[@]}" model.residual=layerscale --device cuda \
    --out "$OUT/deep-layerscale"
# Compilation dominates this step (fwd+bwd graphs per arm), hence three arms and no forward series.
step bench-compiled 150 "$PY" -m suite bench "${VIT_S[@]}" --compile --schemes layerscale timm-layerscale \
    --no-forward --rounds 15 --warmup 3 --out "$OUT/bench-compiled"

for f in bench-eager/overhead.md bench-compiled/overhead.md throughput/throughput.md smoke/tables/summary.md; do
    if [ -f "$OUT/$f" ]; then
        cat "$OUT/$f"; echo
    else
        echo "MISSING: $OUT/$f" >&2
        FAILED=1
    fi
done > "$OUT/tables.md"
echo "gpu-check done in $((SECONDS - START)) s; failed steps: $FAILED; see $OUT/summary.txt" | tee -a "$OUT/summary.txt"
exit "$FAILED"
