//! A generator of decode traces shaped like the founding story's: N steps of
//! an L-layer LLM served with tensor parallelism, written the way Kineto
//! writes them (native spacing, 3-decimal timestamps relative to
//! `baseTimeNanoseconds`, CPU ops first, then Python frames, then GPU ops
//! each followed by its flow end, launch and flow start).
//!
//! Each layer runs a realistic op sequence (RMSNorm, QKV GEMM, rotary, KV
//! cache store, attention, all-reduce, MLP) with launches, kernels (grid,
//! block, correlation), shapes, flows and Python frames. The baseline casts
//! the whole FP8 KV cache to BF16 in every layer (`aten::copy_`, ~0.83 ms,
//! ~857 MB per call); the `gather-cast` variant gathers the active rows first
//! and casts only those.
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
            other => Err(format!("unknown variant {other:?}: use baseline or gather-cast")),
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct DecodeParams {
    pub steps: u32,
    pub layers: u32,
    pub variant: Variant,
    /// Emit Python frames (`with_stack=True`), including `nn.Module` frames.
    pub with_stack: bool,
    /// Emit a `layers.N` record_function annotation around each layer.
    pub layer_annotations: bool,
    pub seed: u64,
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams {
            steps: 30,
            layers: 78,
            variant: Variant::Baseline,
            with_stack: true,
            layer_annotations: false,
            seed: 1,
        }
    }
}

/// What the generator put in the trace, accounted while generating (not by
/// the analyzer), for tests to compare with.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    pub events: u64,
    pub json_bytes: u64,
    /// CPU-side duration of each step, µs.
    pub step_us: Vec<f64>,
    /// Device time of all GPU ops, µs.
    pub gpu_us: f64,
    /// Device time of the cast kernels (`aten::copy_`'s), µs.
    pub cast_us: f64,
    pub cast_calls: u64,
    /// Bytes read plus written by one cast call.
    pub cast_bytes_per_call: u64,
    /// Device time of the gather kernels (patch only), µs.
    pub gather_us: f64,
    pub kernels: u64,
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
const HIDDEN: u64 = 8192;
const TP_HEADS: u64 = 8;

const CAST_KERNEL: &str = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::Float8_e4m3fn)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::Float8_e4m3fn)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)";
const GATHER_KERNEL: &str = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Float8_e4m3fn, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::Float8_e4m3fn, unsigned int>, at::cuda::detail::TensorInfo<c10::Float8_e4m3fn const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)";
const GEMM_KERNEL: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
const ALLREDUCE_KERNEL: &str = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

