#!/usr/bin/env python3
"""Cuts a seed corpus for every fuzz target from the shared traces.

Usage: seeds.py SHARED_TRACES_DIR OUT_DIR [KINETOSCOPE_BINARY]

Seeds are small windows of real traces (a kernel with its launch, flows and
the op around it; runs of consecutive events), written compact and in
torch's indented style, plus gzip and zstd copies for the decoder and, when
the binary is given, the summaries of those windows for the diff target.
They go to OUT_DIR/<target>/ and are never committed: the traces are not
ours to copy into the project.
"""
import gzip
import json
import os
import subprocess
import sys

SMALL = 2_000_000  # traces above this (gzip bytes) are skipped: seeds stay quick to cut
KEEP_TOP = ("schemaVersion", "deviceProperties", "distributedInfo", "traceName", "displayTimeUnit")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.load(f)


def document(doc, events):
    out = {k: doc[k] for k in KEEP_TOP if k in doc}
    out["traceEvents"] = events
    return out


def kernel_window(events):
    """A kernel, its launch (same correlation), their flow events and the
    CPU ops around the launch on its thread."""
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not kernels:
        return None
    k = kernels[len(kernels) // 2]
    corr = (k.get("args") or {}).get("correlation")
    launch = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and (e.get("args") or {}).get("correlation") == corr]
    flows = [e for e in events if e.get("ph") in ("s", "f") and e.get("id") == corr]
    ops = []
    for l in launch:
        ops += [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == l.get("tid")
                and e.get("ph") == "X" and e.get("ts", 0) <= l.get("ts", 0)
                <= e.get("ts", 0) + e.get("dur", 0)][:6]
    meta = [e for e in events if e.get("ph") == "M"][:12]
    return meta + ops + launch + flows + [k]


def staircase(path, n=80_000):
    """The probe's staircase (RELIABILITY.md, the third probe, 1): `n` CPU ops
    of one name on one thread, op `i` from `i` us for `n` us, each nested in
    the last. As zstd it is 70 KB; the `analyze` target reads it as an upload
    (7 MB of JSON). Under ASan the linear fold takes about 4 s for both of the
    target's analyses; the old quadratic one took 7 s per analysis at 80,000
    ops in a release build without ASan (10.9 s at 100,000, the probe's
    figure), over 14 s for two: past the fuzz time limit (`FUZZ_TIMEOUT`,
    10 s) with room on either side."""
    ops = ",".join(
        f'{{"ph":"X","cat":"cpu_op","name":"aten::stair","pid":1,"tid":1,"ts":{i},"dur":{n}}}'
        for i in range(n)
    )
    doc = ('{"traceEvents":[' + ops + "]}").encode()
    zst = subprocess.run(["zstd", "-q", "-19", "-c"], input=doc, capture_output=True, check=True)
    with open(path, "wb") as f:
        f.write(zst.stdout)


def main():
    shared, out = sys.argv[1], sys.argv[2]
    binary = sys.argv[3] if len(sys.argv) > 3 else None
    for t in ("parse", "decode", "analyze", "summaries", "timeline"):
        os.makedirs(os.path.join(out, t), exist_ok=True)
    windows = []
    for name in sorted(os.listdir(shared)):
        path = os.path.join(shared, name)
        if not (name.endswith(".json") or name.endswith(".json.gz")) or os.path.getsize(path) > SMALL:
            continue
        doc = load(path)
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(events, list) or not events:
            continue
        stem = name.split(".json")[0]
        kw = kernel_window(events)
        if kw:
            windows.append((f"{stem}-kernel", document(doc, kw)))
        mid = len(events) // 2
        windows.append((f"{stem}-run", document(doc, events[mid:mid + 40])))
    summaries = []
    for stem, doc in windows:
        compact = json.dumps(doc, separators=(",", ":")).encode()
        # torch writes one event per line, indented.
        torch_style = json.dumps(doc, indent=1).encode()
        for t in ("parse", "analyze", "timeline"):
            with open(os.path.join(out, t, f"{stem}.json"), "wb") as f:
                f.write(compact)
        with open(os.path.join(out, "parse", f"{stem}-indented.json"), "wb") as f:
            f.write(torch_style)
        with open(os.path.join(out, "decode", f"{stem}.json.gz"), "wb") as f:
            f.write(gzip.compress(torch_style))
        zst = subprocess.run(["zstd", "-q", "-3", "-c"], input=compact, capture_output=True)
        if zst.returncode == 0:
            with open(os.path.join(out, "decode", f"{stem}.json.zst"), "wb") as f:
                f.write(zst.stdout)
        if binary and stem.endswith("-kernel") and len(summaries) < 12:
            seed = os.path.join(out, "analyze", f"{stem}.json")
            r = subprocess.run([binary, "analyze", "--json", seed], capture_output=True)
            if r.returncode == 0:
                summaries.append((stem, json.dumps(json.loads(r.stdout), separators=(",", ":")).encode()))
    # The diff target reads summaries separated by a 0 byte.
    for k in range(len(summaries)):
        (sa, a), (sb, b) = summaries[k], summaries[(k + 1) % len(summaries)]
        with open(os.path.join(out, "summaries", f"{sa}--{sb}"), "wb") as f:
            f.write(a + b"\0" + b)
    staircase(os.path.join(out, "analyze", "staircase-80k.json.zst"))
    print(f"seeds: {len(windows)} windows, {len(summaries)} summaries -> {out}")


if __name__ == "__main__":
    main()
