#!/usr/bin/env python3
"""Before and after on a noisy machine: interleaved rounds of bench binaries.

    python3 worker/trace/benches/ab.py ROUNDS FILE BEFORE AFTER [MORE...]

Each BEFORE/AFTER is a copy of the analysis bench binary
(target/release/deps/analyze-*) built at one commit, or a script that runs
one with some environment. Per round: the `zstd -d -c FILE > /dev/null`
command, then each binary's `--phase analyze-all FILE` in a random order.
Prints per binary the median and best wall time, the median of its ratios
to the zstd command of the same round, its median CPU time (user + system)
and the median of its per-round ratio to the first binary: this machine's
speed drifts within minutes, and only runs seconds apart compare.
"""

import os
import random
import statistics
import subprocess
import sys
import time


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, trace, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    wall = {b: [] for b in bins}
    to_zstd = {b: [] for b in bins}
    cpu = {b: [] for b in bins}
    zstd = []
    for _ in range(rounds):
        t = time.time()
        subprocess.run(["zstd", "-d", "-q", "-c", trace], stdout=subprocess.DEVNULL, check=True)
        z = time.time() - t
        zstd.append(z)
        order = bins[:]
        random.shuffle(order)
        for b in order:
            before = os.times()
            out = subprocess.run(
                [b, "--phase", "analyze-all", trace], capture_output=True, text=True, check=True
            ).stdout
            after = os.times()
            w = float(out.split()[0])
            wall[b].append(w)
            to_zstd[b].append(w / z)
            cpu[b].append(
                after.children_user - before.children_user
                + after.children_system - before.children_system
            )
    med = statistics.median
    print(f"zstd command: median {med(zstd):.3f} s, best {min(zstd):.3f} s ({rounds} rounds)")
    first = bins[0]
    for b in bins:
        rel = [x / y for x, y in zip(wall[b], wall[first])]
        print(
            f"{os.path.basename(b):12} wall median {med(wall[b]):.3f} s best {min(wall[b]):.3f} s"
            f"  x zstd median {med(to_zstd[b]):.2f}  cpu median {med(cpu[b]):.3f} s"
            f"  / {os.path.basename(first)} median {med(rel):.3f}"
        )


if __name__ == "__main__":
    main()
