#!/bin/bash
# pivots: Fig. 3(c)/(f) on ESOL at m = 32 (the paper's Fig. 3(c) m) and 64, 8 splits (AA also with a step of 1)
# (splits 0-4 at m = 64 repeat run1's: a check that the fits are reproducible); one lock slot
cd /work/wt/pivots-snap3
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/pivots-snap3/src:/work/wt/pivots-snap3
echo "lock acquired $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
if [ $(date -u +%H%M) -gt 1105 ]; then echo "too late, skipped"; exit 0; fi
timeout -s INT -k 30 1140 /work/main/.venv/bin/python -m benchmarks cholqr-discrete --threads 1 --sets ESOL --m 32 64 --splits 8 \
  --methods cholqr-z8 cholqr cholqr-z64 cholqr-z128 cholqr-oi-z16 cholqr-oi-z64 cholqr-aa-z8-128 cholqr-aa-z8-128-s1 titsias-16 titsias-512 random ivm \
  --max-time 120 --out /tmp/pivots/out/fig3b > /tmp/pivots/out/fig3b.log 2>&1
echo "fig3b rc $? released $(date -u +%T)"; uptime
