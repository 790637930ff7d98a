"""Real torch.profiler captures of a random family of small decoders.

`make captures` runs this with torch (CPU always; on a GPU machine the GPU
modes too) and writes, for each capture NAME, into the output folder:

  NAME.json.zst          the Chrome trace torch wrote (export_chrome_trace), zstd -19
  NAME.key_averages.json torch's key_averages(): calls, self/total CPU (and
                         device) time per op name, as torch computes them
  NAME.truth.json        what the model is: layers, each layer's kind,
                         steps and their kinds, casts per step, the mode

The analysis is checked against them by `worker/trace/tests/it/captures.rs`
(no torch needed there). The family is drawn from a seed, so a capture is
remade by `python3 capture.py --seed S --out DIR`; `--list` prints what a
seed makes without torch.

Architectures: dense, MoE (a dense prefix, then experts), interleaved
(MoE every other layer), hybrid (full attention every K-th layer, a linear
mixer in the others, as Qwen3-Next and Qwen3.5 do), DSA (a top-k indexer
before attention in every layer, as GLM-5's DeepSeek sparse attention),
local/global attention, and unfused MLPs. Every attention layer keeps an
FP8 KV pool and casts it to BF16 on each call: the founding story's cast.

Modes: eager decode steps (ProfilerStep), torch.compile (default and
reduce-overhead), an engine loop (`record_function("execute_model")` per
step, a prefill and then decodes, a sync per step, no ProfilerStep) and
training steps (forward, backward, optimizer); CUDA graphs where a GPU is
there. Options: with_stack, profile_memory.
"""

import argparse
import json
import os
import random
import subprocess
import sys

ARCHS = ["dense", "moe", "interleaved", "hybrid", "dsa", "local_global", "unfused"]
MODES_CPU = ["eager", "compile", "compile_ro", "engine", "train"]
MODES_GPU = ["graph"]


def draw(seed, gpu=False):
    """The family: one capture description per (arch, mode) pair drawn
    from the seed. Pure Python: no torch."""
    rng = random.Random(seed)
    modes = MODES_CPU + (MODES_GPU if gpu else [])
    out = []
    for arch in ARCHS:
        for mode in modes:
            layers = rng.choice([4, 6, 8])
            if arch == "hybrid":
                layers = rng.choice([8, 12])
            d = {
                "arch": arch,
                "mode": mode,
                "layers": layers,
                "hidden": rng.choice([64, 96, 128]),
                "heads": 4,
                "every": rng.choice([2, 4]) if arch == "hybrid" else None,
                "dense_prefix": rng.choice([1, 2]) if arch == "moe" else 0,
                "experts": 4,
                "topk": 2,
                "steps": 4 if mode != "engine" else 5,
                "ctx": rng.choice([48, 64, 96]),
                "pool": 1024,
                "with_stack": rng.random() < 0.3,
                "profile_memory": rng.random() < 0.3,
            }
            d["name"] = "%s-%s-%dl" % (arch, mode, layers)
            out.append(d)
    return out


def layer_kinds(d):
    """Each layer's kind, in the analysis' words."""
    kinds = []
    for i in range(d["layers"]):
        arch = d["arch"]
        if arch == "moe":
            kinds.append("dense" if i < d["dense_prefix"] else "moe")
        elif arch == "interleaved":
            kinds.append("moe" if i % 2 == 1 else "dense")
        elif arch == "hybrid":
            kinds.append("dense" if (i + 1) % d["every"] == 0 else "linear")
        else:
            kinds.append("dense")
    return kinds


_OPS = {}


