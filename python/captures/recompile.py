"""A real capture of torch.compile recompiling inside the profiled steps:
a one-layer model whose input length changes every step, with automatic
dynamic shapes off, so each step compiles anew (the case issue 41 saw at
4-7 s a step for 21 ms of work). Writes recompile.json.zst and
recompile.truth.json into --out. Run by `make captures` beside the
family."""

import argparse
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from capture import compress

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="captures")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
torch._dynamo.config.automatic_dynamic_shapes = False
torch._dynamo.config.recompile_limit = 64
torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.SiLU())
fwd = torch.compile(model)
with torch.no_grad():
    fwd(torch.randn(1, 8, 64))
path = os.path.join(a.out, "recompile.json")
done = {}


def ready(p):
    p.export_chrome_trace(path)


steps = 3
plan = schedule(wait=0, warmup=1, active=steps, repeat=1)
with profile(activities=[ProfilerActivity.CPU], schedule=plan, on_trace_ready=ready) as prof:
    for k in range(steps + 1):
        with torch.no_grad():
            # A new length every step: a new graph every step.
            fwd(torch.randn(1, 9 + k, 64))
        prof.step()
compress(path)
with open(os.path.join(a.out, "recompile.truth.json"), "w") as f:
    json.dump({"name": "recompile", "steps": steps, "compiling_steps": steps, "torch": torch.__version__}, f, indent=1)
