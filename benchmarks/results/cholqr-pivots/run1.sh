#!/bin/bash
# pivots: Fig. 3(c)/(f) on ESOL, m = 64, 5 splits, every variant and baseline, one lock slot
cd /work/wt/pivots-snap
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/pivots-snap/src:/work/wt/pivots-snap
echo "lock acquired $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
timeout -s INT -k 30 1140 /work/main/.venv/bin/python -m benchmarks cholqr-discrete --threads 1 --sets ESOL --m 64 --splits 5 \
  --methods cholqr-z8 cholqr cholqr-z64 cholqr-z128 cholqr-oi-z16 cholqr-oi-z64 cholqr-aa-z8-128 titsias-16 titsias-512 random ivm \
  --max-time 120 --out /tmp/pivots/out/fig3 > /tmp/pivots/out/fig3.log 2>&1
echo "fig3 rc $? released $(date -u +%T)"; uptime
