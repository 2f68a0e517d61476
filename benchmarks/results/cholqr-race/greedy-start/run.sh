#!/bin/bash
# cholqr58: one lock slot: swap profile, a convergence run, the 10k race
cd /work/wt/cholqr58-snap
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/cholqr58-snap/src:/work/wt/cholqr58-snap
PY=/work/main/.venv/bin/python
R=benchmarks/results/cholqr-race/greedy-start
OUT=/tmp/cholqr58/out; mkdir -p $OUT
echo "lock acquired $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
timeout 150 $PY $R/swap_profile.py 10000 512 512 old,new > $OUT/swap_profile.txt 2>&1; echo "profile rc $? $(date -u +%T)"; uptime
timeout 60 $PY $R/converge.py 2000 128 > $OUT/converge_2000x128.txt 2>&1; echo "converge rc $? $(date -u +%T)"
timeout -s INT -k 30 840 $PY -m benchmarks cholqr-kin40k --m 512 --methods titsias-16 cholqr-vfe \
  --cholqr-init random greedy+fit variance+fit --swaps-per-epoch 60 sweep --max-time 100 --threads 1 --out $OUT/race > $OUT/race.log 2>&1
echo "race rc $? released $(date -u +%T)"; uptime
