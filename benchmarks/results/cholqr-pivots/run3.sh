#!/bin/bash
# pivots: Fig. 3(c)/(f) on ESOL at m = 32 (the m of the paper's Fig. 3(c)), 5 splits, every
# variant (AA also with a step of 1); then AA with a step of 1 at m = 64 beside run1; one lock slot
cd /work/wt/pivots-snap3
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/pivots-snap3/src:/work/wt/pivots-snap3
echo "lock acquired $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
if [ $(date -u +%H%M) -gt 1115 ]; then echo "too late, skipped"; exit 0; fi
timeout -s INT -k 30 600 /work/main/.venv/bin/python -m benchmarks cholqr-discrete --threads 1 --sets ESOL --m 32 --splits 5 \
  --methods cholqr-z8 cholqr cholqr-z64 cholqr-z128 cholqr-oi-z16 cholqr-oi-z64 cholqr-aa-z8-128 cholqr-aa-z8-128-s1 titsias-16 titsias-512 random ivm \
  --max-time 120 --out /tmp/pivots/out/fig3m32 > /tmp/pivots/out/fig3m32.log 2>&1
echo "fig3m32 rc $? $(date -u +%T)"; uptime
timeout -s INT -k 30 300 /work/main/.venv/bin/python -m benchmarks cholqr-discrete --threads 1 --sets ESOL --m 64 --splits 5 \
  --methods cholqr-aa-z8-128-s1 --max-time 120 --out /tmp/pivots/out/aa1m64 > /tmp/pivots/out/aa1m64.log 2>&1
echo "aa1m64 rc $? released $(date -u +%T)"; uptime
