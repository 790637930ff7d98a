//! A generator of decode traces shaped like the founding story's: N steps of
//! an L-layer MoE LLM (the first layers dense, the rest MoE, as GLM-5 and
//! DeepSeek-V3 are built) served with tensor parallelism, written the way
//! Kineto writes them (native spacing, 3-decimal timestamps relative to
//! `baseTimeNanoseconds`, CPU ops first, then Python frames, then GPU ops
//! each followed by its flow end, launch and flow start).
//!
//! The default is what a real eager decode capture with `with_stack=False`,
//! `record_shapes=True` and `with_flops=True` holds: no Python frames, and
//! about 600 events per layer per step (some 240 ops, 100 runtime calls and
//! 80 kernels, plus their launch flows). `aten::copy_` runs about ten times
//! per layer: the FP8 -> BF16 KV-cache cast is one of them, and it shares
//! its kernel's full name with every other cast to BF16; only its grid, its
//! duration and its op's input dims and dtypes set it apart. The baseline
//! casts the whole FP8 KV cache to BF16 in every layer (~0.83 ms, ~857 MB
//! per call); the `gather-cast` variant gathers the active rows first and
//! casts only those.
//!
//! Modes: `eager` (every kernel launched by its op), `graph` (one CUDA graph
//! replay per step runs the whole model), `piecewise` (graph replays with
//! eager attention between them, as vLLM runs by default). Graph modes write
//! the engine's own Python frames (model runner `execute_model`, graph
//! replay), and no `ProfilerStep`, as serving engines do.
//!
//! The default (30 steps x 78 layers) gives ~490 MB of JSON and ~1.4 M events.
//! Generation is deterministic: the same parameters give the same bytes.
//! The file is written in three passes over the same simulation (one per
//! section of the file), so memory stays small however long the trace is.

use std::fmt::Write as _;
use std::io::{self, Write};

/// Which version of the model code the trace shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Casts the whole FP8 KV cache to BF16 in every layer.
    Baseline,
    /// Gathers the active KV rows, then casts only those.
    GatherCast,
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "baseline" => Ok(Variant::Baseline),
            "gather-cast" | "gather-then-cast" | "patch" => Ok(Variant::GatherCast),
            other => Err(format!(
                "unknown variant {other:?}: use baseline or gather-cast"
            )),
        }
    }
}

/// How the model's kernels are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every kernel launched by its op (`ProfilerStep#N` marks steps).
    Eager,
    /// One CUDA graph replay per step runs every layer.
    Graph,
    /// Graph replays with the attention run eagerly between them.
    Piecewise,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "eager" => Ok(Mode::Eager),
            "graph" | "full-graph" => Ok(Mode::Graph),
            "piecewise" => Ok(Mode::Piecewise),
            other => Err(format!(
                "unknown mode {other:?}: use eager, graph or piecewise"
            )),
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct DecodeParams {
    /// Steps.
    pub steps: u32,
    /// Layers.
    pub layers: u32,
    /// The first layers are dense (an MLP); the rest are MoE.
    pub dense_layers: u32,
    /// Variant.
    pub variant: Variant,
    /// Mode.
    pub mode: Mode,
    /// Emit Python frames (`with_stack=True`), including `nn.Module` frames.
    pub with_stack: bool,
    /// Emit a `layers.N` record_function annotation around each layer.
    pub layer_annotations: bool,
    /// Seed.
    pub seed: u64,
    /// After the dense prefix, every `moe_every`-th layer is MoE (layer `l`
    /// when `(l + 1) % moe_every == 0`; 1: all of them, 2: every second as
    /// Llama 4 Maverick, 0: none, a dense model).
    pub moe_every: u32,
    /// Every `attention_every`-th layer has full attention (layer `l` when
    /// `(l + 1) % attention_every == 0`); the others run a linear mixer with
    /// no KV cache, as Qwen3-Next (4) or Jamba (8). 1: every layer.
    pub attention_every: u32,
    /// Among attention layers, every `global_every`-th attends globally and
    /// the rest through a sliding window, as Gemma (6). 0 or 1: all global.
    pub global_every: u32,
    /// The dense MLP's gate and up projections run as two GEMMs.
    pub unfused_mlp: bool,
    /// The attention kernels.
    pub attention: Attention,
    /// The linear layers' mixer.
    pub linear_mixer: LinearMixer,
    /// The layers' norms run as Inductor kernels (`triton_red_fused_...`),
    /// whose names do not say "norm".
    pub compiled_norms: bool,
    /// `profile_memory=True`: every cast allocates its output (the KV
    /// pool's BF16 copy: 570 MB) and the layer frees it at its end, as
    /// `[memory]` events with the device's totals.
    pub memory: bool,
    /// CUPTI PM sampling: `DRAM Throughput` and `SM Active` (%) sampled
    /// every [`PM_PERIOD_US`] in a `GPU 0 Counters` process, as counter
    /// events: [`PM_CAST`] while a cast runs, [`PM_BUSY`] during other
    /// kernels, [`PM_IDLE`] between them.
    pub counters: bool,
}

/// PM sampling's period, µs.
pub const PM_PERIOD_US: f64 = 20.0;
/// (DRAM Throughput %, SM Active %) while the cast kernel runs.
pub const PM_CAST: (f64, f64) = (86.0, 24.0);
/// ... while any other kernel runs.
pub const PM_BUSY: (f64, f64) = (31.0, 72.0);
/// ... while the GPU idles.
pub const PM_IDLE: (f64, f64) = (2.0, 0.0);
/// The counters process's pid.
const PM_PID: i64 = 1_000_000;

/// The attention implementation a layer's kernels come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    /// DeepSeek's MLA projections and FlashAttention's split-KV kernels.
    MlaFlash,
    /// Grouped-query projections and vLLM's paged-attention kernels.
    Paged,
    /// Grouped-query projections and a Triton kernel.
    Triton,
}

impl std::str::FromStr for Attention {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mla-flash" => Ok(Attention::MlaFlash),
            "paged" => Ok(Attention::Paged),
            "triton" => Ok(Attention::Triton),
            other => Err(format!(
                "unknown attention {other:?}: use mla-flash, paged or triton"
            )),
        }
    }
}

impl std::str::FromStr for LinearMixer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gated-delta" => Ok(LinearMixer::GatedDelta),
            "mamba" => Ok(LinearMixer::Mamba),
            other => Err(format!(
                "unknown linear mixer {other:?}: use gated-delta or mamba"
            )),
        }
    }
}

/// The mixer of a layer without attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearMixer {
    /// Gated DeltaNet (Qwen3-Next).
    GatedDelta,
    /// Mamba (Jamba).
    Mamba,
}

/// How one layer of the generated model mixes tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mixer {
    /// Attention over the whole KV cache.
    Global,
    /// Sliding-window attention: the same kernels over fewer keys.
    Local,
    /// A linear mixer: no KV cache, so no cast.
    Linear,
}

/// One layer of the generated model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerPlan {
    /// An MoE layer (else a dense MLP).
    pub moe: bool,
    /// Its mixer.
    pub mixer: Mixer,
}

impl LayerPlan {
    /// The kind the analysis should give it: `linear` for a layer without
    /// attention, else `moe` or `dense`.
    pub fn kind(self) -> kinetoscope_types::LayerKind {
        use kinetoscope_types::LayerKind;
        match (self.mixer, self.moe) {
            (Mixer::Linear, _) => LayerKind::Linear,
            (_, true) => LayerKind::Moe,
            (_, false) => LayerKind::Dense,
        }
    }
}

impl DecodeParams {
    /// The model's layers, first to last.
    pub fn plan(&self) -> Vec<LayerPlan> {
        (0..self.layers)
            .map(|l| {
                let every = |k: u32| k <= 1 || (l + 1) % k == 0;
                let moe = l >= self.dense_layers && self.moe_every > 0 && every(self.moe_every);
                let mixer = if !every(self.attention_every) {
                    Mixer::Linear
                } else if every(self.global_every) {
                    Mixer::Global
                } else {
                    Mixer::Local
                };
                LayerPlan { moe, mixer }
            })
            .collect()
    }

    /// A random architecture drawn from `seed`, small enough to analyze in
    /// a test (2-4 steps): plain dense models of 2 to 128 layers, dense
    /// prefixes before MoE (with fused or unfused MLPs), MoE interleaved
    /// with dense layers, hybrids whose every K-th layer has attention, and
    /// alternating local and global attention.
    pub fn random_architecture(seed: u64) -> DecodeParams {
        let mut rng = Rng(seed ^ 0x005E_ED0F_A4C4);
        let mut pick = |n: u64| rng.next() % n;
        let mut p = DecodeParams {
            steps: 2 + pick(3) as u32,
            seed,
            attention: [Attention::MlaFlash, Attention::Paged, Attention::Triton][pick(3) as usize],
            linear_mixer: [LinearMixer::GatedDelta, LinearMixer::Mamba][pick(2) as usize],
            unfused_mlp: pick(2) == 0,
            compiled_norms: pick(4) == 0,
            ..Default::default()
        };
        // Mostly shallow models, so that hundreds of them analyze quickly;
        // now and then a deep one.
        let depth = |pick: &mut dyn FnMut(u64) -> u64, lo: u32, hi: u32| {
            if pick(8) == 0 {
                lo + pick((hi - lo + 1) as u64) as u32
            } else {
                lo + pick(((hi - lo).min(30) + 1) as u64) as u32
            }
        };
        match pick(5) {
            0 => {
                // Plain dense.
                p.layers = depth(&mut pick, 2, 128);
                p.dense_layers = 0;
                p.moe_every = 0;
            }
            1 => {
                // A dense prefix, then MoE.
                p.layers = depth(&mut pick, 6, 80);
                p.dense_layers = 1 + pick(4) as u32;
                p.moe_every = 1;
            }
            2 => {
                // MoE interleaved with dense layers.
                p.layers = 2 * (2 + pick(24) as u32);
                p.dense_layers = pick(2) as u32;
                p.moe_every = 2;
            }
            3 => {
                // Hybrid: every K-th layer has attention.
                let k = 2 + pick(7) as u32;
                p.attention_every = k;
                p.layers = k * (2 + pick(8) as u32);
                p.dense_layers = 0;
                p.moe_every = pick(2) as u32;
            }
            _ => {
                // Local and global attention.
                let k = 2 + pick(5) as u32;
                p.global_every = k;
                p.layers = k * (1 + pick(6) as u32) + pick(k as u64) as u32;
                p.layers = p.layers.max(2);
                p.dense_layers = 0;
                p.moe_every = pick(3) as u32 % 2;
            }
        }
        p
    }
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams {
            steps: 30,
            layers: 78,
            dense_layers: 3,
            variant: Variant::Baseline,
            mode: Mode::Eager,
            with_stack: false,
            layer_annotations: false,
            seed: 1,
            moe_every: 1,
            attention_every: 1,
            global_every: 0,
            unfused_mlp: false,
            attention: Attention::MlaFlash,
            linear_mixer: LinearMixer::GatedDelta,
            compiled_norms: false,
            memory: false,
            counters: false,
        }
    }
}

