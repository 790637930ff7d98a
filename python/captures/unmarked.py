"""Real captures of a model run several times without step marks, as
`model.generate()` profiled without a schedule writes them: no
ProfilerStep, no record_function, one profile around a prefill and then
decodes. The layer search sees one sequence whose repeating unit is a
layer; the passes are told by their prologue (`layers::Passes`), or, with
Python stacks, by the model's own frame. Also one forward pass alone,
unmarked, which must not be cut into passes. Writes,
into --out, NAME.json.zst and NAME.truth.json for each. Run by `make
captures` beside the family."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as family  # noqa: E402

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", default="captures")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)


def model_of(arch, layers, hidden):
    d = dict(arch=arch, mode="eager", layers=layers, hidden=hidden, heads=4, every=None,
             dense_prefix=1 if arch == "moe" else 0, experts=4, topk=2, steps=0, ctx=48,
             pool=1024, with_stack=False, profile_memory=False, name="")
    torch.manual_seed(7)
    return d, family.build(d, torch)


def one(model, pos, n):
    with torch.no_grad():
        model(torch.randint(0, 1000, (1, n)), pos)


def write(name, prof, d, passes):
    path = os.path.join(a.out, name + ".json")
    prof.export_chrome_trace(path)
    family.compress(path)
    truth = {
        "name": name,
        "arch": d["arch"],
        "layers": d["layers"],
        "layer_kinds": family.layer_kinds(d),
        "passes": passes,
        "steps": 0,
        "torch": torch.__version__,
        "device": "cpu",
    }
    with open(os.path.join(a.out, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


opts = dict(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True)
for arch, layers, hidden in [("dense", 6, 64), ("moe", 4, 96)]:
    d, model = model_of(arch, layers, hidden)
    ctx = d["ctx"]
    for w in range(2):
        one(model, ctx - 2 + w, 1)
    # generate(): a prefill of the prompt, then a decode a token.
    with profile(**opts) as prof:
        one(model, 0, ctx)
        for k in range(4):
            one(model, ctx + k, 1)
    write("generate-%s-%dl" % (arch, layers), prof, d, 5)
    # One forward pass alone.
    with profile(**opts) as prof:
        one(model, ctx, 1)
    write("once-%s-%dl" % (arch, layers), prof, d, 1)
    if arch == "dense":
        # generate() again, with Python stacks: the model's own nn.Module
        # frame is called once a pass.
        with profile(with_stack=True, **opts) as prof:
            one(model, 0, ctx)
            for k in range(4):
                one(model, ctx + k, 1)
        write("generate-stack-%s-%dl" % (arch, layers), prof, d, 5)
