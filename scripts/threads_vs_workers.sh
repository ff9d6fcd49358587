#!/bin/bash
# 2 workers x 1 thread vs 1 worker x 2 threads on the default ablation's runs of one scheme and seed
# (depths 12 and 48, three rates), in ABBA order; prints each sweep's wall time. Run it on an idle
# machine from the repository root after `make install`:
#   bash scripts/threads_vs_workers.sh | tee results/reference/threads_vs_workers.txt
cd "$(dirname "$0")/.."
for cfg in "2 1" "1 2" "1 2" "2 1"; do
  set -- $cfg
  out=$(mktemp -d)/thr_$1x$2
  t0=$(date +%s.%N)
  .venv/bin/suite run ablations/default.yaml --out $out --workers $1 --threads $2 --only variant=preln,seed=0 > /dev/null 2>&1
  t1=$(date +%s.%N)
  echo "workers=$1 threads=$2 wall_s=$(echo "$t1 - $t0" | bc)"
done