/// What the generator put in the trace, accounted while generating (not by
/// the analyzer), for tests to compare with.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    /// Events.
    pub events: u64,
    /// JSON, bytes.
    pub json_bytes: u64,
    /// Duration of each step, µs (the `ProfilerStep` or, in graph modes,
    /// the model runner's `execute_model` frame).
    pub step_us: Vec<f64>,
    /// Device time of all GPU ops, µs.
    pub gpu_us: f64,
    /// Device time of the FP8 -> BF16 KV-cache casts, µs.
    pub cast_us: f64,
    /// Cast calls.
    pub cast_calls: u64,
    /// Bytes read plus written by one cast call.
    pub cast_bytes_per_call: u64,
    /// Launch grid of the cast kernel.
    pub cast_grid: [u32; 3],
    /// Calls of `aten::copy_`, casts included.
    pub copy_calls: u64,
    /// Device time of the gather kernels (patch only), µs.
    pub gather_us: f64,
    /// Kernels.
    pub kernels: u64,
    /// CPU ops and annotations.
    pub ops: u64,
    /// Runtime calls (launches and others).
    pub runtime_calls: u64,
    /// Layers.
    pub layers: u32,
    /// Dense layers.
    pub dense_layers: u32,
    /// Each layer's kind, first to last.
    pub layer_kinds: Vec<kinetoscope_types::LayerKind>,
    /// KV-cache casts per step: one per attention layer.
    pub casts_per_step: u32,
    /// Graph launches, and the device time of the GPU ops they ran, µs.
    pub replays: u64,
    /// Graph, µs.
    pub graph_us: f64,
    /// `memory`: bytes each cast of the KV cache allocates (its BF16 output).
    pub cast_alloc_bytes: u64,
    /// `memory`: bytes allocated and freed within a step, per step (every
    /// cast's output, freed at its layer's end).
    pub churn_bytes_per_step: f64,
    /// `memory`: the highest `Total Allocated` written.
    pub peak_allocated: i64,
    /// `counters`: samples written per counter.
    pub counter_samples: u64,
}

impl Truth {
    /// Mean step duration, µs.
    pub fn mean_step_us(&self) -> f64 {
        self.step_us.iter().sum::<f64>() / self.step_us.len().max(1) as f64
    }
    /// Share of GPU-op time spent in the cast, %.
    pub fn cast_pct(&self) -> f64 {
        100.0 * self.cast_us / self.gpu_us
    }
}

// ------------------------------------------------------------ the model

/// KV cache rows (tokens) in the pool, and active rows in the patch.
const POOL_TOKENS: u64 = 1_114_112;
const ACTIVE_TOKENS: u64 = 95_232;
const HEAD_DIM: u64 = 128;
const BATCH: u64 = 64;
const HIDDEN: u64 = 7168;
const EXPERTS: u64 = 256;
const TOP_K: u64 = 8;
/// The cast kernel's grid in the founding story's trace.
const CAST_GRID: [u32; 3] = [557_496, 1, 1];

const GATHER_KERNEL: &str = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Float8_e4m3fn, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::Float8_e4m3fn, unsigned int>, at::cuda::detail::TensorInfo<c10::Float8_e4m3fn const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)";
const GEMM_KERNEL: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
const GEMM_F32_KERNEL: &str = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
const ALLREDUCE_KERNEL: &str =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const RMS_NORM_KERNEL: &str = "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)";
const SILU_KERNEL: &str = "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)";

/// The kernel of `copy_` that converts to `to` (`c10::BFloat16`, `float`,
/// `int`, `bool`): one name per destination type, whatever the source.
fn cast_kernel(to: &str) -> String {
    let f = format!("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()() const::{{lambda()#12}}::operator()() const::{{lambda({to})#1}}");
    let rest = "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>";
    format!("void at::native::unrolled_elementwise_kernel<{f}, {rest} >(int, {f}, {rest})")
}

/// The kernel of a plain copy (same dtype on both sides).
fn copy_kernel(ty: &str) -> String {
    let f = format!("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()() const::{{lambda()#12}}::operator()() const::{{lambda({ty})#1}}");
    format!("void at::native::vectorized_elementwise_kernel<4, {f}, at::detail::Array<char*, 2> >(int, {f}, at::detail::Array<char*, 2>)")
}

/// An elementwise functor kernel (`mul`, `add`, `fill`, ...).
fn functor_kernel(functor: &str, ty: &str) -> String {
    format!("void at::native::vectorized_elementwise_kernel<4, at::native::{functor}<{ty}>, at::detail::Array<char*, 2> >(int, at::native::{functor}<{ty}>, at::detail::Array<char*, 2>)")
}

/// A kernel launch.
#[derive(Clone)]
struct Launch {
    api: &'static str,
    kernel: String,
    dur_us: f64,
    grid: [u32; 3],
    block: [u32; 3],
    /// What the truth accounts it as.
    role: Role,
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Other,
    Cast,
    Gather,
}

/// An op with its children and, optionally, the kernels it launches last.
#[derive(Clone)]
struct Op {
    name: &'static str,
    annotation: bool,
    shapes: String,
    types: String,
    /// `with_flops`: the op's floating-point operations.
    flops: Option<u64>,
    children: Vec<Op>,
    /// Kernels it launches itself, in order, after its children.
    launches: Vec<Launch>,
    /// Runtime calls it makes that launch nothing (`cudaStreamIsCapturing`, ...).
    calls: Vec<&'static str>,
    /// CPU time of its own work, µs.
    self_us: f64,
    /// Runs eagerly between piecewise graphs (attention).
    eager: bool,
    /// Called through a reshape of its input (`reshape -> view` first).
    plumbing: bool,
    /// `memory`: bytes it allocates when it starts (freed at the layer's
    /// end); 0: none.
    alloc: u64,
}

fn op(name: &'static str, shapes: &str, types: &str) -> Op {
    Op {
        name,
        annotation: false,
        shapes: shapes.into(),
        types: types.into(),
        flops: None,
        children: Vec::new(),
        launches: Vec::new(),
        calls: Vec::new(),
        self_us: 1.2,
        eager: false,
        plumbing: true,
        alloc: 0,
    }
}

fn launch(kernel: impl Into<String>, dur_us: f64, grid: [u32; 3], block: [u32; 3]) -> Launch {
    Launch {
        api: "cudaLaunchKernel",
        kernel: kernel.into(),
        dur_us,
        grid,
        block,
        role: Role::Other,
    }
}

impl Op {
    fn with(mut self, children: Vec<Op>) -> Op {
        self.children = children;
        self
    }
    fn launches(mut self, l: Launch) -> Op {
        self.launches.push(l);
        self
    }
    fn cpu(mut self, us: f64) -> Op {
        self.self_us = us;
        self
    }
    fn calling(mut self, api: &'static str) -> Op {
        self.calls.push(api);
        self
    }
    fn eager(mut self) -> Op {
        self.eager = true;
        self
    }
}

/// The op with the shape plumbing real calls do first (`reshape` -> `view`).
fn with_views(o: &Op) -> Op {
    let mut o = o.clone();
    if !o.plumbing {
        return o;
    }
    let first = serde_json::from_str::<Vec<serde_json::Value>>(&o.shapes)
        .ok()
        .and_then(|v| v.into_iter().next())
        .filter(|d| d.is_array())
        .unwrap_or_else(|| serde_json::json!([BATCH, HIDDEN]));
    let dims = format!(
        "[{}, []]",
        serde_json::to_string(&first)
            .unwrap_or_default()
            .replace(',', ", ")
    );
    o.children.insert(
        0,
        op("aten::reshape", &dims, r#"["c10::BFloat16", ""]"#).with(vec![op(
            "aten::view",
            &dims,
            r#"["c10::BFloat16", ""]"#,
        )]),
    );
    o
}

fn empty() -> Op {
    op(
        "aten::empty",
        "[[], [], [], [], [], []]",
        r#"["", "Scalar", "Scalar", "", "Scalar", ""]"#,
    )
    .cpu(0.6)
}

