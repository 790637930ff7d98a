"""Real torch.profiler captures of diffusion pipelines (`diffusers`).

A text-to-image pipeline runs, in one call: its text encoders (CLIP
towers, layers of their own), then its denoiser once a denoising step (a
DiT: the same blocks every time), then its VAE's decoder. Profiled as a
user profiles one generation, the denoiser's calls are the passes, its
blocks the layers, and the text towers and the VAE run once, around them.
Tiny random configurations of `diffusers`' and `transformers`' own model
classes, built from their config (nothing downloaded), on the CPU. Made
after `tracelens-mi300x-xdit-sd3.5-infer` (xDiT's SD3.5 on an MI300X)
came out with 0 layers (2026-12-07).

For each capture NAME, into the output folder (as `capture.py` writes):

  NAME.json.zst          the Chrome trace torch wrote (zstd -19)
  NAME.key_averages.json torch's key_averages()
  NAME.truth.json        layers (the denoiser's blocks), their kinds, the
                         steps (the denoising steps) and their kinds

Modes: `marked` (one ProfilerStep around the whole generation, as xDiT
writes it), `compiled` (`marked` with the denoiser under `torch.compile`,
run twice before the profile) and `generate` (the generation profiled
whole, without step marks). Remade by `make captures-hf`, beside
`hf.py`'s, into `worker/trace/tests/captures/hf/`;
`worker/trace/tests/it/captures.rs` (`hugging_face_models_hold`) checks
them without torch, and the margin test with them.
"""

import os

from hf import arguments, write

# Denoising steps of a generation: the denoiser's calls.
STEPS = 4
# Latent height and width (the image is 4x as large a side).
LATENT = 16
# Text tokens a prompt holds.
TEXT = 16


def clip(T, layers, hidden):
    """A small CLIP text tower with a projection, as SD3's two are."""
    return T.CLIPTextModelWithProjection(
        T.CLIPTextConfig(
            vocab_size=1000,
            hidden_size=hidden,
            intermediate_size=hidden * 2,
            num_hidden_layers=layers,
            num_attention_heads=4,
            projection_dim=hidden,
            max_position_embeddings=TEXT,
        )
    )


# The small shape every DiT here shares: 4 heads of 8, 4 latent channels
# in, patches of 2x2 over the latent.
SMALL_DIT = dict(
    num_attention_heads=4,
    attention_head_dim=8,
    in_channels=4,
    sample_size=LATENT,
    patch_size=2,
)


def sd3(D, layers):
    """SD3's MMDiT: joint blocks over the image and the text streams; the
    last block updates the image stream alone (`context_pre_only`)."""
    return D.SD3Transformer2DModel(
        **SMALL_DIT,
        num_layers=layers,
        joint_attention_dim=32,
        caption_projection_dim=32,
        pooled_projection_dim=64,
        out_channels=4,
        pos_embed_max_size=LATENT,
    )


def pixart(D, layers):
    """PixArt-alpha's DiT: self-attention, cross-attention to the text and
    an MLP a block, AdaLN-single conditioning."""
    return D.PixArtTransformer2DModel(
        **SMALL_DIT,
        out_channels=4,
        num_layers=layers,
        cross_attention_dim=32,
        caption_channels=32,
    )


def flux(D, double, single):
    """FLUX.1's DiT: `double` joint blocks (an image and a text stream, as
    SD3's), then `single` blocks over both streams as one (attention and
    MLP side by side, one output projection)."""
    return D.FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=double,
        num_single_layers=single,
        attention_head_dim=8,
        num_attention_heads=4,
        joint_attention_dim=32,
        pooled_projection_dim=64,
        axes_dims_rope=(2, 2, 4),
    )


def dit(D, layers):
    """DiT (Peebles and Xie): a class-conditional DiT, no text; AdaLN-zero
    blocks of self-attention and an MLP."""
    return D.DiTTransformer2DModel(
        **SMALL_DIT,
        out_channels=8,
        num_layers=layers,
        norm_num_groups=4,
    )


def vae(D):
    """A small VAE; only its decoder runs."""
    return D.AutoencoderKL(
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4,
        norm_num_groups=4,
    )


def models(D):
    """(name, denoiser kind, blocks (a list: FLUX's double, then single
    blocks), modes)."""
    return [
        ("sd3-6l", "sd3", [6], ["marked", "compiled", "generate"]),
        ("pixart-5l", "pixart", [5], ["marked", "generate"]),
        ("flux-2d4s", "flux", [2, 4], ["marked", "generate"]),
        ("dit-6l", "dit", [6], ["marked"]),
    ]


