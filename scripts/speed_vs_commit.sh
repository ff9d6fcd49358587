#!/bin/bash
# `make run-ablations`'s speed against an older commit of the suite, like for like: the same
# ablation (the old commit's own ablations/default.yaml, with `seeds` set to SEEDS) run by the old
# code (A) and by this checkout (B) in ABBA order, 2 workers x 1 thread, back to back on this
# machine; prints each sweep's wall time and the ratio of the medians. Both use this checkout's
# .venv (same torch); the old code is imported from a git worktree through PYTHONPATH.
# Run it on an idle machine from the repository root after `make install`:
#   bash scripts/speed_vs_commit.sh COMMIT [SEEDS] | tee results/reference/speed_vs_COMMIT.txt
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: scripts/speed_vs_commit.sh COMMIT [SEEDS]}
seeds=${2:-1}
old=$(git rev-parse --short --verify -q "$commit^{commit}") || { echo "error: '$commit' is not a commit of this repository; give a sha, tag or e.g. HEAD~5" >&2; exit 2; }
[ -x .venv/bin/python ] || { echo "error: no .venv here; run 'make install' first" >&2; exit 2; }
case "$seeds" in ''|*[!0-9]*|0) echo "error: SEEDS must be a positive integer, got '$seeds'" >&2; exit 2;; esac
here=$(pwd)
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/old" "$old" >/dev/null 2>&1
git show "$old:ablations/default.yaml" | sed "s/^seeds: .*/seeds: $seeds/" > "$work/ablation.yaml"
echo "ablation: ablations/default.yaml of $old with seeds: $seeds; A = $old, B = $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty)"
declare -A walls
for arm in A B B A; do
  if [ "$arm" = A ]; then src="$work/old"; else src="$here"; fi
  out="$work/out_$arm"
  rm -rf "$out"
  t0=$(date +%s.%N)
  (cd "$work" && PYTHONPATH="$src" "$here/.venv/bin/python" -m suite run "$work/ablation.yaml" --out "$out" --workers 2 --threads 1 > /dev/null 2>&1)
  t1=$(date +%s.%N)
  wall=$(echo "$t1 - $t0" | bc)
  walls[$arm]="${walls[$arm]:-} $wall"
  echo "$arm wall_s=$wall"
done
python3 - ${walls[A]} ${walls[B]} <<'EOF'
import statistics, sys
a, b = [float(v) for v in sys.argv[1:3]], [float(v) for v in sys.argv[3:5]]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median A {ma:.1f} s, B {mb:.1f} s: B's wall time is {100 * (mb / ma - 1):+.1f}% of A's ({ma / mb:.3f}x as fast)")
EOF