/// `aten::linear` as it decomposes on GPU, launching one GEMM.
fn linear(rows: u64, k: u64, out_features: u64, dur_us: f64) -> Op {
    let w = format!("[[{rows}, {k}], [{out_features}, {k}], []]");
    let mut mm = op(
        "aten::mm",
        &format!("[[{rows}, {k}], [{k}, {out_features}]]"),
        r#"["c10::BFloat16", "c10::BFloat16"]"#,
    )
    .cpu(3.0)
    .launches(launch(
        GEMM_KERNEL,
        dur_us,
        [(out_features / 128).max(1) as u32, 1, 1],
        [128, 1, 1],
    ));
    mm.flops = Some(2 * rows * k * out_features);
    op(
        "aten::linear",
        &w,
        r#"["c10::BFloat16", "c10::BFloat16", ""]"#,
    )
    .with(vec![
        op(
            "aten::t",
            &format!("[[{out_features}, {k}]]"),
            r#"["c10::BFloat16"]"#,
        )
        .with(vec![op(
            "aten::transpose",
            &format!("[[{out_features}, {k}], [], []]"),
            r#"["c10::BFloat16", "Scalar", "Scalar"]"#,
        )
        .with(vec![op(
            "aten::as_strided",
            &format!("[[{out_features}, {k}], [], [], []]"),
            r#"["c10::BFloat16", "", "", ""]"#,
        )])]),
        mm,
    ])
    .cpu(1.5)
}

fn all_reduce(dur_us: f64) -> Op {
    Op {
        annotation: true,
        ..op(
            "nccl:all_reduce",
            &format!("[[{BATCH}, {HIDDEN}]]"),
            r#"["c10::BFloat16"]"#,
        )
    }
    .with(vec![op(
        "record_param_comms",
        &format!("[[[{BATCH}, {HIDDEN}]]]"),
        r#"["TensorList"]"#,
    )
    .cpu(5.0)
    .calling("cudaEventRecord")
    .calling("cudaStreamWaitEvent")
    .launches(Launch {
        api: "cudaLaunchKernelExC",
        ..launch(ALLREDUCE_KERNEL, dur_us, [8, 1, 1], [512, 1, 1])
    })])
}

