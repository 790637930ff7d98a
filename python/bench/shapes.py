"""Synthetic traces that each grow one dimension of a trace, for the CLI's
memory budget (BENCHMARKS.md, "Distinct names and shapes: bounded"):

    python3 python/bench/shapes.py OUTDIR [N]

writes OUTDIR/{uniq,alpha,few,steps,sig,tid,ctr,args,mem,memsame,gpu,gpuuniq,longdur,clocks,manysteps}.json of N
events each (default 1,000,000); then, for each,
`/usr/bin/time -f "%e s %M KB" kinetoscope analyze --json FILE > /dev/null`.
"""
import os
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
os.makedirs(out, exist_ok=True)


def letters(i):
    s = ""
    for _ in range(5):
        s += chr(97 + i % 26)
        i //= 26
    return s


def op(name, i, tid=1, args=""):
    return ('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": %d, "ts": %d.5, '
            '"dur": 1, "args": {"External id": %d%s}}' % (name, tid, 1000 + 2 * i, i, args))


extra = "".join(', "key_%d": [%d, "v%d"]' % (k, k, k) for k in range(20))
shapes = {
    "uniq": lambda i: op("aten::op_with_a_unique_name_%d" % i, i),
    "alpha": lambda i: op("aten::op_with_a_unique_name_%s" % letters(i), i),
    "few": lambda i: op("aten::op_with_a_unique_name_%02d" % (i % 100), i),
    # `few` in steps of 10,000 ops, each under a `ProfilerStep#k` (one event more a step).
    "steps": lambda i: ((('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, '
                         '"tid": 1, "ts": %d, "dur": %d, "args": {}},\n') % (i // 10000, 1000 + 2 * i, 19999))
                        if i % 10000 == 0 else "")
    + op("aten::op_with_a_unique_name_%02d" % (i % 100), i),
    # `few` with a `ProfilerStep#k` every 10 ops: 100,000 steps a million ops,
    # past the trace's bound on distinct names.
    "manysteps": lambda i: (('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, '
                             '"tid": 1, "ts": %d, "dur": 19, "args": {}},\n') % (i // 10, 1000 + 2 * i)
                            if i % 10 == 0 else "")
    + op("aten::op_with_a_unique_name_%02d" % (i % 100), i),
    "sig": lambda i: op("aten::mm", i, args=', "Input Dims": [[%d, 8], [8, 8]], '
                        '"Input type": ["float", "float"]' % i),
    "tid": lambda i: op("aten::mm", i, tid=i),
    "args": lambda i: op("aten::mm", i, args=extra),
    "ctr": lambda i: '{"ph": "C", "name": "ctr", "pid": 1, "ts": %d.5, "args": {"series_%d": %d}}'
    % (1000 + 2 * i, i, i),
    "mem": lambda i: '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, '
    '"tid": 1, "ts": %d.5, "args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": 512, '
    '"Addr": %d, "Device Type": 1, "Device Id": %d}}' % (1000 + 2 * i, 10 * i, 5 * i, 1000 + i, i),
    # GPU ops alone (`activities=[CUDA]`): 50 kernel names on one stream.
    "gpu": lambda i: '{"ph": "X", "cat": "kernel", "name": "kernel_number_%d", "pid": 0, "tid": 7, '
    '"ts": %d, "dur": 1, "args": {"correlation": %d, "device": 0, "stream": 7, "grid": [%d, 1, 1], '
    '"block": [128, 1, 1]}}' % (i % 50, 1000 + 2 * i, i, i % 100),
    # GPU ops alone, a kernel name a call, on 1,000 streams.
    "gpuuniq": lambda i: '{"ph": "X", "cat": "kernel", "name": "kernel_number_%d", "pid": 0, "tid": %d, '
    '"ts": %d, "dur": 1, "args": {"correlation": %d, "device": 0, "stream": %d}}'
    % (i, 7 + i % 1000, 1000 + 2 * i, i, 7 + i % 1000),
    # `few` with every op longer than 4.3 s (durations past four bytes of ns).
    "longdur": lambda i: op("aten::op_with_a_unique_name_%02d" % (i % 100), i).replace('"dur": 1,', '"dur": 5000000000,'),
    # `few` from two processes whose clocks are a day apart, one event each in turn.
    "clocks": lambda i: op("aten::op_with_a_unique_name_%02d" % (i % 100), i).replace(
        '"pid": 1, "tid": 1, "ts": %d.5' % (1000 + 2 * i),
        '"pid": %d, "tid": 1, "ts": %d.5' % (1 + i % 2, 1000 + 2 * i + (86400000000 if i % 2 else 0))),
    "memsame": lambda i: '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", '
    '"pid": 1, "tid": 1, "ts": %d.5, "args": {"Total Reserved": %d, "Total Allocated": %d, '
    '"Bytes": 512, "Addr": %d, "Device Type": 1, "Device Id": 0}}' % (1000 + 2 * i, 10 * i, 5 * i, 1000 + i),
}
for name, event in shapes.items():
    with open(os.path.join(out, name + ".json"), "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        f.write(",\n".join(event(i) for i in range(n)))
        f.write("\n]}\n")
