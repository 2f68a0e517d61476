"""Run a command (e.g. `gpscale fit ... --method auto`) and stamp each line it writes to
stderr with the seconds since the start; at the end, the wall time from the line in which
auto says what it picked (and prints its estimate) to the exit (budget run 7).

    python timed_cli.py gpscale fit --data train.csv --target y --method auto --out m.pt
"""
import subprocess
import sys
import time

t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, text=True)
printed = None
for line in p.stderr:
    t = time.perf_counter() - t0
    if printed is None and "picked" in line:
        printed = t
    print(f"[{t:7.1f}] {line}", end="", flush=True)
rc = p.wait()
t = time.perf_counter() - t0
print(f"rc={rc} wall={t:.1f} from_print={t - (printed or 0):.1f} printed_at={printed}")