def denoiser_call(torch, kind, denoiser, text, pooled):
    """The denoiser's call on latents `x` (as many as the text's batch) at
    timestep `t`: its velocity, shaped as `x`."""
    if kind == "sd3":
        return lambda x, t: denoiser(
            hidden_states=x,
            encoder_hidden_states=text,
            pooled_projections=pooled,
            timestep=t,
        ).sample
    if kind == "dit":
        # The class to draw, and the null class (guidance's other half).
        labels = torch.tensor([3, 1000])
        return lambda x, t: denoiser(x, timestep=t, class_labels=labels).sample[:, :4]
    if kind == "pixart":
        return lambda x, t: denoiser(
            x,
            encoder_hidden_states=text,
            timestep=t,
            added_cond_kwargs={"resolution": None, "aspect_ratio": None},
        ).sample
    # FLUX packs 2x2 latent patches into tokens, with their positions.
    b, side = text.shape[0], LATENT // 2
    img_ids = torch.zeros(side, side, 3)
    img_ids[..., 1] = torch.arange(side)[:, None]
    img_ids[..., 2] = torch.arange(side)[None, :]
    img_ids = img_ids.reshape(-1, 3)
    txt_ids = torch.zeros(TEXT, 3)

    def call(x, t):
        packed = x.reshape(b, 4, side, 2, side, 2).permute(0, 2, 4, 1, 3, 5)
        packed = packed.reshape(b, side * side, 16)
        out = denoiser(
            hidden_states=packed,
            encoder_hidden_states=text,
            pooled_projections=pooled,
            timestep=t / 1000,
            img_ids=img_ids,
            txt_ids=txt_ids,
        ).sample
        out = out.reshape(b, side, side, 4, 2, 2).permute(0, 3, 1, 4, 2, 5)
        return out.reshape(b, 4, LATENT, LATENT)

    return call


def pipeline(torch, T, D, kind, blocks):
    """One generation's function: text towers, the denoising loop (a flow
    matching Euler scheduler; classifier-free guidance as a batch of two,
    but for FLUX, distilled to one), then the VAE's decoder."""
    towers = [clip(T, 2, 32).eval(), clip(T, 3, 32).eval()]
    make = {"sd3": sd3, "pixart": pixart, "flux": flux, "dit": dit}[kind]
    denoiser = make(D, *blocks).eval()
    decoder = vae(D).eval()
    scheduler = D.FlowMatchEulerDiscreteScheduler()
    guided = kind != "flux"
    ids = torch.randint(1, 1000, (2 if guided else 1, TEXT))

    def generate():
        with torch.no_grad():
            # DiT draws a class: no text towers.
            outs = [t(input_ids=ids) for t in towers] if kind != "dit" else []
            text = outs[0].last_hidden_state if outs else None
            pooled = torch.cat([o.text_embeds for o in outs], dim=-1) if outs else None
            call = denoiser_call(torch, kind, denoiser, text, pooled)
            latents = torch.randn(1, 4, LATENT, LATENT)
            scheduler.set_timesteps(STEPS)
            for t in scheduler.timesteps:
                if guided:
                    cond, uncond = call(torch.cat([latents] * 2), t.expand(2)).chunk(2)
                    v = uncond + 4.5 * (cond - uncond)
                else:
                    v = call(latents, t.expand(1))
                latents = scheduler.step(v, t, latents).prev_sample
            return decoder.decode(latents / decoder.config.scaling_factor).sample

    return denoiser, generate


def capture(torch, T, D, out, name, kind, blocks, mode):
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    denoiser, generate = pipeline(torch, T, D, kind, blocks)
    if mode == "compiled":
        torch._dynamo.reset()  # no earlier model's compiled code or limits
        denoiser.forward = torch.compile(denoiser.forward)
    generate()  # warm: no profiled pass compiles
    full = f"{name}-{mode}"
    path = os.path.join(out, full + ".json")
    opts = dict(activities=[ProfilerActivity.CPU], record_shapes=True)
    if mode == "generate":
        generate()
        with profile(**opts) as p:
            generate()
        events = p.key_averages()
        p.export_chrome_trace(path)
    else:
        # One generation a step, as a schedule marks it (ProfilerStep#N).
        done = {}

        def ready(p):
            p.export_chrome_trace(path)
            done["events"] = p.key_averages()

        plan = schedule(wait=0, warmup=1, active=1, repeat=1)
        with profile(schedule=plan, on_trace_ready=ready, **opts) as p:
            for _ in range(2):
                generate()
                p.step()
        events = done["events"]
    truth = {
        "name": full,
        "model": type(denoiser).__name__,
        "mode": "generate" if mode == "generate" else "marked",
        "layers": sum(blocks),
        "layer_kinds": ["dense"] * sum(blocks),
        "steps": STEPS,
        "step_kinds": ["denoise"] * STEPS,
        "prompt_tokens": None,
        "casts_per_step": None,
        "profiler_step": mode != "generate",
        "torch": torch.__version__,
        "diffusers": D.__version__,
        "transformers": T.__version__,
        "device": "cpu",
    }
    write(out, full, path, events, truth)


def main():
    args = arguments(__doc__)
    import diffusers as D
    import torch
    import transformers as T

    for name, kind, blocks, modes in models(D):
        if args.only and name not in args.only:
            continue
        for mode in modes:
            capture(torch, T, D, args.out, name, kind, blocks, mode)
            print("captured", f"{name}-{mode}", flush=True)


if __name__ == "__main__":
    main()