def gated_delta_rule(torch):
    """The linear mixer's recurrence as a custom op
    (`family::fused_recurrent_gated_delta_rule`), registered once."""
    if "gdr" not in _OPS:

        @torch.library.custom_op("family::fused_recurrent_gated_delta_rule", mutates_args=())
        def gdr(a: torch.Tensor, b: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
            return torch.tanh(torch.cumsum(torch.sigmoid(g) * a * b, dim=1))

        @gdr.register_fake
        def _(a, b, g):
            return torch.empty_like(a)

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        def backward(ctx, grad):
            with torch.enable_grad():
                xs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
                a, b, g = xs
                y = torch.tanh(torch.cumsum(torch.sigmoid(g) * a * b, dim=1))
                return torch.autograd.grad(y, xs, grad)

        gdr.register_autograd(backward, setup_context=setup_context)

        # Called through torch.ops, as engines call theirs: calling the
        # CustomOpDef itself runs its Python body without the dispatcher's
        # record, so the profiler showed only its aten ops (torch 2.15).
        _OPS["gdr"] = torch.ops.family.fused_recurrent_gated_delta_rule
    return _OPS["gdr"]


def build(d, torch):
    """The model of a description (torch modules)."""
    nn = torch.nn
    F = torch.nn.functional
    H, heads = d["hidden"], d["heads"]
    hd = H // heads
    fp8 = getattr(torch, "float8_e4m3fn", None)

    class Attention(nn.Module):
        def __init__(self, window=None, indexer=False):
            super().__init__()
            self.qkv = nn.Linear(H, 3 * H, bias=False)
            self.o = nn.Linear(H, H, bias=False)
            self.window = window
            self.indexer = nn.Linear(H, heads, bias=False) if indexer else None
            kv = torch.zeros(2, d["pool"], heads, hd)
            self.register_buffer("kv", kv.to(fp8) if fp8 is not None else kv)

        def forward(self, x, pos):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(H, dim=-1)
            q = q.view(b, t, heads, hd).transpose(1, 2)
            # The story's cast: the whole FP8 pool to BF16 on every call.
            cache = self.kv.to(torch.bfloat16).float()
            n = pos + t
            keys = torch.cat([cache[0, :pos], k.view(t, heads, hd)], 0)
            vals = torch.cat([cache[1, :pos], v.view(t, heads, hd)], 0)
            if self.indexer is not None:
                # DSA: score the cached positions, keep the top k.
                scores = self.indexer(x).mean(-1).squeeze(0)
                idx = torch.topk(keys.mean((1, 2)), min(32, n)).indices
                keys, vals = keys[idx], vals[idx]
                _ = scores
            if self.window is not None:
                keys, vals = keys[-self.window:], vals[-self.window:]
            keys = keys.transpose(0, 1).unsqueeze(0)
            vals = vals.transpose(0, 1).unsqueeze(0)
            y = F.scaled_dot_product_attention(q, keys, vals, is_causal=False)
            return self.o(y.transpose(1, 2).reshape(b, t, H))

    recurrence = gated_delta_rule(torch)

    class LinearMixer(nn.Module):
        """A gated linear recurrence (Gated-DeltaNet-like), no KV cache: its
        core is one custom op, as serving engines register theirs
        (vLLM's and FLA's `fused_recurrent_gated_delta_rule`)."""

        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(H, 3 * H, bias=False)
            self.out = nn.Linear(H, H, bias=False)

        def forward(self, x, pos):
            a, b, g = self.inp(x).chunk(3, dim=-1)
            return self.out(recurrence(a, b, g))

    class Mlp(nn.Module):
        def __init__(self, unfused=False):
            super().__init__()
            self.unfused = unfused
            if unfused:
                self.gate = nn.Linear(H, 2 * H, bias=False)
                self.up = nn.Linear(H, 2 * H, bias=False)
            else:
                self.gate_up = nn.Linear(H, 4 * H, bias=False)
            self.down = nn.Linear(2 * H, H, bias=False)

        def forward(self, x):
            if self.unfused:
                return self.down(F.silu(self.gate(x)) * self.up(x))
            g, u = self.gate_up(x).chunk(2, dim=-1)
            return self.down(F.silu(g) * u)

    class Moe(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(H, d["experts"], bias=False)
            self.experts = nn.ModuleList([Mlp() for _ in range(d["experts"])])

        def forward(self, x):
            flat = x.reshape(-1, H)
            weights = torch.softmax(self.router(flat), -1)
            w, idx = torch.topk(weights, d["topk"], dim=-1)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                rows = (idx == e).any(-1).nonzero().flatten()
                if rows.numel() == 0:
                    continue
                picked = flat.index_select(0, rows)
                out.index_add_(0, rows, expert(picked))
            return out.view_as(x)

    class Layer(nn.Module):
        def __init__(self, i, kind):
            super().__init__()
            self.n1 = nn.RMSNorm(H)
            self.n2 = nn.RMSNorm(H)
            arch = d["arch"]
            if kind == "linear":
                self.mix = LinearMixer()
            elif arch == "local_global":
                self.mix = Attention(window=None if i % 2 else 16)
            else:
                self.mix = Attention(indexer=arch == "dsa")
            self.ffn = Moe() if kind == "moe" else Mlp(unfused=arch == "unfused")

        def forward(self, x, pos):
            x = x + self.mix(self.n1(x), pos)
            return x + self.ffn(self.n2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, H)
            self.layers = nn.ModuleList(
                [Layer(i, k) for i, k in enumerate(layer_kinds(d))]
            )
            self.norm = nn.RMSNorm(H)
            self.head = nn.Linear(H, 1000, bias=False)

        def forward(self, tokens, pos):
            x = self.emb(tokens)
            for layer in self.layers:
                x = layer(x, pos)
            return self.head(self.norm(x))

    return Model()


def compress(path):
    """Writes `path` as `path.zst` and removes it: zstd -19, 38% smaller
    than gzip -9 on these traces (the committed captures' bound is 30 MB),
    read as users' `.json.zst` uploads are."""
    subprocess.run(["zstd", "-19", "-q", "-f", "--rm", path, "-o", path + ".zst"], check=True)


def write_key_averages(path, events):
    """torch's key_averages() as the tests read it: a row per key, calls,
    self and total CPU and device microseconds (`hf.py` writes the same)."""
    rows = [
        {
            "name": e.key,
            "calls": e.count,
            "self_cpu_us": e.self_cpu_time_total,
            "cpu_us": e.cpu_time_total,
            "self_device_us": getattr(e, "self_device_time_total", 0.0),
            "device_us": getattr(e, "device_time_total", 0.0),
        }
        for e in events
    ]
    with open(path, "w") as f:
        json.dump(rows, f, indent=0)


def capture(d, out_dir, torch, device="cpu"):
    """Runs one capture and writes its three files."""
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(7)
    model = build(d, torch).to(device)
    mode = d["mode"]
    acts = [ProfilerActivity.CPU]
    if device != "cpu":
        acts.append(ProfilerActivity.CUDA)
    step_kinds = []
    ctx = d["ctx"]

    def sync():
        if device != "cpu":
            torch.cuda.synchronize()

    fwd = model
    if mode in ("compile", "compile_ro"):
        fwd = torch.compile(model, mode="reduce-overhead" if mode == "compile_ro" else None)
    if mode == "train":
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def one(pos, tokens):
        if mode == "train":
            opt.zero_grad()
            loss = fwd(tokens, pos).float().pow(2).mean()
            loss.backward()
            opt.step()
        else:
            with torch.no_grad():
                fwd(tokens, pos)

    tok = lambda n: torch.randint(0, 1000, (1, n), device=device)
    if mode == "graph":
        # One decode step captured as a CUDA graph, replayed each step (the
        # position is the captured one: a graph is static).
        static = tok(1)
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(2):
                model(static, ctx)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad(), torch.cuda.graph(graph):
            model(static, ctx)

        def one(pos, tokens):
            graph.replay()

    # Warm-up outside the profile (compilation, allocator): three positions,
    # so torch.compile has made its dynamic-length graph before the
    # profile opens (a recompile inside it writes gigabytes of trace).
    for w in range(3):
        one(ctx - 3 + w, tok(1))
    sync()
    opts = dict(
        activities=acts,
        record_shapes=True,
        with_stack=d["with_stack"],
        profile_memory=d["profile_memory"],
        with_flops=True,
    )
    name = d["name"]
    path = os.path.join(out_dir, name + ".json")
    done = {}

    def ready(p):
        # The trace and torch's own table, from the profile that ran.
        p.export_chrome_trace(path)
        done["events"] = p.key_averages()

    if mode == "engine":
        # An engine loop: execute_model per step, a prefill, then decodes,
        # a sync per step; no ProfilerStep.
        with profile(**opts) as prof:
            for k in range(d["steps"]):
                with record_function("execute_model"):
                    if k == 0:
                        one(0, tok(ctx * 8))
                        step_kinds.append("prefill")
                    else:
                        one(ctx + k, tok(1))
                        step_kinds.append("decode")
                    sync()
        ready(prof)
    else:
        plan = schedule(wait=0, warmup=1, active=d["steps"], repeat=1)
        with profile(schedule=plan, on_trace_ready=ready, **opts) as prof:
            for k in range(d["steps"] + 1):
                one(ctx + k, tok(1))
                sync()
                prof.step()
        step_kinds = ["decode" if mode != "train" else "train"] * d["steps"]
    compress(path)
    write_key_averages(os.path.join(out_dir, name + ".key_averages.json"), done["events"])
    kinds = layer_kinds(d)
    attention = sum(1 for k in kinds if k != "linear")
    truth = {
        "name": name,
        "arch": d["arch"],
        "mode": mode,
        "layers": d["layers"],
        "layer_kinds": kinds,
        "steps": d["steps"],
        "step_kinds": step_kinds,
        # The FP8 -> BF16 cast of every attention layer, once a step (not
        # in the backward pass: the cache is a buffer). Under
        # torch.compile it is fused into a generated kernel: no op of its own.
        "casts_per_step": None if mode.startswith("compile") else attention,
        "profiler_step": mode != "engine",
        "with_stack": d["with_stack"],
        "profile_memory": d["profile_memory"],
        "torch": torch.__version__,
        "device": "cpu" if device == "cpu" else torch.cuda.get_device_name(),
    }
    with open(os.path.join(out_dir, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--out", default="captures")
    ap.add_argument("--only", help="capture only names containing this")
    ap.add_argument("--list", action="store_true", help="print the family, capture nothing")
    ap.add_argument("--gpu", action="store_true", help="capture the GPU modes on cuda:0 too")
    a = ap.parse_args()
    family = draw(a.seed, gpu=a.gpu)
    if a.only:
        family = [d for d in family if a.only in d["name"]]
    if a.list:
        for d in family:
            print(json.dumps(d))
        return
    import torch

    os.makedirs(a.out, exist_ok=True)
    failed = []
    for d in family:
        device = "cuda" if d["mode"] in MODES_GPU else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            continue
        try:
            print("capturing", d["name"], file=sys.stderr, flush=True)
            capture(d, a.out, torch, device)
        except Exception as e:  # a mode this torch cannot run: say so, go on
            failed.append("%s: %s: %s" % (d["name"], type(e).__name__, e))
    for f in failed:
        print("not captured:", f, file=sys.stderr)


if __name__ == "__main__":
    main()
