//! `kinetoscope generate`: writes a generated decode trace.

use clap::Args;
use kinetoscope_trace::generate::{write_decode_trace, DecodeParams, Mode, Variant};
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
    /// Output file; `.zst` and `.gz` are compressed; `-` is standard output.
    #[arg(short, long, default_value = "-")]
    pub output: PathBuf,
}

/// Runs `generate`.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let p = DecodeParams {
        steps: args.steps,
        layers: args.layers,
        variant: args.variant,
        dense_layers: args.dense_layers,
        mode: args.mode,
        with_stack: args.with_stack,
        layer_annotations: args.layer_annotations,
        ..Default::default()
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
    Ok(())
}

fn flate2_encoder<W: Write>(w: W) -> kinetoscope_trace::import::input::GzEncoder<W> {
    kinetoscope_trace::import::input::GzEncoder::new(
        w,
        kinetoscope_trace::import::input::GzLevel::default(),
    )
}
