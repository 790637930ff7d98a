//! `kinetoscope generate`: writes a generated decode trace.

use clap::Args;
use kinetoscope_generate::{
    write_decode_trace, Attention, DecodeParams, LinearMixer, Mode, Variant,
};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `generate`.
#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    /// Profiled steps.
    #[arg(long, default_value_t = 30)]
    pub steps: u32,
    /// Transformer layers.
    #[arg(long, default_value_t = 78)]
    pub layers: u32,
    /// `baseline` (casts the whole FP8 KV cache per layer) or `gather-cast`.
    #[arg(long, default_value = "baseline")]
    pub variant: Variant,
    /// Layers that are dense (an MLP) before the MoE ones.
    #[arg(long, default_value_t = 3)]
    pub dense_layers: u32,
    /// `eager`, `graph` (one CUDA graph replay per step) or `piecewise`
    /// (graph replays with eager attention between them).
    #[arg(long, default_value = "eager")]
    pub mode: Mode,
    /// Add Python frames (`with_stack=True`).
    #[arg(long, conflicts_with = "no_stack")]
    pub with_stack: bool,
    /// Leave out Python frames (`with_stack=False`): the default.
    #[arg(long)]
    pub no_stack: bool,
    /// Mark each layer with a `model.layers.N` annotation.
    #[arg(long)]
    pub layer_annotations: bool,
    /// After the dense prefix, every Nth layer is MoE (1: all, 2: every
    /// second as Llama 4 Maverick, 0: a dense model).
    #[arg(long, default_value_t = 1)]
    pub moe_every: u32,
    /// Every Nth layer has full attention; the others run a linear mixer
    /// with no KV cache (4: Qwen3-Next, 8: Jamba).
    #[arg(long, default_value_t = 1)]
    pub attention_every: u32,
    /// Every Nth attention layer is global, the rest sliding-window (6: Gemma).
    #[arg(long, default_value_t = 0)]
    pub global_every: u32,
    /// Run the dense MLP's gate and up projections as two GEMMs.
    #[arg(long)]
    pub unfused_mlp: bool,
    /// Attention kernels: `mla-flash`, `paged` or `triton`.
    #[arg(long, default_value = "mla-flash")]
    pub attention: Attention,
    /// The linear layers' mixer: `gated-delta` or `mamba`.
    #[arg(long, default_value = "gated-delta")]
    pub linear_mixer: LinearMixer,
    /// Draw a random architecture from this seed (the property tests'
    /// family) instead of the options above; prints its truth.
    #[arg(long, value_name = "SEED")]
    pub random_architecture: Option<u64>,
    /// Write `[memory]` events (`profile_memory=True`): each cast allocates
    /// its output, freed at its layer's end.
    #[arg(long)]
    pub memory: bool,
    /// Write CUPTI PM-sampling counters (`DRAM Throughput`, `SM Active`) in
    /// a `GPU 0 Counters` process.
    #[arg(long)]
    pub counters: bool,
    /// Output file; `.zst` and `.gz` are compressed; `-` is standard output.
    #[arg(short, long, default_value = "-")]
    pub output: PathBuf,
}

/// Runs `generate`.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let p = match args.random_architecture {
        Some(seed) => DecodeParams {
            variant: args.variant,
            mode: args.mode,
            with_stack: args.with_stack,
            memory: args.memory,
            counters: args.counters,
            ..DecodeParams::random_architecture(seed)
        },
        None => DecodeParams {
            steps: args.steps,
            layers: args.layers,
            variant: args.variant,
            dense_layers: args.dense_layers,
            mode: args.mode,
            with_stack: args.with_stack,
            layer_annotations: args.layer_annotations,
            moe_every: args.moe_every,
            attention_every: args.attention_every,
            global_every: args.global_every,
            unfused_mlp: args.unfused_mlp,
            attention: args.attention,
            linear_mixer: args.linear_mixer,
            memory: args.memory,
            counters: args.counters,
            ..Default::default()
        },
    };
    let path = args.output.to_string_lossy().to_string();
    let truth = if path == "-" {
        let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        write_decode_trace(&p, out)?
    } else {
        let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&args.output)?);
        if path.ends_with(".zst") {
            let mut enc = zstd::stream::write::Encoder::new(file, 3)?;
            let t = write_decode_trace(&p, &mut enc)?;
            enc.finish()?.flush()?;
            t
        } else if path.ends_with(".gz") {
            let mut enc = flate2_encoder(file);
            let t = write_decode_trace(&p, &mut enc)?;
            enc.finish()?.flush()?;
            t
        } else {
            let mut f = file;
            let t = write_decode_trace(&p, &mut f)?;
            f.flush()?;
            t
        }
    };
    eprintln!(
        "{} events, {:.1} MB of JSON; {} steps, mean {:.1} ms; cast {:.1}% of GPU time, {} calls, {:.0} MB per call",
        truth.events,
        truth.json_bytes as f64 / 1e6,
        truth.step_us.len(),
        truth.mean_step_us() / 1e3,
        truth.cast_pct(),
        truth.cast_calls,
        truth.cast_bytes_per_call as f64 / 1e6
    );
    let kinds: Vec<&str> = truth.layer_kinds.iter().map(|k| k.as_str()).collect();
    eprintln!(
        "{} layers ({}); {} casts per step",
        truth.layers,
        kinds.join(" "),
        truth.casts_per_step
    );
    Ok(())
}

fn flate2_encoder<W: Write>(w: W) -> kinetoscope_trace::import::input::GzEncoder<W> {
    kinetoscope_trace::import::input::GzEncoder::new(
        w,
        kinetoscope_trace::import::input::GzLevel::default(),
    )
}