/// A custom (vLLM `_C`) op launching one kernel.
fn custom(name: &'static str, kernel: &str, dur_us: f64, shapes: &str) -> Op {
    op(
        name,
        shapes,
        r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar"]"#,
    )
    .with(vec![op("aten::empty_like", shapes, r#"["c10::BFloat16"]"#)
        .with(vec![op(
            "aten::empty_strided",
            "[[], [], [], [], [], []]",
            r#"["", "", "Scalar", "", "Scalar", ""]"#,
        )])])
    .cpu(2.5)
    .calling("cudaGetLastError")
    .launches(launch(kernel, dur_us, [BATCH as u32, 1, 1], [256, 1, 1]))
}

/// A dtype as the profiler writes it, and the name of its copy kernel's lambda.
fn torch_type(t: &str) -> (&'static str, &'static str) {
    match t {
        "bf16" => ("c10::BFloat16", "c10::BFloat16"),
        "f32" => ("float", "float"),
        "i32" => ("int", "int"),
        "i64" => ("long int", "long"),
        "bool" => ("bool", "bool"),
        "fp8" => ("c10::Float8_e4m3fn", "c10::Float8_e4m3fn"),
        _ => ("float", "float"),
    }
}

/// Elements of a tensor of dims `[2, 1114112, 1, 128]`.
fn numel(dims: &str) -> u64 {
    dims.trim_matches(['[', ']'])
        .split(',')
        .filter_map(|d| d.trim().parse::<u64>().ok())
        .product()
}

/// Bytes per element of a generator dtype.
fn type_bytes(t: &str) -> u64 {
    match t {
        "bf16" => 2,
        "f32" | "i32" => 4,
        "i64" => 8,
        _ => 1,
    }
}

/// `x.to(dtype)`: `aten::to -> aten::_to_copy -> aten::copy_`, launching
/// the cast kernel of the destination type (a plain copy kernel when the
/// types agree).
fn cast(dims: &str, from: &str, to: &str, dur_us: f64, grid: [u32; 3], role: Role) -> Op {
    let (src, _) = torch_type(from);
    let (dst, lambda) = torch_type(to);
    let kernel = if from == to {
        copy_kernel(lambda)
    } else {
        cast_kernel(lambda)
    };
    let mut o = op(
        "aten::to",
        &format!("[{dims}, [], [], [], [], []]"),
        &format!(r#"["{src}", "Scalar", "Scalar", "Scalar", "Scalar", ""]"#),
    )
    .with(vec![op(
        "aten::_to_copy",
        &format!("[{dims}, [], [], [], [], [], []]"),
        &format!(r#"["{src}", "Scalar", "", "", "", "Scalar", ""]"#),
    )
    .with(vec![
        Op {
            alloc: numel(dims) * type_bytes(to),
            ..op(
                "aten::empty_strided",
                "[[], [], [], [], [], []]",
                r#"["", "", "Scalar", "", "Scalar", ""]"#,
            )
            .cpu(0.6)
        },
        op(
            "aten::copy_",
            &format!("[{dims}, {dims}, []]"),
            &format!(r#"["{dst}", "{src}", "Scalar"]"#),
        )
        .cpu(3.0)
        .calling("cudaStreamIsCapturing")
        .launches(Launch {
            role,
            ..launch(kernel, dur_us, grid, [128, 1, 1])
        }),
    ])]);
    o.plumbing = false;
    o
}

/// `x.contiguous()`: `aten::contiguous -> aten::clone -> aten::copy_`.
fn contiguous(dims: &str, dur_us: f64) -> Op {
    op(
        "aten::contiguous",
        &format!("[{dims}, []]"),
        r#"["c10::BFloat16", ""]"#,
    )
    .with(vec![op(
        "aten::clone",
        &format!("[{dims}, []]"),
        r#"["c10::BFloat16", ""]"#,
    )
    .with(vec![
        op(
            "aten::empty_like",
            &format!("[{dims}, [], [], [], [], []]"),
            r#"["c10::BFloat16", "", "", "", "", ""]"#,
        )
        .cpu(0.6),
        op(
            "aten::copy_",
            &format!("[{dims}, {dims}, []]"),
            r#"["c10::BFloat16", "c10::BFloat16", "Scalar"]"#,
        )
        .cpu(2.5)
        .launches(launch(
            copy_kernel("c10::BFloat16"),
            dur_us,
            [448, 1, 1],
            [128, 1, 1],
        )),
    ])])
}

/// A small elementwise op (`aten::mul`, `aten::add`, ...) with its plumbing.
fn tiny(name: &'static str, functor: &str, dims: &str, dur_us: f64) -> Op {
    let mut o = op(
        name,
        &format!("[{dims}, {dims}]"),
        r#"["c10::BFloat16", "c10::BFloat16"]"#,
    )
    .cpu(0.9)
    .with(vec![op(
        "aten::view",
        &format!("[{dims}, []]"),
        r#"["c10::BFloat16", ""]"#,
    )
    .cpu(0.5)])
    .launches(launch(
        functor_kernel(functor, "c10::BFloat16"),
        dur_us,
        [56, 1, 1],
        [128, 1, 1],
    ));
    if matches!(
        name,
        "aten::mul" | "aten::add" | "aten::div" | "aten::mul_" | "aten::add_"
    ) {
        o.flops = Some(BATCH * HIDDEN);
    }
    o.plumbing = false;
    o
}

/// Ops whose kernels do little: the plumbing between the big kernels.
fn small_ops(n: usize, salt: usize) -> Vec<Op> {
    let kinds: [(&'static str, &str); 8] = [
        ("aten::mul", "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >"),
        ("aten::add", "CUDAFunctor_add"),
        ("aten::sigmoid", "sigmoid_kernel_cuda"),
        ("aten::fill_", "FillFunctor"),
        ("aten::div", "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::DivFunctor<float> >"),
        ("aten::neg", "neg_kernel_cuda"),
        ("aten::mul_", "CUDAFunctorOnSelf_mul"),
        ("aten::add_", "CUDAFunctorOnSelf_add"),
    ];
    (0..n)
        .map(|k| {
            let (name, functor) = kinds[(k + salt) % kinds.len()];
            let rows = [BATCH, 16, 1][(k + salt) % 3];
            tiny(
                name,
                functor,
                &format!("[{rows}, {}]", 128 * (1 + (k % 4))),
                1.1 + 0.1 * (k % 4) as f64,
            )
        })
        .collect()
}

fn gather(dur_us: f64) -> Op {
    let src = format!("[2, {POOL_TOKENS}, 1, {HEAD_DIM}]");
    op(
        "aten::index_select",
        &format!("[{src}, [], [{ACTIVE_TOKENS}]]"),
        r#"["c10::Float8_e4m3fn", "Scalar", "long int"]"#,
    )
    .with(vec![empty()])
    .cpu(4.0)
    .launches(Launch {
        role: Role::Gather,
        ..launch(GATHER_KERNEL, dur_us, [4096, 1, 1], [128, 4, 1])
    })
}

/// A layer's op groups, each with the Python module path it runs in.
type Groups = Vec<(&'static str, Vec<Op>)>;

/// The KV entries the batch's decode step `step` reads: one more per
/// request each step.
fn step_kv_tokens(step: u32) -> u64 {
    ACTIVE_TOKENS + BATCH * step as u64
}

/// The op groups of one layer of the plan's kind, in decode step `step`.
fn layer_groups(p: &DecodeParams, plan: LayerPlan, step: u32) -> Groups {
    let variant = p.variant;
    let moe = plan.moe;
    let act = format!("[[{BATCH}, {HIDDEN}], [{HIDDEN}], []]");
    let h = format!("[{BATCH}, {HIDDEN}]");
    let kv_dims = |tokens: u64| format!("[2, {tokens}, 1, {HEAD_DIM}]");
    // The attention backend takes the view of the cache the step reads: its
    // length grows with the sequence, one entry per request per step.
    let step_keys = op(
        "aten::slice",
        &format!(
            "[[2, {}, 1, {HEAD_DIM}], [], [], [], []]",
            step_kv_tokens(step)
        ),
        r#"["c10::BFloat16", "Scalar", "Scalar", "Scalar", "Scalar"]"#,
    )
    .cpu(0.8)
    .eager();
    let mut attention = vec![custom(
        "_C_cache_ops::reshape_and_cache_flash",
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long, long, long, long, int, int, int, float const*, float const*)",
        5.2,
        &format!("[[{BATCH}, 1, {HEAD_DIM}], [{BATCH}, 1, {HEAD_DIM}], [{POOL_TOKENS}, 1, {HEAD_DIM}], []]"),
    )];
    match variant {
        Variant::Baseline => attention.push(
            cast(
                &kv_dims(POOL_TOKENS),
                "fp8",
                "bf16",
                828.0,
                CAST_GRID,
                Role::Cast,
            )
            .eager(),
        ),
        Variant::GatherCast => {
            attention.push(gather(456.4).eager());
            attention.push(
                cast(
                    &kv_dims(ACTIVE_TOKENS),
                    "fp8",
                    "bf16",
                    24.4,
                    [47_616, 1, 1],
                    Role::Cast,
                )
                .eager(),
            );
        }
    }
    attention.push(
        cast(
            "[64, 1, 1, 2048]",
            "f32",
            "bool",
            1.5,
            [256, 1, 1],
            Role::Other,
        )
        .eager(),
    );
    // A sliding window reads fewer keys: the same kernels, a smaller grid.
    let (splits, scale) = if plan.mixer == Mixer::Local {
        (8, 0.3)
    } else {
        (64, 1.0)
    };
    attention.push(step_keys);
    attention.push(match p.attention {
        Attention::MlaFlash => op("vllm::unified_attention_with_output", &format!("[[{BATCH}, 16, {HEAD_DIM}], [], []]"), r#"["c10::BFloat16", "c10::BFloat16", ""]"#)
            .with(vec![
                op("aten::empty_like", &format!("[[{BATCH}, 16, {HEAD_DIM}]]"), r#"["c10::BFloat16"]"#).cpu(0.6),
                op("aten::view", &format!("[[{BATCH}, {}], []]", 16 * HEAD_DIM), r#"["c10::BFloat16", ""]"#).cpu(0.5),
                op("aten::fill_", &format!("[[{BATCH}, 16], []]"), r#"["float", "Scalar"]"#)
                    .launches(launch(functor_kernel("FillFunctor", "float"), 1.4, [8, 1, 1], [128, 1, 1])),
                op("_vllm_fa2_C::varlen_fwd", &format!("[[{BATCH}, 16, {HEAD_DIM}], [2, {POOL_TOKENS}, 1, {HEAD_DIM}], []]"), r#"["c10::BFloat16", "c10::BFloat16", ""]"#)
                    .cpu(5.0)
                    .with(vec![empty()])
                    .launches(launch("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)", 45.0 * scale, [1, 16, splits], [128, 1, 1]))
                    .launches(launch("void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 2, true>(Flash_fwd_params)", 4.1, [512, 1, 1], [128, 1, 1])),
            ])
            .cpu(2.5)
            .eager(),
        Attention::Paged => custom(
            "_C::paged_attention_v2",
            "void vllm::paged_attention_v2_kernel<__nv_bfloat16, unsigned char, 128, 16, 128, (vllm::Fp8KVCacheDataType)1, false, 512>(float*, float*, __nv_bfloat16*, __nv_bfloat16 const*, unsigned char const*, unsigned char const*, int, float, int const*, int const*, int, float const*, int, int, int, float const*, float const*, int, int, int)",
            38.0 * scale,
            &format!("[[{BATCH}, 16, {HEAD_DIM}], [{BATCH}, 16, {HEAD_DIM}], [{POOL_TOKENS}, 1, {HEAD_DIM}], []]"),
        )
        .launches(launch("void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, int const*, int)", 3.2, [16, BATCH as u32, 1], [128, 1, 1]))
        .eager(),
        Attention::Triton => custom(
            "vllm::unified_attention",
            "kernel_unified_attention_2d",
            41.0 * scale,
            &format!("[[{BATCH}, 16, {HEAD_DIM}], [2, {POOL_TOKENS}, 1, {HEAD_DIM}], []]"),
        )
        .eager(),
    });
    let mut groups = vec![(
        "vllm/model_executor/layers/layernorm.py(184): forward_cuda",
        vec![
            cast(&h, "bf16", "f32", 2.1, [448, 1, 1], Role::Other),
            norm(p, false, 6.1, &act),
            cast(&h, "f32", "bf16", 2.0, [448, 1, 1], Role::Other),
        ],
    )];
    match (plan.mixer, p.attention) {
        (Mixer::Linear, _) => groups.push((
            "vllm/model_executor/layers/mamba/mixer.py(412): forward_cuda",
            linear_mixer(p.linear_mixer),
        )),
        (_, Attention::MlaFlash) => {
            groups.push((
                "vllm/model_executor/layers/mla.py(152): forward",
                vec![
                    linear(BATCH, HIDDEN, 1536, 12.5),
                    custom(
                        "_C::rms_norm",
                        RMS_NORM_KERNEL,
                        3.0,
                        "[[64, 1536], [1536], []]",
                    ),
                    linear(BATCH, 1536, 3072, 18.0),
                    linear(BATCH, HIDDEN, 576, 10.2),
                    custom(
                        "_C::rms_norm",
                        RMS_NORM_KERNEL,
                        2.8,
                        "[[64, 512], [512], []]",
                    ),
                    contiguous("[64, 16, 192]", 2.2),
                    linear(BATCH, 512, 4096, 9.1),
                    op(
                        "aten::split_with_sizes",
                        "[[64, 16, 192], [], []]",
                        r#"["c10::BFloat16", "", "Scalar"]"#,
                    )
                    .with(vec![
                        op(
                            "aten::as_strided",
                            "[[64, 16, 128], [], [], []]",
                            r#"["c10::BFloat16", "", "", ""]"#,
                        )
                        .cpu(0.4),
                        op(
                            "aten::as_strided",
                            "[[64, 16, 64], [], [], []]",
                            r#"["c10::BFloat16", "", "", ""]"#,
                        )
                        .cpu(0.4),
                    ]),
                ],
            ));
        }
        _ => groups.push((
            "vllm/model_executor/layers/linear.py(1290): forward",
            vec![linear(BATCH, HIDDEN, 3072, 14.5)],
        )),
    }
    if plan.mixer != Mixer::Linear {
        groups.push((
            "vllm/model_executor/layers/rotary_embedding.py(143): forward_cuda",
            vec![
                cast("[64]", "i64", "i32", 1.6, [1, 1, 1], Role::Other),
                custom(
                    "_C::rotary_embedding",
                    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)",
                    4.8,
                    &format!("[[{BATCH}], [{BATCH}, 1024], [{BATCH}, 128], [], [131072, 64], []]"),
                ),
                op("aten::cat", "[[], []]", r#"["TensorList", "Scalar"]"#)
                    .with(vec![empty()])
                    .launches(launch("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)", 2.5, [16, 2, 1], [512, 1, 1])),
            ],
        ));
        groups.push(("vllm/attention/layer.py(252): forward", attention));
    }
    groups.extend([
        (
            "vllm/model_executor/layers/linear.py(1290): forward",
            vec![
                contiguous("[64, 16, 128]", 2.3),
                linear(BATCH, 2048, HIDDEN, 24.6),
            ],
        ),
        (
            "vllm/distributed/communication_op.py(13): tensor_model_parallel_all_reduce",
            vec![all_reduce(22.0)],
        ),
        (
            "vllm/model_executor/layers/layernorm.py(180): forward_cuda",
            vec![norm(p, true, 6.4, &act)],
        ),
    ]);
    if moe {
        groups.push((
            "vllm/model_executor/layers/fused_moe/layer.py(1420): forward",
            vec![
                cast(&h, "bf16", "f32", 1.8, [448, 1, 1], Role::Other),
                op("aten::linear", &format!("[[{BATCH}, {HIDDEN}], [{EXPERTS}, {HIDDEN}], []]"), r#"["float", "float", ""]"#)
                    .with(vec![op("aten::mm", &format!("[[{BATCH}, {HIDDEN}], [{HIDDEN}, {EXPERTS}]]"), r#"["float", "float"]"#)
                        .cpu(3.0)
                        .launches(launch(GEMM_F32_KERNEL, 6.2, [4, 1, 1], [128, 1, 1]))]),
                custom("_moe_C::topk_softmax", "void vllm::moe::topkGatingSoftmax<8, 256, 4, 16, 32, int, float>(float const*, bool const*, float*, int, int*, int, int, int)", 3.1, &format!("[[{BATCH}, {TOP_K}], [{BATCH}, {TOP_K}], [{BATCH}, {EXPERTS}], []]")),
                cast(&format!("[{BATCH}, {TOP_K}]"), "f32", "bf16", 1.4, [2, 1, 1], Role::Other),
                cast(&format!("[{BATCH}, {TOP_K}]"), "i64", "i32", 1.3, [2, 1, 1], Role::Other),
                custom("_moe_C::moe_align_block_size", "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int, unsigned long, int*)", 4.2, "[[64, 8], [], [], [], [], []]"),
                op("aten::sort", "[[512], [], []]", r#"["int", "Scalar", "Scalar"]"#)
                    .with(vec![empty(), empty()])
                    .launches(launch("void at::native::bitonicSortKVInPlace<-1, -1, 16, 16, int, long, at::native::LTOp<int, true>, unsigned int>(at::cuda::detail::TensorInfo<int, unsigned int>, unsigned int, unsigned int, unsigned int, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, at::native::LTOp<int, true>)", 2.0, [1, 32, 1], [16, 16, 1])),
                custom("vllm::fused_moe_w13", "fused_moe_kernel", 30.0, &format!("[[{BATCH}, {HIDDEN}], [{EXPERTS}, 4096, {HIDDEN}], []]")),
                custom("_C::silu_and_mul", SILU_KERNEL, 3.5, "[[512, 2048], [512, 4096]]"),
                custom("vllm::fused_moe_w2", "fused_moe_kernel", 24.0, &format!("[[512, 2048], [{EXPERTS}, {HIDDEN}, 2048], []]")),
                custom("_moe_C::moe_sum", "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)", 2.6, &format!("[[{BATCH}, {TOP_K}, {HIDDEN}], [{BATCH}, {HIDDEN}]]")),
            ],
        ));
        groups.push((
            "vllm/model_executor/models/deepseek_v2.py(165): forward",
            vec![
                linear(BATCH, HIDDEN, 4096, 14.0),
                custom(
                    "_C::silu_and_mul",
                    SILU_KERNEL,
                    2.1,
                    "[[64, 2048], [64, 4096]]",
                ),
                linear(BATCH, 2048, HIDDEN, 9.5),
                tiny("aten::add", "CUDAFunctor_add", &h, 1.9),
            ],
        ));
    } else {
        groups.push(
            ("vllm/model_executor/models/deepseek_v2.py(165): forward", {
                // Gate and up projections: one GEMM, or two.
                let mut mlp = if p.unfused_mlp {
                    vec![
                        linear(BATCH, HIDDEN, 18432 / 8, 30.0),
                        linear(BATCH, HIDDEN, 18432 / 8, 30.0),
                    ]
                } else {
                    vec![linear(BATCH, HIDDEN, 2 * 18432 / 8, 60.0)]
                };
                mlp.push(custom(
                    "_C::silu_and_mul",
                    SILU_KERNEL,
                    8.3,
                    "[[64, 2304], [64, 4608]]",
                ));
                mlp.push(linear(BATCH, 18432 / 8, HIDDEN, 40.0));
                mlp
            }),
        );
    }
    groups.push((
        "vllm/distributed/communication_op.py(13): tensor_model_parallel_all_reduce",
        vec![all_reduce(22.0)],
    ));
    groups.push(
        ("vllm/model_executor/models/deepseek_v2.py(612): forward", {
            let mut v = small_ops(if moe { 38 } else { 20 }, if moe { 3 } else { 0 });
            v.push(tiny("aten::add_", "CUDAFunctorOnSelf_add", &h, 2.0));
            v
        }),
    );
    groups
}

/// A layer's norm (`fused`: with the residual add): vLLM's kernels, or
/// Inductor's, whose names say what they compute and not "norm".
fn norm(p: &DecodeParams, fused: bool, dur_us: f64, shapes: &str) -> Op {
    match (p.compiled_norms, fused) {
        (false, false) => custom("_C::rms_norm", RMS_NORM_KERNEL, dur_us, shapes),
        (false, true) => custom("_C::fused_add_rms_norm", "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)", dur_us, shapes),
        (true, false) => custom("triton_red_fused__to_copy_mean_mul_pow_rsqrt_0", "triton_red_fused__to_copy_mean_mul_pow_rsqrt_0", dur_us, shapes),
        (true, true) => custom("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", dur_us, shapes),
    }
}

/// The mixer of a layer without attention: projections, a short causal
/// convolution and the recurrent update, and no KV cache.
fn linear_mixer(kind: LinearMixer) -> Vec<Op> {
    let conv = custom(
        "_C::causal_conv1d_update",
        "void causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 4, c10::BFloat16, c10::BFloat16> >(ConvParamsBase)",
        3.4,
        &format!("[[{BATCH}, 8192], [8192, 4], [], []]"),
    );
    match kind {
        LinearMixer::GatedDelta => vec![
            linear(BATCH, HIDDEN, 12288, 16.0),
            conv,
            custom("vllm::fused_recurrent_gated_delta_rule", "fused_recurrent_gated_delta_rule_fwd_kernel", 11.0, &format!("[[1, {BATCH}, 16, 128], [1, {BATCH}, 16, 128], [1, {BATCH}, 32, 128], []]")),
            custom("vllm::rms_norm_gated", "_layer_norm_fwd_1pass_kernel", 2.6, &format!("[[{BATCH}, 4096], [{BATCH}, 4096], [128], []]")),
        ],
        LinearMixer::Mamba => vec![
            linear(BATCH, HIDDEN, 16384, 18.0),
            conv,
            custom("_C::selective_state_update", "_selective_scan_update_kernel", 9.5, &format!("[[{BATCH}, 8192, 16], [{BATCH}, 8192], [], []]")),
            tiny("aten::mul", "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >", &format!("[{BATCH}, 8192]"), 1.6),
        ],
    }
}

/// Ops outside the layers: embedding before, final norm, LM head, gather of
/// logits and sampling after.
fn step_prologue() -> Vec<Op> {
    vec![op("aten::embedding", "[[16160, 7168], [64], [], [], []]", r#"["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"]"#)
        .with(vec![op("aten::index_select", "[[16160, 7168], [], [64]]", r#"["c10::BFloat16", "Scalar", "long int"]"#)
            .launches(launch("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, long)", 8.2, [64, 1, 1], [128, 1, 1]))])]
}

fn step_epilogue(p: &DecodeParams) -> Vec<Op> {
    vec![
        norm(p, false, 6.1, "[[64, 7168], [7168], []]"),
        linear(BATCH, HIDDEN, 16160, 150.0),
    ]
}

/// Sampling: gather the logits across ranks, pick the tokens (eager in every mode).
fn sampling() -> Vec<Op> {
    vec![
        Op { annotation: true, ..op("nccl:all_gather", "[[64, 16160]]", r#"["c10::BFloat16"]"#) }.with(vec![op("record_param_comms", "[[[64, 16160]]]", r#"["TensorList"]"#)
            .cpu(6.0)
            .launches(Launch { api: "cudaLaunchKernelExC", ..launch("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 40.2, [8, 1, 1], [512, 1, 1]) })]),
        op("aten::argmax", "[[64, 129280], [], []]", r#"["c10::BFloat16", "Scalar", "Scalar"]"#)
            .launches(launch("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4>)", 20.3, [64, 1, 1], [32, 16, 1])),
    ]
}

// ------------------------------------------------------------ simulation

/// A deterministic pseudo-random source (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A factor in [1 - spread, 1 + spread].
    fn jitter(&mut self, spread: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + spread * (2.0 * u - 1.0)
    }
}

/// Which section of the file a pass writes.
#[derive(Clone, Copy, PartialEq)]
enum Pass {
    Cpu,
    Python,
    Gpu,
}

const PID: i64 = 38211;
const DEVICE: i64 = 0;
const STREAM: i64 = 7;
/// Start of the window, µs after `baseTimeNanoseconds`.
const T0_NS: i64 = 1_428_625_731_896_179;
const BASE_TIME_NS: i64 = 1_775_078_550_000_000_000;
/// Python frames wrapped around each top-level op call (the Python call
/// stack between the module's forward and the op).
const FRAMES_PER_CALL: usize = 6;
/// CPU time each Python frame adds on entry and on exit, µs. Small enough
/// that the step stays GPU-bound, as in the founding story.
const FRAME_US: f64 = 0.25;
/// Python frames around each group of ops (module call machinery).
const FRAMES_PER_GROUP: usize = 9;
const SITE: &str = "/opt/conda/envs/vllm-0.9.2-py312-cu128-nightly/lib/python3.12/site-packages";

/// The Python frames of one op call, outermost first.
fn call_frames() -> [String; FRAMES_PER_CALL] {
    [
        format!("{SITE}/vllm/model_executor/custom_op.py(44): forward"),
        format!("{SITE}/vllm/model_executor/custom_op.py(27): dispatch_forward"),
        format!("{SITE}/torch/_ops.py(1243): __call__"),
        format!("{SITE}/vllm/_custom_ops.py(212): wrapper"),
        format!("{SITE}/torch/_ops.py(723): __call__"),
        "<built-in method _call_op of PyCapsule object at 0x7f3a2c1b9e40>".to_string(),
    ]
}

/// The Python frames around a group of ops, outermost first (the last is the
/// module's own code).
fn group_frames(path: &str) -> [String; FRAMES_PER_GROUP] {
    [
        format!("{SITE}/torch/nn/modules/module.py(1762): _call_impl"),
        format!("{SITE}/torch/nn/modules/module.py(1751): _wrapped_call_impl"),
        format!("{SITE}/vllm/compilation/decorators.py(239): __call__"),
        format!("{SITE}/torch/nn/modules/module.py(1762): _call_impl"),
        format!("{SITE}/torch/nn/modules/module.py(1751): _wrapped_call_impl"),
        format!("{SITE}/vllm/model_executor/layers/utils.py(88): dispatch"),
        format!("{SITE}/torch/utils/_contextlib.py(116): decorate_context"),
        format!("{SITE}/vllm/forward_context.py(187): get_forward_context"),
        format!("{SITE}/{path}"),
    ]
}

struct Sim<'a, W: Write> {
    pass: Pass,
    out: &'a mut Writer<W>,
    p: &'a DecodeParams,
    rng: Rng,
    /// CPU clock, ns.
    cpu: i64,
    /// When the stream is free, ns.
    gpu: i64,
    external_id: i64,
    correlation: i64,
    python_id: i64,
    ev_idx: i64,
    module_id: i64,
    /// Bytes allocated by the ops so far (profile_memory events).
    allocated: i64,
    /// `memory`: what the layer frees at its end (address, bytes).
    to_free: Vec<(i64, i64)>,
    /// `memory`: the next address handed out.
    next_addr: i64,
    /// `counters`: the next sample's time (0: the process is not named yet).
    next_sample: i64,
    /// While a graph replays: its launch's (correlation, External id, end).
    replay: Option<(i64, i64, i64)>,
    /// Ops waiting to be replayed as one graph (graph modes).
    pending: Vec<Op>,
    /// The Python frame the step's code runs in (0: none).
    step_frame: i64,
    truth: Truth,
}

fn us_ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

impl<W: Write> Sim<'_, W> {
    /// Whether Python frames are written at all: `with_stack`, or the
    /// engine frames of graph modes.
    fn frames(&self) -> bool {
        self.p.with_stack || self.p.mode != Mode::Eager
    }

    fn frame(
        &mut self,
        name: &str,
        start: i64,
        end: i64,
        parent: i64,
        module: bool,
    ) -> io::Result<i64> {
        self.python_id += 1;
        let id = self.python_id;
        if self.pass == Pass::Python {
            let parent = if parent == 0 {
                "null".to_string()
            } else {
                parent.to_string()
            };
            let module_arg = if module {
                self.module_id += 1;
                format!(", \"Python module id\": {}", self.module_id)
            } else {
                String::new()
            };
            self.ev_idx += 1;
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"{name}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"Python parent id\": {parent}, \"Python id\": {id}{module_arg}, \"Ev Idx\": {}\n    }}",
                ts(start),
                dur(end - start),
                self.ev_idx
            ))?;
        }
        Ok(id)
    }

    /// Runs an op: returns its (start, end) on the CPU clock. During a
    /// graph replay only its kernels run: the CPU side was captured.
    fn run_op(&mut self, o: &Op, parent_frame: i64, depth: usize) -> io::Result<(i64, i64)> {
        if self.replay.is_some() {
            for c in &o.children {
                self.run_op(c, parent_frame, depth + 1)?;
            }
            for l in &o.launches {
                self.launch(l, 0)?;
            }
            return Ok((self.cpu, self.cpu));
        }
        // Python dispatch frames around top-level calls are emitted after we
        // know the op's span; remember where the call starts.
        let call_start = self.cpu;
        // Custom ops are called through their Python wrappers; ATen ops
        // straight from the module's code.
        let wrapped = self.p.with_stack && depth == 0 && !o.name.starts_with("aten::");
        if wrapped {
            self.cpu += us_ns(FRAME_US * FRAMES_PER_CALL as f64);
        }
        let start = self.cpu;
        self.external_id += 1;
        let ext = self.external_id;
        self.truth.ops += 1;
        self.cpu += us_ns(0.6 * self.rng.jitter(0.2));
        for c in &o.children {
            self.run_op(c, parent_frame, depth + 1)?;
            self.cpu += us_ns(0.3);
        }
        self.cpu += us_ns(o.self_us * self.rng.jitter(0.2));
        for api in &o.calls {
            self.runtime_call(api, ext, 1.2)?;
        }
        for l in &o.launches {
            self.launch(l, ext)?;
            self.cpu += us_ns(0.6);
        }
        self.cpu += us_ns(0.5);
        let end = self.cpu;
        if self.pass == Pass::Cpu {
            self.ev_idx += 1;
            let cat = if o.annotation {
                "user_annotation"
            } else {
                "cpu_op"
            };
            let flops = o
                .flops
                .map(|f| format!(", \"flops\": {f}"))
                .unwrap_or_default();
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},\"Record function id\": 0, \"Concrete Inputs\": {}, \"Input type\": {}, \"Input Strides\": {}, \"Input Dims\": {}, \"Ev Idx\": {}{flops}\n    }}",
                o.name,
                ts(start),
                dur(end - start),
                concrete_inputs(&o.types),
                o.types,
                strides(&o.shapes),
                o.shapes,
                self.ev_idx
            ))?;
            if self.p.memory && o.alloc > 0 {
                // The op's output: allocated as it starts, freed at the
                // layer's end (the attention has read it by then).
                let bytes = o.alloc as i64;
                let addr = self.next_addr;
                self.next_addr += (bytes + 511) / 512 * 512;
                self.to_free.push((addr, bytes));
                self.memory_event(start + 200, addr, bytes)?;
                if o.alloc > 100_000_000 {
                    self.truth.cast_alloc_bytes = o.alloc;
                }
                self.truth.churn_bytes_per_step += bytes as f64 / self.p.steps.max(1) as f64;
            }
            if o.name == "aten::empty" && depth == 1 {
                // profile_memory: the allocation and, at the end of the op,
                // its release.
                let bytes = 262_144 + (self.external_id % 7) * 65_536;
                let addr = 139_820_000_000_000 + (self.external_id % 4096) * 1_048_576;
                for (at, b) in [(start, bytes), (end, -bytes)] {
                    self.memory_event(at, addr, b)?;
                }
                self.truth.churn_bytes_per_step += bytes as f64 / self.p.steps.max(1) as f64;
            }
        }
        if o.name.starts_with("aten::copy_") {
            self.truth.copy_calls += 1;
        }
        if wrapped {
            self.cpu += us_ns(FRAME_US * FRAMES_PER_CALL as f64);
            let mut parent = parent_frame;
            for (k, name) in call_frames().iter().enumerate() {
                let pad = us_ns(FRAME_US * k as f64);
                parent = self.frame(name, call_start + pad, self.cpu - pad, parent, false)?;
            }
        }
        Ok((start, end))
    }

    /// A `[memory]` event (`memory`): an allocation (`bytes` > 0) or a
    /// free at `at`, with the device's totals after it.
    fn memory_event(&mut self, at: i64, addr: i64, bytes: i64) -> io::Result<()> {
        self.allocated += bytes;
        let total = 71_000_000_000 + self.allocated;
        self.truth.peak_allocated = self.truth.peak_allocated.max(total);
        self.ev_idx += 1;
        self.out.event(&format!(
            "    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n    \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {},\n    \"args\": {{\n      \"Total Reserved\": 79188459520, \"Total Allocated\": {total}, \"Bytes\": {bytes}, \"Addr\": {addr}, \"Device Id\": 0, \"Device Type\": 1, \"Ev Idx\": {}\n    }}",
            ts(at),
            self.ev_idx
        ))
    }

    /// A runtime call that launches nothing.
    fn runtime_call(&mut self, api: &str, ext: i64, dur_us: f64) -> io::Result<()> {
        self.correlation += 1;
        self.truth.runtime_calls += 1;
        let start = self.cpu;
        self.cpu += us_ns(dur_us * self.rng.jitter(0.3));
        if self.pass == Pass::Gpu {
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{api}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},      \"cbid\": 1, \"correlation\": {}\n    }}",
                ts(start),
                dur(self.cpu - start),
                self.correlation
            ))?;
        }
        Ok(())
    }

    /// A kernel on the stream, launched now (eager) or by the graph being
    /// replayed.
    fn kernel(&mut self, l: &Launch, not_before: i64, corr: i64, ext: i64) -> io::Result<()> {
        let k_dur = us_ns(l.dur_us * self.rng.jitter(0.01));
        let k_start = not_before.max(self.gpu + us_ns(0.9));
        self.gpu = k_start + k_dur;
        let k_us = k_dur as f64 / 1e3;
        self.truth.gpu_us += k_us;
        self.truth.kernels += 1;
        if self.replay.is_some() {
            self.truth.graph_us += k_us;
        }
        match l.role {
            Role::Cast => {
                self.truth.cast_us += k_us;
                self.truth.cast_calls += 1;
                self.truth.cast_grid = l.grid;
            }
            Role::Gather => self.truth.gather_us += k_us,
            Role::Other => {}
        }
        if self.pass == Pass::Gpu && self.p.counters {
            self.pm_samples(k_start, k_start + k_dur, l.role == Role::Cast)?;
        }
        if self.pass == Pass::Gpu {
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": {DEVICE}, \"tid\": {STREAM},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},      \"queued\": 0, \"device\": {DEVICE}, \"context\": 1,      \"stream\": {STREAM}, \"correlation\": {corr},      \"registers per thread\": 32,      \"shared memory\": 0,      \"blocks per SM\": 3.878788,      \"warps per SM\": 15.515152,      \"grid\": [{}, {}, {}],      \"block\": [{}, {}, {}],      \"est. achieved occupancy %\": 24\n    }}",
                l.kernel,
                ts(k_start),
                dur(k_dur),
                l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2]
            ))?;
            self.out.event(&format!(
                "    \"ph\": \"f\", \"id\": {corr}, \"pid\": {DEVICE}, \"tid\": {STREAM}, \"ts\": {},\n    \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"",
                ts(k_start)
            ))?;
        }
        Ok(())
    }

    /// PM samples up to a kernel's end: idle before it, its values inside.
    fn pm_samples(&mut self, start: i64, end: i64, cast: bool) -> io::Result<()> {
        let period = us_ns(PM_PERIOD_US);
        if self.next_sample == 0 {
            self.out.event(&format!(
                "    \"ph\": \"M\", \"name\": \"process_name\", \"pid\": {PM_PID}, \"tid\": 0,\n    \"args\": {{\"name\": \"GPU {DEVICE} Counters\"}}"
            ))?;
            self.next_sample = start - start.rem_euclid(period);
        }
        while self.next_sample <= end {
            let t = self.next_sample;
            let (dram, sm) = if t < start {
                PM_IDLE
            } else if cast {
                PM_CAST
            } else {
                PM_BUSY
            };
            for (name, v) in [("DRAM Throughput", dram), ("SM Active", sm)] {
                self.out.event(&format!(
                    "    \"ph\": \"C\", \"cat\": \"gpu_pm_counter\", \"name\": \"{name}\", \"pid\": {PM_PID}, \"tid\": 0, \"ts\": {},\n    \"args\": {{\"value\": {v}}}",
                    ts(t)
                ))?;
            }
            self.truth.counter_samples += 1;
            self.next_sample += period;
        }
        Ok(())
    }

    fn launch(&mut self, l: &Launch, ext: i64) -> io::Result<()> {
        if let Some((corr, ext, end)) = self.replay {
            return self.kernel(l, end + us_ns(2.0), corr, ext);
        }
        self.correlation += 1;
        self.truth.runtime_calls += 1;
        let corr = self.correlation;
        let launch_start = self.cpu;
        let launch_dur = us_ns(2.8 * self.rng.jitter(0.3));
        self.cpu += launch_dur;
        self.kernel(l, launch_start + launch_dur + us_ns(2.0), corr, ext)?;
        if self.pass == Pass::Gpu {
            let cbid = if l.api == "cudaLaunchKernelExC" {
                430
            } else {
                211
            };
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},      \"cbid\": {cbid}, \"correlation\": {corr}\n    }}",
                l.api,
                ts(launch_start),
                dur(launch_dur)
            ))?;
            self.out.event(&format!(
                "    \"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {PID}, \"ts\": {},\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"",
                ts(launch_start)
            ))?;
        }
        Ok(())
    }

    /// Replays the pending ops as one CUDA graph: one `cudaGraphLaunch` on
    /// the CPU, inside the engine's replay frames, and all their kernels on
    /// the GPU with the launch's correlation.
    fn flush_graph(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.pending);
        let call_start = self.cpu;
        self.cpu += us_ns(3.0);
        self.correlation += 1;
        self.external_id += 1;
        self.truth.runtime_calls += 1;
        self.truth.replays += 1;
        let (corr, ext) = (self.correlation, self.external_id);
        let launch_start = self.cpu;
        self.cpu += us_ns(9.0 * self.rng.jitter(0.2));
        let launch_end = self.cpu;
        if self.pass == Pass::Gpu {
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaGraphLaunch\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},      \"cbid\": 311, \"correlation\": {corr}\n    }}",
                ts(launch_start),
                dur(launch_end - launch_start)
            ))?;
            self.out.event(&format!(
                "    \"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {PID}, \"ts\": {},\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"",
                ts(launch_start)
            ))?;
        }
        self.replay = Some((corr, ext, launch_end));
        for o in &ops {
            self.run_op(&with_views(o), 0, 0)?;
        }
        self.replay = None;
        self.cpu += us_ns(3.0);
        let call_end = self.cpu;
        let names = [
            format!("{SITE}/vllm/compilation/cuda_graph.py(208): __call__"),
            format!("{SITE}/torch/cuda/graphs.py(86): replay"),
            "<built-in method replay of PyCapsule object at 0x7f3a2c1b9f10>".to_string(),
        ];
        let mut parent = self.step_frame;
        for (k, name) in names.iter().enumerate() {
            let pad = us_ns(1.0 * k as f64);
            parent = self.frame(name, call_start + pad, call_end - pad, parent, false)?;
        }
        Ok(())
    }

    /// Runs a top-level op: eagerly, or queued for the next graph replay.
    fn issue(&mut self, o: &Op, parent_frame: i64) -> io::Result<()> {
        match self.p.mode {
            Mode::Eager => {
                self.run_op(&with_views(o), parent_frame, 0)?;
                self.cpu += us_ns(0.8);
            }
            Mode::Graph => self.pending.push(o.clone()),
            Mode::Piecewise if o.eager => {
                self.flush_graph()?;
                self.run_op(&with_views(o), self.step_frame, 0)?;
                self.cpu += us_ns(0.8);
            }
            Mode::Piecewise => self.pending.push(o.clone()),
        }
        Ok(())
    }

    /// A group of ops inside a chain of Python frames.
    fn group(&mut self, path: &str, ops: &[Op], parent_frame: i64) -> io::Result<()> {
        if self.p.mode != Mode::Eager {
            for o in ops {
                self.issue(o, parent_frame)?;
            }
            return Ok(());
        }
        let start = self.cpu;
        let depth = if self.p.with_stack {
            FRAMES_PER_GROUP
        } else {
            0
        };
        self.cpu += us_ns(FRAME_US * depth as f64);
        // Frames are emitted after their contents, so reserve their ids.
        let first_id = self.python_id;
        self.python_id += depth as i64;
        let inner_parent = if depth > 0 {
            first_id + depth as i64
        } else {
            parent_frame
        };
        for o in ops {
            self.issue(o, inner_parent)?;
        }
        self.cpu += us_ns(FRAME_US * depth as f64);
        if depth > 0 {
            let end = self.cpu;
            let saved = self.python_id;
            let names = group_frames(path);
            let mut parent = parent_frame;
            for (k, name) in names.iter().enumerate() {
                self.python_id = first_id + k as i64;
                let pad = us_ns(FRAME_US * k as f64);
                parent = self.frame(name, start + pad, end - pad, parent, false)?;
            }
            self.python_id = saved;
        }
        Ok(())
    }

    fn step(&mut self, n: u32) -> io::Result<()> {
        let eager = self.p.mode == Mode::Eager;
        let step_start = self.cpu;
        self.external_id += 1;
        let step_ext = self.external_id;
        self.cpu += us_ns(12.0);
        // The model runner's frame, emitted at the end with a reserved id.
        let top = if self.frames() {
            let id = self.python_id + 1;
            self.python_id += 1;
            id
        } else {
            0
        };
        self.step_frame = top;
        for o in step_prologue() {
            self.issue(&o, top)?;
        }
        let plan = self.p.plan();
        let mut built: Vec<(LayerPlan, Groups)> = Vec::new();
        for layer in 0..self.p.layers {
            let kind = plan[layer as usize];
            if !built.iter().any(|b| b.0 == kind) {
                built.push((kind, layer_groups(self.p, kind, n)));
            }
            let groups = &built.iter().find(|b| b.0 == kind).expect("built above").1;
            let layer_start = self.cpu;
            self.external_id += 1;
            let layer_ext = self.external_id;
            let module_frame = if self.p.with_stack && eager {
                self.python_id += 1;
                self.python_id
            } else {
                0
            };
            self.cpu += us_ns(1.5);
            for (path, ops) in groups {
                self.group(path, ops, if module_frame > 0 { module_frame } else { top })?;
            }
            self.cpu += us_ns(1.5);
            if self.pass == Pass::Cpu {
                for (addr, bytes) in std::mem::take(&mut self.to_free) {
                    self.memory_event(self.cpu - 500, addr, -bytes)?;
                }
            }
            let layer_end = self.cpu;
            if module_frame > 0 {
                let saved = self.python_id;
                self.python_id = module_frame - 1;
                self.frame(
                    &format!("nn.Module: DeepseekV2DecoderLayer_{layer}"),
                    layer_start,
                    layer_end,
                    top,
                    true,
                )?;
                self.python_id = saved;
            }
            if self.p.layer_annotations && eager && self.pass == Pass::Cpu {
                self.ev_idx += 1;
                self.out.event(&format!(
                    "    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"model.layers.{layer}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {layer_ext},\"Record function id\": 0, \"Ev Idx\": {}\n    }}",
                    ts(layer_start),
                    dur(layer_end - layer_start),
                    self.ev_idx
                ))?;
            }
            if layer_annotations_counted(self.p) {
                self.truth.ops += 1;
            }
            self.cpu += us_ns(1.0);
        }
        for o in step_epilogue(self.p) {
            self.issue(&o, top)?;
        }
        self.flush_graph()?;
        for o in sampling() {
            self.run_op(&with_views(&o), top, 0)?;
        }
        // Copy the sampled tokens to the host and wait for the GPU.
        let copy = Op {
            launches: vec![Launch {
                api: "cudaMemcpyAsync",
                kernel: "Memcpy DtoH (Device -> Pinned)".into(),
                dur_us: 1.8,
                grid: [0, 0, 0],
                block: [0, 0, 0],
                role: Role::Other,
            }],
            self_us: 3.0,
            ..op(
                "aten::copy_",
                "[[64], [64], []]",
                r#"["long int", "long int", "Scalar"]"#,
            )
        };
        self.run_op(&copy, top, 0)?;
        let sync_start = self.cpu;
        self.cpu = self.cpu.max(self.gpu + us_ns(6.0));
        let sync_end = self.cpu;
        self.correlation += 1;
        self.truth.runtime_calls += 1;
        if self.pass == Pass::Gpu {
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {},      \"cbid\": 131, \"correlation\": {}\n    }}",
                ts(sync_start),
                dur(sync_end - sync_start),
                step_ext,
                self.correlation
            ))?;
        }
        self.cpu += us_ns(8.0);
        // What the step's own ops (outside the layers) allocated goes with it.
        if self.pass == Pass::Cpu {
            for (addr, bytes) in std::mem::take(&mut self.to_free) {
                self.memory_event(self.cpu - 500, addr, -bytes)?;
            }
        }
        let step_end = self.cpu;
        if eager {
            self.truth.ops += 1;
            if self.pass == Pass::Cpu {
                self.ev_idx += 1;
                self.out.event(&format!(
                    "    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{n}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {step_ext},\"Record function id\": 0, \"Ev Idx\": {}\n    }}",
                    ts(step_start),
                    dur(step_end - step_start),
                    self.ev_idx
                ))?;
            }
            self.truth
                .step_us
                .push((step_end - step_start) as f64 / 1e3);
        } else {
            // Serving engines mark no ProfilerStep: the model runner's frame
            // is the step.
            self.truth
                .step_us
                .push((step_end - step_start - us_ns(8.0)) as f64 / 1e3);
        }
        if top > 0 {
            let saved = self.python_id;
            self.python_id = top - 1;
            self.frame(
                "vllm/v1/worker/gpu_model_runner.py(1480): execute_model",
                step_start + us_ns(4.0),
                step_end - us_ns(4.0),
                0,
                false,
            )?;
            self.python_id = saved;
        }
        self.step_frame = 0;
        self.cpu += us_ns(150.0 * self.rng.jitter(0.2));
        Ok(())
    }
}