/// A kernel launch.
#[derive(Clone)]
struct Launch {
    api: &'static str,
    kernel: &'static str,
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

/// An op with its children and, optionally, the kernel it launches last.
#[derive(Clone)]
struct Op {
    name: &'static str,
    annotation: bool,
    shapes: String,
    types: String,
    children: Vec<Op>,
    /// Kernels it launches itself, in order, after its children.
    launches: Vec<Launch>,
    /// CPU time of its own work, µs.
    self_us: f64,
}

fn op(name: &'static str, shapes: &str, types: &str) -> Op {
    Op {
        name,
        annotation: false,
        shapes: shapes.into(),
        types: types.into(),
        children: Vec::new(),
        launches: Vec::new(),
        self_us: 1.5,
    }
}

fn launch(kernel: &'static str, dur_us: f64, grid: [u32; 3], block: [u32; 3]) -> Launch {
    Launch {
        api: "cudaLaunchKernel",
        kernel,
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
}

/// The op with the shape plumbing real calls do first (`reshape` -> `view`).
fn with_views(o: &Op) -> Op {
    let mut o = o.clone();
    let first = serde_json::from_str::<Vec<serde_json::Value>>(&o.shapes)
        .ok()
        .and_then(|v| v.into_iter().next())
        .filter(|d| d.is_array())
        .unwrap_or_else(|| serde_json::json!([BATCH, HIDDEN]));
    let dims = format!("[{}, []]", serde_json::to_string(&first).unwrap_or_default().replace(',', ", "));
    o.children.insert(
        0,
        op("aten::reshape", &dims, r#"["c10::BFloat16", ""]"#).with(vec![op("aten::view", &dims, r#"["c10::BFloat16", ""]"#)]),
    );
    o
}

/// `aten::linear` as it decomposes on GPU, launching one GEMM.
fn linear(out_features: u64, dur_us: f64) -> Op {
    let w = format!("[[{BATCH}, {HIDDEN}], [{out_features}, {HIDDEN}], []]");
    op("aten::linear", &w, r#"["c10::BFloat16", "c10::BFloat16", ""]"#)
        .with(vec![
            op("aten::t", &format!("[[{out_features}, {HIDDEN}]]"), r#"["c10::BFloat16"]"#).with(vec![op(
                "aten::transpose",
                &format!("[[{out_features}, {HIDDEN}], [], []]"),
                r#"["c10::BFloat16", "Scalar", "Scalar"]"#,
            )
            .with(vec![op(
                "aten::as_strided",
                &format!("[[{out_features}, {HIDDEN}], [], [], []]"),
                r#"["c10::BFloat16", "", "", ""]"#,
            )])]),
            op(
                "aten::mm",
                &format!("[[{BATCH}, {HIDDEN}], [{HIDDEN}, {out_features}]]"),
                r#"["c10::BFloat16", "c10::BFloat16"]"#,
            )
            .cpu(4.0)
            .launches(launch(GEMM_KERNEL, dur_us, [(out_features / 128).max(1) as u32, 1, 1], [128, 1, 1])),
        ])
        .cpu(2.0)
}

fn all_reduce() -> Op {
    Op {
        annotation: true,
        ..op("nccl:all_reduce", &format!("[[{BATCH}, {HIDDEN}]]"), r#"["c10::BFloat16"]"#)
    }
    .with(vec![op("record_param_comms", &format!("[[[{BATCH}, {HIDDEN}]]]"), r#"["TensorList"]"#)
        .cpu(6.0)
        .launches(Launch {
            api: "cudaLaunchKernelExC",
            ..launch(ALLREDUCE_KERNEL, 29.8, [8, 1, 1], [512, 1, 1])
        })])
}

fn custom(name: &'static str, kernel: &'static str, dur_us: f64, shapes: &str) -> Op {
    op(name, shapes, r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar"]"#)
        .with(vec![op("aten::empty_like", shapes, r#"["c10::BFloat16"]"#)
            .with(vec![op("aten::empty_strided", "[[], [], [], [], [], []]", r#"["", "", "Scalar", "", "Scalar", ""]"#)])])
        .cpu(3.0)
        .launches(launch(kernel, dur_us, [BATCH as u32, 1, 1], [256, 1, 1]))
}

/// The KV-cache cast: `aten::to -> aten::_to_copy -> aten::copy_`.
fn cast(tokens: u64, dur_us: f64) -> Op {
    let dims = format!("[2, {tokens}, 1, {HEAD_DIM}]");
    op("aten::to", &format!("[{dims}, [], [], [], [], []]"), r#"["c10::Float8_e4m3fn", "Scalar", "Scalar", "Scalar", "Scalar", ""]"#)
        .with(vec![op(
            "aten::_to_copy",
            &format!("[{dims}, [], [], [], [], [], []]"),
            r#"["c10::Float8_e4m3fn", "Scalar", "", "", "", "Scalar", ""]"#,
        )
        .with(vec![
            op("aten::empty_strided", "[[], [], [], [], [], []]", r#"["", "", "Scalar", "", "Scalar", ""]"#),
            op("aten::copy_", &format!("[{dims}, {dims}, []]"), r#"["c10::BFloat16", "c10::Float8_e4m3fn", "Scalar"]"#)
                .cpu(4.0)
                .launches(Launch {
                    role: Role::Cast,
                    ..launch(CAST_KERNEL, dur_us, [((2 * tokens * HEAD_DIM) / 512).min(u32::MAX as u64) as u32, 1, 1], [128, 1, 1])
                }),
        ])])
}

fn gather(dur_us: f64) -> Op {
    let src = format!("[2, {POOL_TOKENS}, 1, {HEAD_DIM}]");
    op("aten::index_select", &format!("[{src}, [], [{ACTIVE_TOKENS}]]"), r#"["c10::Float8_e4m3fn", "Scalar", "long int"]"#)
        .with(vec![op("aten::empty", "[[], [], [], [], [], []]", r#"["", "Scalar", "Scalar", "", "Scalar", ""]"#)])
        .cpu(5.0)
        .launches(Launch {
            role: Role::Gather,
            ..launch(GATHER_KERNEL, dur_us, [4096, 1, 1], [128, 4, 1])
        })
}

/// The op groups of one layer, each with the Python module path it runs in.
fn layer_groups(variant: Variant) -> Vec<(&'static str, Vec<Op>)> {
    let act = format!("[[{BATCH}, {HIDDEN}], [{HIDDEN}], []]");
    let mut attention = vec![custom(
        "_C_cache_ops::reshape_and_cache_flash",
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long, long, long, long, int, int, int, float const*, float const*)",
        5.2,
        &format!("[[{BATCH}, 1, {HEAD_DIM}], [{BATCH}, 1, {HEAD_DIM}], [{POOL_TOKENS}, 1, {HEAD_DIM}], []]"),
    )];
    match variant {
        Variant::Baseline => attention.push(cast(POOL_TOKENS, 828.0)),
        Variant::GatherCast => {
            attention.push(gather(456.4));
            attention.push(cast(ACTIVE_TOKENS, 24.4));
        }
    }
    attention.push(
        op("vllm::unified_attention_with_output", &format!("[[{BATCH}, {TP_HEADS}, {HEAD_DIM}], [], []]"), r#"["c10::BFloat16", "c10::BFloat16", ""]"#)
            .with(vec![
                op("aten::empty_like", &format!("[[{BATCH}, {TP_HEADS}, {HEAD_DIM}]]"), r#"["c10::BFloat16"]"#),
                op("aten::view", &format!("[[{BATCH}, {}], []]", TP_HEADS * HEAD_DIM), r#"["c10::BFloat16", ""]"#),
                op("aten::empty", "[[], [], [], [], [], []]", r#"["", "Scalar", "Scalar", "", "Scalar", ""]"#),
                op("_vllm_fa2_C::varlen_fwd", &format!("[[{BATCH}, {TP_HEADS}, {HEAD_DIM}], [2, {POOL_TOKENS}, 1, {HEAD_DIM}], []]"), r#"["c10::BFloat16", "c10::BFloat16", ""]"#)
                    .cpu(6.0)
                    .with(vec![op("aten::empty", "[[], [], [], [], [], []]", r#"["", "Scalar", "Scalar", "", "Scalar", ""]"#)])
                    .launches(launch("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)", 58.7, [1, 8, 64], [128, 1, 1]))
                    .launches(launch("void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 2, true>(Flash_fwd_params)", 4.1, [512, 1, 1], [128, 1, 1])),
            ])
            .cpu(3.0),
    );
    vec![
        (
            "vllm/model_executor/layers/layernorm.py(184): forward_cuda",
            vec![custom("_C::rms_norm", "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", 6.1, &act)],
        ),
        (
            "vllm/model_executor/layers/linear.py(508): forward",
            vec![
                linear(3 * HIDDEN / TP_HEADS + 256, 41.3),
                op("aten::split_with_sizes", "[[64, 1280], [], []]", r#"["c10::BFloat16", "", "Scalar"]"#).with(vec![
                    op("aten::as_strided", "[[64, 1280], [], [], []]", r#"["c10::BFloat16", "", "", ""]"#),
                    op("aten::as_strided", "[[64, 1280], [], [], []]", r#"["c10::BFloat16", "", "", ""]"#),
                    op("aten::as_strided", "[[64, 1280], [], [], []]", r#"["c10::BFloat16", "", "", ""]"#),
                ]),
            ],
        ),
        (
            "vllm/model_executor/layers/rotary_embedding.py(143): forward_cuda",
            vec![custom(
                "_C::rotary_embedding",
                "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)",
                4.8,
                &format!("[[{BATCH}], [{BATCH}, 1024], [{BATCH}, 128], [], [131072, 128], []]"),
            )],
        ),
        ("vllm/attention/layer.py(252): forward", attention),
        ("vllm/model_executor/layers/linear.py(1290): forward", vec![linear(HIDDEN, 24.6)]),
        ("vllm/distributed/communication_op.py(13): tensor_model_parallel_all_reduce", vec![all_reduce()]),
        (
            "vllm/model_executor/layers/layernorm.py(180): forward_cuda",
            vec![custom("_C::fused_add_rms_norm", "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)", 6.4, &act)],
        ),
        ("vllm/model_executor/layers/linear.py(508): forward", vec![linear(2 * 28672 / TP_HEADS, 79.6)]),
        (
            "vllm/model_executor/layers/activation.py(96): forward_cuda",
            vec![custom(
                "_C::silu_and_mul",
                "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
                8.3,
                "[[64, 3584], [64, 7168]]",
            )],
        ),
        ("vllm/model_executor/layers/linear.py(1290): forward", vec![linear(HIDDEN, 45.2)]),
        ("vllm/distributed/communication_op.py(13): tensor_model_parallel_all_reduce", vec![all_reduce()]),
        (
            "vllm/model_executor/models/llama.py(329): forward",
            vec![
                op("aten::add_", &format!("[[{BATCH}, {HIDDEN}], [{BATCH}, {HIDDEN}], []]"), r#"["c10::BFloat16", "c10::BFloat16", "Scalar"]"#)
                    .launches(launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<c10::BFloat16>, at::detail::Array<char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<c10::BFloat16>, at::detail::Array<char*, 2>)", 3.9, [512, 1, 1], [128, 1, 1])),
                op("aten::zero_", "[[64, 128]]", r#"["float"]"#).with(vec![op("aten::fill_", "[[64, 128], []]", r#"["float", "Scalar"]"#)
                    .launches(launch("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)", 1.9, [8, 1, 1], [128, 1, 1]))]),
            ],
        ),
    ]
}

/// Ops outside the layers: embedding before, final norm, LM head, gather of
/// logits and sampling after.
fn step_prologue() -> Vec<Op> {
    vec![op("aten::embedding", "[[16032, 8192], [64], [], [], []]", r#"["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"]"#)
        .with(vec![op("aten::index_select", "[[16032, 8192], [], [64]]", r#"["c10::BFloat16", "Scalar", "long int"]"#)
            .launches(launch("void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, long)", 8.2, [64, 1, 1], [128, 1, 1]))])]
}

fn step_epilogue() -> Vec<Op> {
    vec![
        custom("_C::rms_norm", "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)", 6.1, "[[64, 8192], [8192], []]"),
        linear(16032, 150.0),
        Op { annotation: true, ..op("nccl:all_gather", "[[64, 16032]]", r#"["c10::BFloat16"]"#) }.with(vec![op("record_param_comms", "[[[64, 16032]]]", r#"["TensorList"]"#)
            .cpu(6.0)
            .launches(Launch { api: "cudaLaunchKernelExC", ..launch("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 40.2, [8, 1, 1], [512, 1, 1]) })]),
        op("aten::argmax", "[[64, 128256], [], []]", r#"["c10::BFloat16", "Scalar", "Scalar"]"#)
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
/// stack between the module's forward and the op; real `with_stack` traces
/// are this deep).
const FRAMES_PER_CALL: usize = 20;
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
        format!("{SITE}/torch/_library/custom_ops.py(681): __call__"),
        format!("{SITE}/torch/_ops.py(1243): __call__"),
        format!("{SITE}/torch/_ops.py(1158): _op_impl"),
        "<built-in method _call_op of PyCapsule object at 0x7f3a2c1b9e40>".to_string(),
        format!("{SITE}/torch/utils/_contextlib.py(116): decorate_context"),
        format!("{SITE}/torch/_library/autograd.py(111): autograd_impl"),
        format!("{SITE}/torch/_library/custom_ops.py(344): backend_impl"),
        format!("{SITE}/torch/_compile.py(51): inner"),
        format!("{SITE}/torch/_dynamo/eval_frame.py(838): _fn"),
        format!("{SITE}/torch/_library/custom_ops.py(367): wrapped_fn"),
        format!("{SITE}/vllm/_custom_ops.py(212): wrapper"),
        format!("{SITE}/torch/_ops.py(723): __call__"),
        format!("{SITE}/torch/_library/fake_impl.py(47): __call__"),
        format!("{SITE}/torch/overrides.py(1720): handle_torch_function"),
        format!("{SITE}/vllm/platforms/cuda.py(402): wrapper"),
        format!("{SITE}/torch/cuda/nvtx.py(63): range_push"),
        "<built-in method apply of type object at 0x7f3b8e2a1c60>".to_string(),
        "<built-in function _get_dispatch_stack_at>".to_string(),
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
    truth: Truth,
}

fn us_ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

impl<W: Write> Sim<'_, W> {
    fn frame(&mut self, name: &str, start: i64, end: i64, parent: i64, module: bool) -> io::Result<i64> {
        self.python_id += 1;
        let id = self.python_id;
        if self.pass == Pass::Python {
            let parent = if parent == 0 { "null".to_string() } else { parent.to_string() };
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

    /// Runs an op: returns its (start, end) on the CPU clock.
    fn run_op(&mut self, o: &Op, parent_frame: i64, depth: usize) -> io::Result<(i64, i64)> {
        // Python dispatch frames around top-level calls are emitted after we
        // know the op's span; remember where the call starts.
        let call_start = self.cpu;
        if self.p.with_stack && depth == 0 {
            self.cpu += us_ns(FRAME_US * FRAMES_PER_CALL as f64);
        }
        let start = self.cpu;
        self.external_id += 1;
        let ext = self.external_id;
        self.cpu += us_ns(1.0 * self.rng.jitter(0.2));
        for c in &o.children {
            self.run_op(c, parent_frame, depth + 1)?;
            self.cpu += us_ns(0.6);
        }
        self.cpu += us_ns(o.self_us * self.rng.jitter(0.2));
        for l in &o.launches {
            self.launch(l, ext)?;
            self.cpu += us_ns(0.8);
        }
        self.cpu += us_ns(0.7);
        let end = self.cpu;
        if self.pass == Pass::Cpu {
            self.ev_idx += 1;
            let cat = if o.annotation { "user_annotation" } else { "cpu_op" };
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},\"Record function id\": 0, \"Concrete Inputs\": {}, \"Input type\": {}, \"Input Strides\": {}, \"Input Dims\": {}, \"Ev Idx\": {}\n    }}",
                o.name,
                ts(start),
                dur(end - start),
                concrete_inputs(&o.types),
                o.types,
                strides(&o.shapes),
                o.shapes,
                self.ev_idx
            ))?;
            if o.name.starts_with("aten::empty") {
                // profile_memory: the allocation and, at the end of the op's
                // parent, its release.
                let bytes = 262_144 + (self.external_id % 7) * 65_536;
                for (at, b) in [(start, bytes), (end, -bytes)] {
                    self.allocated += b;
                    self.ev_idx += 1;
                    self.out.event(&format!(
                        "    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n    \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {},\n    \"args\": {{\n      \"Total Reserved\": 79188459520, \"Total Allocated\": {}, \"Bytes\": {b}, \"Addr\": {}, \"Device Id\": 0, \"Device Type\": 1, \"Ev Idx\": {}\n    }}",
                        ts(at),
                        71_000_000_000 + self.allocated,
                        139_820_000_000_000 + (self.external_id % 4096) * 1_048_576,
                        self.ev_idx
                    ))?;
                }
            }
        }
        if self.p.with_stack && depth == 0 {
            self.cpu += us_ns(FRAME_US * FRAMES_PER_CALL as f64);
            let mut parent = parent_frame;
            for (k, name) in call_frames().iter().enumerate() {
                let pad = us_ns(FRAME_US * k as f64);
                parent = self.frame(name, call_start + pad, self.cpu - pad, parent, false)?;
            }
        }
        Ok((start, end))
    }

    fn launch(&mut self, l: &Launch, ext: i64) -> io::Result<()> {
        self.correlation += 1;
        let corr = self.correlation;
        let launch_start = self.cpu;
        let launch_dur = us_ns(4.5 * self.rng.jitter(0.3));
        self.cpu += launch_dur;
        let k_dur = us_ns(l.dur_us * self.rng.jitter(0.01));
        let k_start = (launch_start + launch_dur + us_ns(2.0)).max(self.gpu + us_ns(0.9));
        self.gpu = k_start + k_dur;
        let k_us = k_dur as f64 / 1e3;
        self.truth.gpu_us += k_us;
        self.truth.kernels += 1;
        match l.role {
            Role::Cast => {
                self.truth.cast_us += k_us;
                self.truth.cast_calls += 1;
            }
            Role::Gather => self.truth.gather_us += k_us,
            Role::Other => {}
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
            let cbid = if l.api == "cudaLaunchKernelExC" { 430 } else { 211 };
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

    /// A group of ops inside a chain of Python frames.
    fn group(&mut self, path: &str, ops: &[Op], parent_frame: i64) -> io::Result<()> {
        let start = self.cpu;
        let depth = if self.p.with_stack { FRAMES_PER_GROUP } else { 0 };
        self.cpu += us_ns(FRAME_US * depth as f64);
        // Frames are emitted after their contents, so reserve their ids.
        let first_id = self.python_id;
        self.python_id += depth as i64;
        let inner_parent = if depth > 0 { first_id + depth as i64 } else { parent_frame };
        for o in ops {
            self.run_op(&with_views(o), inner_parent, 0)?;
            self.cpu += us_ns(1.2);
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
        let step_start = self.cpu;
        self.external_id += 1;
        let step_ext = self.external_id;
        self.cpu += us_ns(12.0);
        let top = if self.p.with_stack {
            let id = self.python_id + 1;
            self.python_id += 1;
            id
        } else {
            0
        };
        for o in step_prologue() {
            self.run_op(&o, top, 0)?;
        }
        let groups = layer_groups(self.p.variant);
        for layer in 0..self.p.layers {
            let layer_start = self.cpu;
            self.external_id += 1;
            let layer_ext = self.external_id;
            let module_frame = if self.p.with_stack {
                self.python_id += 1;
                self.python_id
            } else {
                0
            };
            self.cpu += us_ns(1.5);
            for (path, ops) in &groups {
                self.group(path, ops, module_frame)?;
            }
            self.cpu += us_ns(1.5);
            let layer_end = self.cpu;
            if self.p.with_stack {
                let saved = self.python_id;
                self.python_id = module_frame - 1;
                self.frame(&format!("nn.Module: LlamaDecoderLayer_{layer}"), layer_start, layer_end, top, true)?;
                self.python_id = saved;
            }
            if self.p.layer_annotations && self.pass == Pass::Cpu {
                self.ev_idx += 1;
                self.out.event(&format!(
                    "    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"model.layers.{layer}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {layer_ext},\"Record function id\": 0, \"Ev Idx\": {}\n    }}",
                    ts(layer_start),
                    dur(layer_end - layer_start),
                    self.ev_idx
                ))?;
            }
            self.cpu += us_ns(2.0);
        }
        for o in step_epilogue() {
            self.run_op(&o, top, 0)?;
        }
        // Copy the sampled tokens to the host and wait for the GPU.
        let copy = Op {
            name: "aten::copy_",
            annotation: false,
            shapes: "[[64], [64], []]".into(),
            types: r#"["long int", "long int", "Scalar"]"#.into(),
            children: vec![],
            launches: vec![Launch {
                api: "cudaMemcpyAsync",
                kernel: "Memcpy DtoH (Device -> Pinned)",
                dur_us: 1.8,
                grid: [0, 0, 0],
                block: [0, 0, 0],
                role: Role::Other,
            }],
            self_us: 3.0,
        };
        self.run_op(&copy, top, 0)?;
        let sync_start = self.cpu;
        self.cpu = self.cpu.max(self.gpu + us_ns(6.0));
        let sync_end = self.cpu;
        self.correlation += 1;
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
        let step_end = self.cpu;
        if self.pass == Pass::Cpu {
            self.ev_idx += 1;
            self.out.event(&format!(
                "    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{n}\", \"pid\": {PID}, \"tid\": {PID},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {step_ext},\"Record function id\": 0, \"Ev Idx\": {}\n    }}",
                ts(step_start),
                dur(step_end - step_start),
                self.ev_idx
            ))?;
        }
        if self.p.with_stack {
            let saved = self.python_id;
            self.python_id = top - 1;
            self.frame("vllm/v1/worker/gpu_model_runner.py(1480): execute_model", step_start + us_ns(4.0), step_end - us_ns(4.0), 0, false)?;
            self.python_id = saved;
        }
        self.truth.step_us.push((step_end - step_start) as f64 / 1e3);
        self.cpu += us_ns(150.0 * self.rng.jitter(0.2));
        Ok(())
    }
}

/// `Concrete Inputs` as torch writes it: `""` for tensors, a value for scalars.
fn concrete_inputs(types: &str) -> String {
    let n = types.matches('"').count() / 2;
    let items: Vec<&str> = (0..n).map(|k| if types.split(',').nth(k).is_some_and(|t| t.contains("Scalar")) { "\"0\"" } else { "\"\"" }).collect();
    format!("[{}]", items.join(", "))
}

/// Contiguous `Input Strides` for `Input Dims`.
fn strides(shapes: &str) -> String {
    let dims: Vec<serde_json::Value> = serde_json::from_str(shapes).unwrap_or_default();
    let out: Vec<String> = dims
        .iter()
        .map(|d| {
            let v: Vec<u64> = d.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).collect()).unwrap_or_default();
            let mut st = vec![0u64; v.len()];
            let mut acc = 1u64;
            for k in (0..v.len()).rev() {
                st[k] = acc;
                acc = acc.saturating_mul(v[k].max(1));
            }
            format!("[{}]", st.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
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
        truth: Truth::default(),
    };
    for n in 0..p.steps {
        sim.step(n + 1)?;
    }
    Ok(sim.truth)
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
      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472,
      "numSms": 132, "sharedMemPerBlockOptin": 232448
    }"#;
    let devices: Vec<String> = (0..8).map(|i| device.replace("\"id\": 0", &format!("\"id\": {i}"))).collect();
    let mut options = String::from("  \"record_shapes\": 1,\n  \"profile_memory\": 1,\n");
    if p.with_stack {
        options.push_str("  \"with_stack\": 1,\n");
    }
    w.raw(&format!(
        "\n{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {}\n  ],\n  \"cupti_version\": 24,\n  \"cuda_runtime_version\": 12080,\n  \"cuda_driver_version\": 12080,\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, \"pg_count\": 1, \"nccl_version\": \"2.27.3\"}},\n{options}  \"trace_id\": \"5F1C2A9B0E3D4C7A8B6E9F0A1D2C3B4A\",\n  \"traceEvents\": [\n",
        devices.join(",\n    ")
    ))?;
    let truth = simulate(p, Pass::Cpu, &mut w)?;
    if p.with_stack {
        simulate(p, Pass::Python, &mut w)?;
    }
    simulate(p, Pass::Gpu, &mut w)?;
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
    truth.events = w.events;
    truth.json_bytes = w.bytes;
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
        assert_eq!(v["traceEvents"].as_array().unwrap().len() as u64, truth.events);
        assert_eq!(truth.cast_calls, 6);
        assert_eq!(truth.json_bytes, a.len() as u64);
    }
}
