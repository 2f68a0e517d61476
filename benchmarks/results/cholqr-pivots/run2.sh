#!/bin/bash
# pivots: the pivot-quality diagnostic on ESOL, then last session's kin40k race
# (greedy start + prefit, 256 swaps vs Titsias-16) twice, for its spread; one lock slot
cd /work/wt/pivots-snap
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/pivots-snap/src:/work/wt/pivots-snap
PY=/work/main/.venv/bin/python
R=benchmarks/results/cholqr-pivots
echo "lock held $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
timeout 120 $PY $R/pivot_quality.py 100 5 > /tmp/pivots/out/pivot_quality_e5.txt 2>&1; echo "quality e5 rc $? $(date -u +%T)"
timeout 120 $PY $R/pivot_quality.py 100 0 > /tmp/pivots/out/pivot_quality_conv.txt 2>&1; echo "quality conv rc $? $(date -u +%T)"
for r in 1 2; do
  uptime
  timeout -s INT -k 30 300 $PY -m benchmarks cholqr-kin40k --m 512 --methods titsias-16 cholqr-vfe \
    --cholqr-init greedy+fit --swaps-per-epoch 256 --max-time 80 --threads 1 --out /tmp/pivots/out/race$r > /tmp/pivots/out/race$r.log 2>&1
  echo "race$r rc $? $(date -u +%T)"
done
uptime; echo "released $(date -u +%T)"