/// Whether layer annotations are written (and so counted as ops).
fn layer_annotations_counted(p: &DecodeParams) -> bool {
    p.layer_annotations && p.mode == Mode::Eager
}

/// `Concrete Inputs` as torch writes it: `""` for tensors, a value for scalars.
fn concrete_inputs(types: &str) -> String {
    let n = types.matches('"').count() / 2;
    let items: Vec<&str> = (0..n)
        .map(|k| {
            if types
                .split(',')
                .nth(k)
                .is_some_and(|t| t.contains("Scalar"))
            {
                "\"0\""
            } else {
                "\"\""
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// Contiguous `Input Strides` for `Input Dims`.
fn strides(shapes: &str) -> String {
    let dims: Vec<serde_json::Value> = serde_json::from_str(shapes).unwrap_or_default();
    let out: Vec<String> = dims
        .iter()
        .map(|d| {
            let v: Vec<u64> = d
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default();
            let mut st = vec![0u64; v.len()];
            let mut acc = 1u64;
            for k in (0..v.len()).rev() {
                st[k] = acc;
                acc = acc.saturating_mul(v[k].max(1));
            }
            format!(
                "[{}]",
                st.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    format!("[{}]", out.join(", "))
}

fn ts(ns: i64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn dur(ns: i64) -> String {
    let ns = ns.max(0);
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Writes events separated by commas, counting events and bytes.
struct Writer<W: Write> {
    out: W,
    first: bool,
    events: u64,
    bytes: u64,
    buf: String,
}

impl<W: Write> Writer<W> {
    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.bytes += s.len() as u64;
        self.out.write_all(s.as_bytes())
    }
    fn event(&mut self, body: &str) -> io::Result<()> {
        self.buf.clear();
        if !self.first {
            self.buf.push_str(",\n");
        }
        self.first = false;
        let _ = write!(self.buf, "  {{\n{body}\n  }}");
        self.events += 1;
        let s = std::mem::take(&mut self.buf);
        let r = self.raw(&s);
        self.buf = s;
        r
    }
}

fn simulate<W: Write>(p: &DecodeParams, pass: Pass, out: &mut Writer<W>) -> io::Result<Truth> {
    let mut sim = Sim {
        pass,
        out,
        p,
        rng: Rng(p.seed),
        cpu: T0_NS,
        gpu: T0_NS,
        external_id: 0,
        correlation: 0,
        python_id: 0,
        ev_idx: 0,
        module_id: 0,
        allocated: 0,
        to_free: Vec::new(),
        next_addr: 140_000_000_000_000,
        next_sample: 0,
        replay: None,
        pending: Vec::new(),
        step_frame: 0,
        truth: Truth::default(),
    };
    for n in 0..p.steps {
        sim.step(n + 1)?;
    }
    Ok(sim.truth)
}

/// Writes the overlap bomb (RELIABILITY.md, issue 25): `n` identical
/// kernels at one `ts` on one stream, so every one overlaps all the others. A few kilobytes of zstd; what stalled
/// a quadratic timeline layout.
pub fn write_overlapping_kernels<W: Write>(n: usize, out: W) -> io::Result<()> {
    const KERNEL: &[u8] =
        br#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0,"stream":7}}"#;
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    out.write_all(b"{\"traceEvents\":[")?;
    for k in 0..n {
        if k > 0 {
            out.write_all(b",")?;
        }
        out.write_all(KERNEL)?;
    }
    out.write_all(b"]}")?;
    out.flush()
}

/// Writes a "staircase": `n` CPU ops of one name on one thread, op `i`
/// from `i` µs for `n` µs, so each starts inside the one before and ends
/// after it (each nests in the last, as deep as the trace is long); every
/// op launches one kernel. The shape that made the op table's folded
/// calls and every walk up the op tree quadratic (RELIABILITY.md).
pub fn write_staircase<W: Write>(n: usize, out: W) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    out.write_all(b"{\"traceEvents\":[")?;
    for i in 0..n {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(
            out,
            r#"{{"ph":"X","cat":"cpu_op","name":"aten::stair","pid":1,"tid":1,"ts":{i},"dur":{n}}},{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{i}.1,"dur":0.5,"args":{{"correlation":{c}}}}},{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{k},"dur":1,"args":{{"device":0,"stream":7,"correlation":{c}}}}}"#,
            c = i + 1,
            k = 2 * i + n,
        )?;
    }
    out.write_all(b"]}")?;
    out.flush()
}

/// Writes a decode trace as JSON and returns what it contains.
pub fn write_decode_trace<W: Write>(p: &DecodeParams, out: W) -> io::Result<Truth> {
    let mut w = Writer {
        out,
        first: true,
        events: 0,
        bytes: 0,
        buf: String::new(),
    };
    let device = r#"{
      "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150754820096,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472,
      "numSms": 132, "sharedMemPerBlockOptin": 232448
    }"#;
    let devices: Vec<String> = (0..8)
        .map(|i| device.replace("\"id\": 0", &format!("\"id\": {i}")))
        .collect();
    let mut options =
        String::from("  \"record_shapes\": 1,\n  \"profile_memory\": 1,\n  \"with_flops\": 1,\n");
    if p.with_stack {
        options.push_str("  \"with_stack\": 1,\n");
    }
    w.raw(&format!(
        "\n{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {}\n  ],\n  \"cupti_version\": 24,\n  \"cuda_runtime_version\": 12080,\n  \"cuda_driver_version\": 12080,\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, \"pg_count\": 1, \"nccl_version\": \"2.27.3\"}},\n{options}  \"trace_id\": \"5F1C2A9B0E3D4C7A8B6E9F0A1D2C3B4A\",\n  \"traceEvents\": [\n",
        devices.join(",\n    ")
    ))?;
    let truth = simulate(p, Pass::Cpu, &mut w)?;
    if p.with_stack || p.mode != Mode::Eager {
        simulate(p, Pass::Python, &mut w)?;
    }
    // The GPU pass writes the counters: their count is its.
    let gpu = simulate(p, Pass::Gpu, &mut w)?;
    let end = T0_NS + us_ns(truth.step_us.iter().sum::<f64>() + 200.0 * p.steps as f64);
    let meta = [
        format!("    \"name\": \"process_name\", \"ph\": \"M\", \"ts\": {}, \"pid\": {PID}, \"tid\": 0,\n    \"args\": {{\n      \"name\": \"python3\"\n    }}", ts(T0_NS)),
        format!("    \"name\": \"process_labels\", \"ph\": \"M\", \"ts\": {}, \"pid\": {PID}, \"tid\": 0,\n    \"args\": {{\n      \"labels\": \"CPU\"\n    }}", ts(T0_NS)),
        format!("    \"name\": \"process_name\", \"ph\": \"M\", \"ts\": {}, \"pid\": 0, \"tid\": 0,\n    \"args\": {{\n      \"name\": \"python3\"\n    }}", ts(T0_NS)),
        format!("    \"name\": \"process_labels\", \"ph\": \"M\", \"ts\": {}, \"pid\": 0, \"tid\": 0,\n    \"args\": {{\n      \"labels\": \"GPU 0\"\n    }}", ts(T0_NS)),
        format!("    \"name\": \"thread_name\", \"ph\": \"M\", \"ts\": {}, \"pid\": 0, \"tid\": 7,\n    \"args\": {{\n      \"name\": \"stream 7 \"\n    }}", ts(T0_NS)),
        format!("    \"name\": \"thread_name\", \"ph\": \"M\", \"ts\": {}, \"pid\": {PID}, \"tid\": {PID},\n    \"args\": {{\n      \"name\": \"thread {PID} (python3)\"\n    }}", ts(T0_NS)),
        format!("    \"ph\": \"X\", \"cat\": \"Trace\", \"ts\": {}, \"dur\": {},\n    \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\",\n    \"name\": \"PyTorch Profiler (0)\",\n    \"args\": {{\n      \"Op count\": 0\n    }}", ts(T0_NS - 1000), dur(end - T0_NS + 1000)),
        format!("    \"name\": \"Iteration Start: PyTorch Profiler\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"Traces\", \"tid\": \"Trace PyTorch Profiler\", \"ts\": {}", ts(T0_NS - 1000)),
        format!("    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", \"ts\": {}", ts(end)),
    ];
    for m in &meta {
        w.event(m)?;
    }
    w.raw(&format!(
        "\n  ],\n  \"traceName\": \"/tmp/kinetoscope-generated-decode.pt.trace.json\",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {BASE_TIME_NS}\n}}\n"
    ))?;
    w.out.flush()?;
    let mut truth = truth;
    truth.counter_samples = gpu.counter_samples;
    truth.events = w.events;
    truth.json_bytes = w.bytes;
    truth.layers = p.layers;
    let plan = p.plan();
    truth.dense_layers = plan
        .iter()
        .filter(|l| !l.moe && l.mixer != Mixer::Linear)
        .count() as u32;
    truth.layer_kinds = plan.iter().map(|l| l.kind()).collect();
    truth.casts_per_step = plan.iter().filter(|l| l.mixer != Mixer::Linear).count() as u32;
    truth.cast_bytes_per_call = match p.variant {
        Variant::Baseline => 2 * POOL_TOKENS * HEAD_DIM * 3,
        Variant::GatherCast => 2 * ACTIVE_TOKENS * HEAD_DIM * 3,
    };
    Ok(truth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_trace_is_valid_json_and_deterministic() {
        let p = DecodeParams {
            steps: 2,
            layers: 3,
            ..Default::default()
        };
        let mut a = Vec::new();
        let truth = write_decode_trace(&p, &mut a).unwrap();
        let mut b = Vec::new();
        write_decode_trace(&p, &mut b).unwrap();
        assert_eq!(a, b);
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(
            v["traceEvents"].as_array().unwrap().len() as u64,
            truth.events
        );
        assert_eq!(truth.cast_calls, 6);
        assert_eq!(truth.json_bytes, a.len() as u64);
    }
}
