#!/bin/bash
cd /work/wt/cholqr58-snap
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=/work/wt/cholqr58-snap/src:/work/wt/cholqr58-snap
echo "lock acquired $(date -u +%T) commit $(git rev-parse --short HEAD)"; uptime
if [ $(date -u +%H%M) -gt 0850 ]; then echo "too late, skipped"; exit 0; fi
timeout -s INT -k 30 300 /work/main/.venv/bin/python -m benchmarks cholqr-kin40k --m 512 --methods titsias-16 cholqr-vfe \
  --cholqr-init greedy+fit --swaps-per-epoch 256 --max-time 80 --threads 1 --out /tmp/cholqr58/out/race2 > /tmp/cholqr58/out/race2.log 2>&1
echo "race2 rc $? released $(date -u +%T)"; uptime
