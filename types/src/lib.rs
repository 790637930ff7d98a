//! JSON types shared by the Kinetoscope server, worker and app.
//!
//! Everything here is plain data with serde derives so that it compiles for
//! both the host and `wasm32`. Field names are contracts: the summary is what
//! `kinetoscope analyze --json` prints, what the database stores and what the
//! dashboard reads, so fields are only ever added, never renamed.
//!
//! Units: every `*_us` field is microseconds as a float (nanosecond precision
//! survives as the third decimal); `*_pct` fields are percentages (0-100).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod enums;
pub mod escape;
pub mod names;
pub mod stats;
pub mod steps;
pub mod table;
pub use enums::*;

/// What a user can choose about an analysis. One type everywhere: the CLI
/// flags build it, the re-analysis API takes it (query parameters or a JSON
/// body), it is stored with the run for the job to read back, and the app
/// sends it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AnalysisOptions {
    /// Op, annotation or kernel name that starts each layer (overrides
    /// layer detection).
    pub layer_marker: Option<String>,
    /// GPU ops per layer (overrides the period search).
    pub layer_period: Option<u64>,
    /// Op, annotation or Python frame name (a substring) that spans one step
    /// (overrides step detection).
    pub step_marker: Option<String>,
    /// The device's peak memory bandwidth, GB/s (overrides the device
    /// table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gbps: Option<f64>,
    /// The device's dense BF16 tensor peak, TFLOP/s (overrides the device
    /// table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_tflops: Option<f64>,
}

impl AnalysisOptions {
    /// Longest marker accepted.
    pub const MAX_MARKER: usize = 500;
    /// Largest layer period accepted.
    pub const MAX_PERIOD: u64 = 10_000;
    /// Largest peak bandwidth accepted, GB/s (ten times today's fastest).
    pub const MAX_PEAK_GBPS: f64 = 100_000.0;
    /// Largest peak FLOP rate accepted, TFLOP/s.
    pub const MAX_PEAK_TFLOPS: f64 = 100_000.0;

    /// Blank markers and a zero period mean "not set".
    pub fn normalized(self) -> Self {
        let text = |m: Option<String>| m.map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
        let peak = |p: Option<f64>| p.filter(|&p| p > 0.0);
        AnalysisOptions {
            layer_marker: text(self.layer_marker),
            layer_period: self.layer_period.filter(|&p| p > 0),
            step_marker: text(self.step_marker),
            peak_gbps: peak(self.peak_gbps),
            peak_tflops: peak(self.peak_tflops),
        }
    }

    /// Whether nothing is set (the analysis detects everything itself).
    pub fn is_empty(&self) -> bool {
        self.layer_marker.is_none()
            && self.layer_period.is_none()
            && self.step_marker.is_none()
            && self.peak_gbps.is_none()
            && self.peak_tflops.is_none()
    }

    /// Checks the values a user sent; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, m) in [
            ("layer_marker", &self.layer_marker),
            ("step_marker", &self.step_marker),
        ] {
            if m.as_deref().is_some_and(|m| m.len() > Self::MAX_MARKER) {
                return Err(format!(
                    "{name} is too long (at most {} bytes)",
                    Self::MAX_MARKER
                ));
            }
        }
        if self
            .layer_period
            .is_some_and(|p| p == 0 || p > Self::MAX_PERIOD)
        {
            return Err(format!(
                "layer_period must be between 1 and {}",
                Self::MAX_PERIOD
            ));
        }
        for (name, p, max) in [
            ("peak_gbps", self.peak_gbps, Self::MAX_PEAK_GBPS),
            ("peak_tflops", self.peak_tflops, Self::MAX_PEAK_TFLOPS),
        ] {
            if p.is_some_and(|p| !(p.is_finite() && p > 0.0 && p <= max)) {
                return Err(format!("{name} must be a number above 0 and at most {max}"));
            }
        }
        Ok(())
    }

    /// Reads options stored with a run (lenient: unreadable text means none).
    pub fn from_stored(json: &str) -> Self {
        serde_json::from_str::<AnalysisOptions>(json)
            .unwrap_or_default()
            .normalized()
    }
}

/// The analysis of one trace file (one rank), as stored by the worker.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Summary {
    /// Version of the analyzer that produced this summary; stored runs whose
    /// version differs from the running worker's are re-analyzed.
    pub analyzer_version: u32,
    /// Facts about the trace as a whole.
    pub trace: TraceInfo,
    /// One row per distinct op name (torch `key_averages` semantics), sorted by
    /// self device time, then self CPU time. Complete: every name is listed.
    pub ops: Vec<OpRow>,
    /// One row per distinct GPU op name (kernels, memcpys, memsets), sorted by
    /// total device time. Complete: every name is listed.
    pub kernels: Vec<KernelRow>,
    /// Profiler steps in trace order.
    pub steps: Vec<StepRow>,
    /// Statistics over the steps.
    pub steps_stats: StepsStats,
    /// Where GPU time went.
    pub gpu_time: GpuTime,
    /// Per-layer attribution.
    pub layers: Layers,
    /// CUDA/HIP graph replays: how much of the device time they run.
    pub graphs: GraphStats,
    /// Ranked findings, most important first.
    pub findings: Vec<Finding>,
    /// The GPU the trace ran on and its peaks, when the trace names one or
    /// the user gave peaks; the `% of peak` and `ideal` numbers are
    /// measured against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<Device>,
    /// Memory per device, for a trace made with `profile_memory=True`
    /// (its `[memory]` events): the peak, what makes it up, the churn. The
    /// whole of it (the curve, every signature) is the run's memory
    /// artifact, `GET /api/runs/{id}/memory`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemorySummary>,
}

/// The memory of one device in a summary: what the findings and the diff
/// read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MemorySummary {
    /// `cuda:0`, `cpu`.
    pub device: String,
    /// The highest `Total Allocated`, bytes.
    pub peak_bytes: i64,
    /// When, ns on the trace's clock (the timeline's).
    pub peak_ns: i64,
    /// The step the peak falls in.
    pub peak_step: Option<String>,
    /// The highest `Total Reserved`, bytes.
    pub reserved_peak_bytes: Option<i64>,
    /// The largest allocations live at the peak.
    pub live_at_peak: Vec<LiveAllocation>,
    /// Bytes allocated and freed within the same step, per step.
    pub churn_bytes_per_step: Option<f64>,
    /// The signatures that churn most (at most 3).
    pub top_churn: Vec<SignatureMemory>,
    /// Steps seen and, when memory grows from step to step, by how much a
    /// step on average (bytes).
    pub steps: u64,
    /// Growth per step, bytes, when most steps end above where they began.
    pub growth_bytes_per_step: Option<f64>,
}

/// An allocation live at the memory peak.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LiveAllocation {
    /// Bytes.
    pub bytes: i64,
    /// The op that made it (the innermost op around the allocation, past
    /// the allocator's own `aten::empty*`); empty when none.
    pub op: String,
    /// That op's input dims.
    pub shapes: String,
    /// That op's input dtypes.
    pub dtypes: String,
    /// When it was allocated, ns on the trace's clock (the timeline's).
    pub t_ns: i64,
    /// Its Python frames, innermost first, when the trace has them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<String>,
}

/// What one op signature allocates.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SignatureMemory {
    /// Op.
    pub op: String,
    /// Input dims (`[[2, 1114112, 1, 128], [], …]`).
    pub shapes: String,
    /// Input dtypes.
    pub dtypes: String,
    /// Calls that allocated.
    pub calls: u64,
    /// Bytes allocated per such call.
    pub bytes_per_call: f64,
    /// Bytes allocated per step (over the trace when it has no steps).
    pub bytes_per_step: f64,
    /// Of those, bytes freed within the same step, per step.
    pub churn_bytes_per_step: f64,
}

/// One step's memory on a device.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StepMemory {
    /// The step's name.
    pub step: String,
    /// Start and end, ns on the trace's clock (the timeline's).
    pub start_ns: i64,
    /// End.
    pub end_ns: i64,
    /// The highest `Total Allocated` in the step.
    pub peak_bytes: i64,
    /// `Total Allocated` at its end less at its start.
    pub net_bytes: i64,
}

/// The memory artifact of one device: `GET /api/runs/{id}/memory`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MemoryDevice {
    /// `cuda:0`, `cpu`.
    pub device: String,
    /// The highest `Total Allocated`, bytes.
    pub peak_bytes: i64,
    /// When, ns on the trace's clock (the timeline's).
    pub peak_ns: i64,
    /// The highest `Total Reserved` (-1 when the trace has none).
    pub reserved_peak_bytes: i64,
    /// `[t_ns, allocated, reserved]`, in time order: every change near the
    /// peak and each step's highest and lowest exact, the rest kept as
    /// each time bucket's lowest and highest.
    pub series: Vec<[i64; 3]>,
    /// How many memory events the series was drawn from.
    pub events: u64,
    /// The largest allocations live at the peak (at most 20).
    pub live_at_peak: Vec<LiveAllocation>,
    /// What each op signature allocates, most bytes per step first.
    pub by_signature: Vec<SignatureMemory>,
    /// Per step: its peak and net change.
    pub steps: Vec<StepMemory>,
}

/// One counter track (`ph: "C"` events: one key of one counter of one
/// process), as the `counters` artifact keeps it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CounterTrack {
    /// What the timeline labels it: the counter's name, and its key when
    /// the counter has several (`DRAM Throughput`, `queue.length`).
    pub label: String,
    /// The event's name.
    pub name: String,
    /// The `args` key.
    pub key: String,
    /// The process (pid as written).
    pub process: String,
    /// The GPU it measures, where the process says (Kineto's GPU pid, or
    /// `GPU N` in its name).
    pub device: Option<i64>,
    /// `%` for shares, `bytes`, or none when the name does not say.
    pub unit: Option<String>,
    /// Samples in the trace.
    pub samples: u64,
    /// Lowest value.
    pub min: f64,
    /// Highest value.
    pub max: f64,
    /// Mean of the samples.
    pub mean: f64,
    /// `[t_ns, value]` in time order, at a bounded resolution (each time
    /// bucket's lowest and highest).
    pub points: Vec<(i64, f64)>,
}

/// The counters artifact: `GET /api/runs/{id}/counters`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CounterReport {
    /// Tracks, by process then label.
    pub tracks: Vec<CounterTrack>,
}

/// A counter's mean over a kernel's runs (PM sampling: DRAM bandwidth, SM
/// activity).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CounterMean {
    /// The counter track's label.
    pub counter: String,
    /// Its unit.
    pub unit: Option<String>,
    /// Mean of the samples taken while the kernel ran.
    pub mean: f64,
    /// Samples taken while it ran.
    pub samples: u64,
}

/// The memory artifact: every device of the trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MemoryReport {
    /// Devices, by name.
    pub devices: Vec<MemoryDevice>,
}

/// A GPU and what it can do at most: the ceilings a kernel's bandwidth and
/// FLOP rate are measured against.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Device {
    /// The device's name: the table's (`NVIDIA H200`), or as the trace
    /// writes it when the table does not know it (`unknown device` when
    /// the trace names none).
    pub name: String,
    /// Peak memory bandwidth, GB/s.
    pub peak_gbps: Option<f64>,
    /// Dense BF16 (FP16 where the device has no BF16) tensor peak, TFLOP/s.
    pub peak_tflops_bf16: Option<f64>,
    /// Dense FP8 tensor peak, TFLOP/s (none on devices without FP8).
    pub peak_tflops_fp8: Option<f64>,
    /// Dense FP32 peak (tensor or matrix cores where they take FP32), TFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_tflops_fp32: Option<f64>,
    /// Streaming multiprocessors (compute units on AMD), from
    /// `deviceProperties`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    /// Where the peaks come from.
    pub source: PeakSource,
}

impl Device {
    /// Its peaks in words, `4.80 TB/s · 989 TFLOP/s BF16 · 1.98 PFLOP/s
    /// FP8`; empty for a device the table does not know. The run page and
    /// the CLI both show this.
    pub fn peaks_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(b) = self.peak_gbps {
            parts.push(units::rate_gbps(b));
        }
        if let Some(t) = self.peak_tflops_bf16 {
            parts.push(format!("{} BF16", units::rate_tflops(t)));
        }
        if let Some(t) = self.peak_tflops_fp8 {
            parts.push(format!("{} FP8", units::rate_tflops(t)));
        }
        parts.join(" · ")
    }

    /// The peak FLOP rate for a dtype as profiler writes it: FP8 dtypes
    /// against the FP8 peak, 32-bit floats against the FP32 peak, the rest
    /// (BF16, FP16) against the BF16 peak.
    pub fn peak_tflops_for(&self, dtype: &str) -> Option<f64> {
        let d = dtype.strip_prefix("c10::").unwrap_or(dtype);
        if d.starts_with("Float8") {
            self.peak_tflops_fp8
        } else if d == "float" {
            self.peak_tflops_fp32
        } else {
            self.peak_tflops_bf16
        }
    }
}

/// Whether a value is its type's default: fields added to the stored
/// summary after runs were stored are written only when they say
/// something, so a summary stored before them reads back and writes the
/// same bytes (`tests/stored.rs`), and absent reads as the default.
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl Summary {
    /// The time its ops are ranked by: the trace's own basis, and self CPU
    /// time wherever there is no GPU work (a summary stored before
    /// `time_basis` was written reads the same).
    pub fn time_basis(&self) -> TimeBasis {
        if self.gpu_time.gpu_op_us > 0.0 {
            self.trace.time_basis
        } else {
            TimeBasis::Cpu
        }
    }
}

/// How the trace's GPU work was issued: eagerly, or by graph replays.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GraphStats {
    /// `eager` (no graph launches), `graph` (graph replays run nearly all
    /// device time), or `piecewise` (replays with eager GPU work between them).
    pub mode: GraphMode,
    /// Graph launches (`cudaGraphLaunch`, `hipGraphLaunch`, `cuGraphLaunch`).
    pub replays: u64,
    /// GPU ops the replays ran.
    pub gpu_ops: u64,
    /// Device time of those GPU ops, µs.
    pub device_us: f64,
    /// `device_us` as a share of all GPU-op time.
    pub pct: f64,
    /// Device time of GPU ops launched one by one (outside graphs), µs.
    pub eager_us: f64,
    /// Device time of GPU ops whose launch is not in the file (launched
    /// before the profiling window opened), µs: neither eager nor a
    /// replay's, as far as the trace tells.
    #[serde(skip_serializing_if = "is_default")]
    pub unlaunched_us: f64,
    /// The eager GPU op names with the most device time (piecewise mode:
    /// what runs between the graphs).
    pub top_eager: Vec<NameTime>,
    /// CPU time of the replays' contexts not spent in graph launches: the
    /// host work between replays, µs.
    pub host_between_us: f64,
}

/// Facts about the trace as a whole.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TraceInfo {
    /// Number of entries in the `traceEvents` array (every phase).
    pub events: u64,
    /// The time ops are ranked by: `device`, or `cpu` where the trace has
    /// no GPU ops or its steps are bound by the host ([`TimeBasis::of`]).
    #[serde(skip_serializing_if = "is_default")]
    pub time_basis: TimeBasis,
    /// Number of GPU kernel events.
    pub kernels: u64,
    /// Number of GPU memcpy events.
    pub memcpys: u64,
    /// Number of GPU memset events.
    pub memsets: u64,
    /// Number of CPU ops (`cpu_op`/`Operator`) and annotations (`user_annotation`).
    pub cpu_ops: u64,
    /// Number of runtime and driver calls (`cuda_runtime`, `cuda_driver`, `Runtime`).
    pub runtime_calls: u64,
    /// Length of the profiled window: first event start to last event end.
    pub span_us: f64,
    /// Absolute start of the window in ns since the Unix epoch, when the trace
    /// carries epoch time (all Kineto traces do); lets ranks be aligned.
    pub start_epoch_ns: Option<i64>,
    /// Names of the devices in `deviceProperties` (one per visible GPU).
    pub devices: Vec<String>,
    /// Device indices that ran GPU ops in this trace.
    pub active_devices: Vec<i64>,
    /// The rank (process index in the job).
    pub rank: Option<i64>,
    /// Number of ranks in the job, when the trace says.
    pub world_size: Option<i64>,
    /// Collective backend (`nccl`, `gloo`), when the trace says.
    pub backend: Option<String>,
    /// Profiler options seen at the top level (`record_shapes`, `with_stack`, ...).
    pub profiler_options: Vec<String>,
    /// `object` (a `traceEvents` object) or `array` (the 2020 bare array).
    pub layout: TraceLayout,
    /// `schemaVersion` at the top level.
    pub schema_version: Option<i64>,
    /// `traceName` at the top level (the file the profiler wrote).
    pub trace_name: Option<String>,
    /// `baseTimeNanoseconds`: what timestamps are relative to.
    pub base_time_ns: Option<i64>,
    /// Decompressed JSON size in bytes.
    pub json_bytes: u64,
    /// Events per category as written in the file (`cat`), known or not.
    pub categories: Vec<CategoryCount>,
    /// Categories this analyzer does not interpret (kept and counted).
    pub unknown_categories: Vec<String>,
    /// How GPU ops found their launch and op; see [`Attribution`].
    pub attribution: Attribution,
    /// Peak of `Total Allocated` over `[memory]` events, per device (`cuda:0`, `cpu`).
    pub peak_memory: Vec<PeakMemory>,
    /// Non-fatal oddities met while reading (e.g. partial overlaps repaired).
    pub notes: Vec<String>,
}

/// Count of events of one `cat` value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CategoryCount {
    /// The category.
    pub category: String,
    /// Events of this category.
    pub events: u64,
}

/// How GPU ops were linked to launches and launches to ops.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Attribution {
    /// GPU ops (kernels, memcpys, memsets) in the trace.
    pub gpu_ops: u64,
    /// GPU ops whose launch was found through `args.correlation`.
    pub by_correlation: u64,
    /// GPU ops whose launch was found through a flow event (fallback).
    pub by_flow: u64,
    /// GPU ops with no launch in the file (launched before the window opened).
    pub without_launch: u64,
    /// GPU ops whose launch was found but was made outside any recorded op.
    pub without_op: u64,
    /// Device time of GPU ops without a launch, or whose (non-graph)
    /// launch was made outside any op, in µs.
    pub unattributed_us: f64,
    /// Device time of GPU ops run by graph replays, in µs: attributed to
    /// the replay's context (`graph replay: ...` rows of the op table).
    pub graph_replay_us: f64,
    /// Launches by CUDA/HIP graph replay (`cudaGraphLaunch`, `hipGraphLaunch`).
    pub graph_launches: u64,
    /// GPU ops run by graph launches.
    pub graph_gpu_ops: u64,
    /// `external_id` when `External id` links runtime events to ops (2020-21,
    /// 2024+ traces), `correlation` when it merely repeats the correlation
    /// (2022-23 traces). Informational: attribution always uses time nesting.
    pub external_id_regime: ExternalIdRegime,
}

/// Peak allocator usage on one device.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PeakMemory {
    /// Device.
    pub device: String,
    /// Bytes.
    pub bytes: i64,
}

/// One op name aggregated over all its calls, as torch's `key_averages()`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct OpRow {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// `op` (cpu_op), `annotation` (user_annotation / record_function),
    /// `runtime` (CUDA/HIP runtime and driver calls), or `graph` (a graph
    /// replay context: `graph replay: <op, annotation or Python frame>`,
    /// whose device time is the GPU ops its replays ran).
    pub kind: OpKind,
    /// Number of calls.
    pub calls: u64,
    /// CPU time of the calls minus the time of their child events.
    pub self_cpu_us: f64,
    /// Total CPU time of the calls (wall time of the op spans).
    pub cpu_total_us: f64,
    /// Device time of GPU ops launched directly by this op (not by child ops).
    pub self_device_us: f64,
    /// Device time of GPU ops launched anywhere under this op.
    pub device_total_us: f64,
    /// `self_device_us` as a share of all GPU-op time.
    pub device_pct: f64,
    /// GPU ops launched directly by this op.
    pub gpu_ops: u64,
    /// Calls per profiler step, when the trace has steps.
    pub calls_per_step: Option<f64>,
    /// Input signatures (needs `record_shapes`), most self device time
    /// first, then most calls.
    pub input_shapes: Vec<ShapeGroup>,
    /// Bytes read plus written per call, for copy/cast-like ops whose shapes
    /// and dtypes are known (the most common shape group).
    pub bytes_per_call: Option<f64>,
    /// `bytes_per_call` over the self device time per call, in GB/s (1e9 B/s).
    pub achieved_gbps: Option<f64>,
}

impl OpRow {
    /// The value the op table sorts by for a column key (`calls`,
    /// `self_cpu`, `cpu_total`, `self_device`, `device_total`,
    /// `avg_device`, `device_pct`, `bytes`, `gbps`); `None` for text columns.
    /// Rows without bytes or a rate sort below every row that has one.
    pub fn sort_value(&self, col: &str) -> Option<f64> {
        Some(match col {
            "calls" => self.calls as f64,
            "self_cpu" => self.self_cpu_us,
            "cpu_total" => self.cpu_total_us,
            "self_device" => self.self_device_us,
            "device_total" => self.device_total_us,
            "avg_device" => self.self_device_us / self.calls.max(1) as f64,
            "device_pct" => self.device_pct,
            "bytes" => self.bytes_per_call.unwrap_or(-1.0),
            "gbps" => self.achieved_gbps.unwrap_or(-1.0),
            _ => return None,
        })
    }
}

/// Calls of an op with one input signature.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ShapeGroup {
    /// `Input Dims` as written, e.g. `[[2, 4096], [2, 4096], []]`.
    pub shapes: String,
    /// `Input type` as written, e.g. `["c10::BFloat16", "c10::Float8_e4m3fn", "Scalar"]`.
    pub dtypes: String,
    /// Number of calls.
    pub calls: u64,
    /// Self CPU, µs.
    pub self_cpu_us: f64,
    /// Self device, µs.
    pub self_device_us: f64,
    /// Bytes read plus written per call, for copy/cast-like ops.
    pub bytes_per_call: Option<f64>,
    /// Bytes moved over device time, GB/s.
    pub achieved_gbps: Option<f64>,
    /// Calls per step, when the trace has steps.
    pub calls_per_step: Option<f64>,
    /// `self_device_us` as a share of all GPU-op time.
    pub device_pct: f64,
    /// For casts: `source -> destination` (`Float8_e4m3fn -> BFloat16`),
    /// read in PyTorch's order `copy_(self=dst, src)`.
    pub conversion: Option<String>,
    /// The ops around these calls (outermost to the direct parent) that
    /// carry most of their device time.
    pub parents: Vec<String>,
    /// Python frames above the outermost of those ops (innermost last),
    /// where the trace has them.
    pub python: Vec<String>,
    /// `achieved_gbps` as a share of the device's peak bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pct_of_peak_bw: Option<f64>,
    /// `bytes_per_call` at the device's peak bandwidth, µs: the least a
    /// call can take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_us: Option<f64>,
    /// Floating-point operations per call, from the GEMM's shapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_call: Option<f64>,
    /// FLOPs over device time, TFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_tflops: Option<f64>,
    /// `achieved_tflops` as a share of the device's peak for the dtype.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pct_of_peak_flops: Option<f64>,
    /// For a copy or cast of the same tensor on every call of every step
    /// while a tensor of its layout grows from step to step: which part the
    /// steps use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partly_used: Option<PartlyUsed>,
    /// A copy or cast of the same tensor (shape and dtypes) several times in
    /// every step, every step: work a loop repeats on an unchanged input
    /// (the story's FP8 pool cast once per layer), whether or not a growing
    /// tensor shows which part the steps use.
    #[serde(skip_serializing_if = "is_default")]
    pub loop_invariant: bool,
}

/// A tensor converted whole while the steps use a growing part of it: the
/// KV cache cast every layer where a decode step reads only its active
/// entries.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PartlyUsed {
    /// The dimension (0-based, of the first input) that holds the rows.
    pub dim: u32,
    /// Its length in the converted tensor (`20000`).
    pub rows: u64,
    /// The most rows a tensor of the same layout elsewhere in the trace
    /// holds (`206`); its length grows from step to step.
    pub used_rows: u64,
    /// The op whose inputs grow (`aten::bmm`).
    pub seen_in: String,
    /// The growing signature with the most rows (`[206, 4, 64]`).
    pub seen_shape: String,
}

impl ShapeGroup {
    /// Self device time per call, µs.
    pub fn device_per_call_us(&self) -> f64 {
        self.self_device_us / self.calls.max(1) as f64
    }
}

/// One GPU op name (kernel, memcpy or memset) aggregated over its calls.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct KernelRow {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// The name without template arguments, parameter list or return type.
    pub short_name: String,
    /// gemm, attention, communication, memory, elementwise, reduction, norm, other.
    pub category: KernelCategory,
    /// `kernel`, `memcpy` or `memset`.
    pub kind: GpuOpKind,
    /// Number of calls.
    pub calls: u64,
    /// Total, µs.
    pub total_us: f64,
    /// Mean per call, µs.
    pub avg_us: f64,
    /// Shortest call, µs.
    pub min_us: f64,
    /// Longest call, µs.
    pub max_us: f64,
    /// Share of all GPU-op time.
    pub pct: f64,
    /// Most common launch grid and block.
    pub grid: Option<[u32; 3]>,
    /// Most common launch block.
    pub block: Option<[u32; 3]>,
    /// Bytes moved per call (memcpy/memset, from `args.bytes`).
    pub bytes_per_call: Option<f64>,
    /// Calls per profiler step, when the trace has steps.
    pub calls_per_step: Option<f64>,
    /// The distinct op chains (outermost to innermost) that launched it.
    pub launched_by: Vec<LaunchChain>,
    /// Calls split by launch geometry (grid, block), most device time first:
    /// kernels that share a name (every cast to BF16, say) differ here.
    pub groups: Vec<KernelGroup>,
}

/// Calls of one kernel with one launch geometry.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct KernelGroup {
    /// Grid.
    pub grid: Option<[u32; 3]>,
    /// Most common launch block.
    pub block: Option<[u32; 3]>,
    /// Number of calls.
    pub calls: u64,
    /// Calls per step.
    pub calls_per_step: Option<f64>,
    /// Total, µs.
    pub total_us: f64,
    /// Mean per call, µs.
    pub avg_us: f64,
    /// Share of all GPU-op time.
    pub pct: f64,
    /// The op that launched most of these calls, with its input signature.
    pub op: Option<String>,
    /// Shapes.
    pub shapes: Option<String>,
    /// Dtypes.
    pub dtypes: Option<String>,
    /// For casts: `source -> destination`.
    pub conversion: Option<String>,
    /// Bytes read plus written per call (copy/cast ops, memcpy, memset).
    pub bytes_per_call: Option<f64>,
    /// Bytes moved over device time, GB/s.
    pub achieved_gbps: Option<f64>,
    /// `achieved_gbps` as a share of the device's peak bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pct_of_peak_bw: Option<f64>,
    /// `bytes_per_call` at the device's peak bandwidth, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_us: Option<f64>,
    /// FLOPs over device time, TFLOP/s, where the launching op is a GEMM
    /// with recorded shapes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_tflops: Option<f64>,
    /// `achieved_tflops` as a share of the device's peak for the dtype.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pct_of_peak_flops: Option<f64>,
    /// PM-sampling counters of its device averaged over its runs (traces
    /// with counter tracks: DRAM throughput, SM activity).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterMean>,
}

impl KernelRow {
    /// Its calls and device time (µs) launched from within `op`: the sums
    /// of its launch chains (`launched_by`, the top ones kept) that hold the
    /// op. What a finding about an op and its kernel have in common.
    pub fn launched_from(&self, op: &str) -> (u64, f64) {
        self.launched_by
            .iter()
            .filter(|c| c.chain.iter().any(|n| n == op))
            .fold((0, 0.0), |(calls, us), c| {
                (calls + c.calls, us + c.total_us)
            })
    }

    /// The value the kernel table sorts by for a column key (`calls`,
    /// `total`, `avg`, `min`, `max`, `pct`); `None` for text columns.
    pub fn sort_value(&self, col: &str) -> Option<f64> {
        Some(match col {
            "calls" => self.calls as f64,
            "total" => self.total_us,
            "avg" => self.avg_us,
            "min" => self.min_us,
            "max" => self.max_us,
            "pct" => self.pct,
            _ => return None,
        })
    }
}

/// One path from the outermost op to the op that launched a kernel.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LaunchChain {
    /// Op names from outermost to innermost (the launching op). Step markers
    /// are written with `#*` in place of the step number so that the same
    /// path in different steps is one chain. Empty when no op enclosed the
    /// launch.
    pub chain: Vec<String>,
    /// The runtime call that launched it (`cudaLaunchKernel`, `cudaGraphLaunch`, ...).
    pub launch: String,
    /// Number of calls.
    pub calls: u64,
    /// Total, µs.
    pub total_us: f64,
    /// Python frames above the outermost op (or, for a graph replay outside
    /// any op, above the launch), outermost first, innermost last; bounded
    /// in depth, consecutive repeats folded. Empty without `with_stack`.
    pub python: Vec<String>,
}

/// One profiler step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StepRow {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Step number when the name carries one (`ProfilerStep#12` -> 12).
    pub number: Option<i64>,
    /// Start relative to the start of the trace window.
    pub start_us: f64,
    /// CPU-side duration of the step annotation.
    pub cpu_us: f64,
    /// The step's time, what the statistics, the slow-step rule and the
    /// charts read ([`StepRow::time`]): the longer of its CPU range and its
    /// GPU-side span. When the CPU runs ahead of the GPU (CUDA-graph
    /// replays, a loop without a sync per step) its CPU range is a fraction
    /// of the step, and the GPU's span is the step's period.
    #[serde(skip_serializing_if = "is_default")]
    pub time_us: f64,
    /// CPU start to the end of the step's GPU work (its latency).
    #[serde(skip_serializing_if = "is_default")]
    pub wall_us: f64,
    /// GPU-op time of the GPU ops launched within the step.
    pub device_us: f64,
    /// First start to last end of those GPU ops.
    pub gpu_span_us: f64,
    /// The step's GPU-side span, relative to the start of the trace window:
    /// torch's `gpu_user_annotation` of the step where the trace has one,
    /// else the span of the GPU ops launched within the step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_start_us: Option<f64>,
    /// Its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_end_us: Option<f64>,
    /// CPU time the step spent compiling (`torch.compile`'s dynamo and
    /// Inductor ranges inside it, the outermost of them), µs.
    #[serde(skip_serializing_if = "is_default")]
    pub compile_us: f64,
    /// GPU ops launched within the step.
    pub kernels: u64,
    /// `prefill`, `decode` or `mixed`, where the step's name tells, or
    /// where its ops' shapes do (many more tokens than the other steps: a
    /// prefill).
    pub kind: Option<StepKind>,
    /// Left out of the step statistics: a trailing step that ran no GPU op
    /// in a trace that has GPU ops (the engine's frame after the last batch).
    #[serde(skip_serializing_if = "is_default")]
    pub left_out: bool,
}

impl StepRow {
    /// The step's time ([`StepRow::time_us`]); a summary stored before it
    /// was written has its CPU range.
    pub fn time(&self) -> f64 {
        if self.time_us > 0.0 {
            self.time_us
        } else {
            self.cpu_us
        }
    }
}

/// Statistics over the steps' times ([`StepRow::time`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StepsStats {
    /// Count (steps [`left_out`](StepRow::left_out) are not counted).
    pub count: u64,
    /// Trailing steps without GPU work, left out of these statistics.
    #[serde(skip_serializing_if = "is_default")]
    pub left_out: u64,
    /// What marked the steps: `ProfilerStep`, the serving framework's step
    /// annotation (`step[...]`, `execute_...`, `capture_...`), an engine's
    /// own Python frame (`frame: <name>`), a frame the user named, or, in a
    /// trace without step marks that runs its forward pass several times,
    /// `forward passes` (each pass a step, named `forward pass #N`).
    pub source: String,
    /// Mean, µs.
    pub mean_us: f64,
    /// P50, µs.
    pub p50_us: f64,
    /// P90, µs.
    pub p90_us: f64,
    /// Shortest call, µs.
    pub min_us: f64,
    /// Longest call, µs.
    pub max_us: f64,
    /// Mean device, µs.
    pub mean_device_us: f64,
    /// The same statistics per step kind (prefill, decode, mixed), when
    /// steps have kinds.
    pub by_kind: Vec<StepKindStats>,
}

/// Step statistics of one kind of step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StepKindStats {
    /// Kind.
    pub kind: StepKind,
    /// Count.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// P50, µs.
    pub p50_us: f64,
    /// Mean device, µs.
    pub mean_device_us: f64,
}

/// Where GPU time went over the window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GpuTime {
    /// First start to last end, µs.
    pub span_us: f64,
    /// Time at least one GPU op ran (union over streams and devices' own
    /// timelines, summed over devices).
    pub busy_us: f64,
    /// Idle, µs.
    pub idle_us: f64,
    /// Share of the window the GPU was busy, %.
    pub busy_pct: f64,
    /// Sum of GPU-op durations (can exceed `busy_us` when streams overlap).
    pub gpu_op_us: f64,
    /// Kernel calls of the names the kernel table leaves out (a trace of
    /// more names than it lists): what its rows' counts lack.
    #[serde(skip_serializing_if = "is_default")]
    pub left_out_kernel_calls: u64,
    /// Those of them whose name runs under the small-kernel bound on
    /// average (the launch-bound finding's count).
    #[serde(skip_serializing_if = "is_default")]
    pub left_out_small_kernel_calls: u64,
    /// By category.
    pub by_category: Vec<CategoryTime>,
    /// Streams.
    pub streams: Vec<StreamTime>,
}

/// GPU-op time of one kernel category.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CategoryTime {
    /// The category.
    pub category: KernelCategory,
    /// Time, µs.
    pub us: f64,
    /// Share, %.
    pub pct: f64,
    /// Number of calls.
    pub calls: u64,
}

/// Activity of one GPU stream.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StreamTime {
    /// Device.
    pub device: i64,
    /// Stream.
    pub stream: i64,
    /// Busy, µs.
    pub busy_us: f64,
    /// GPU ops.
    pub gpu_ops: u64,
}

/// Per-layer attribution of device time.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Layers {
    /// `annotation`, `module`, `repetition`, `override`, or `none`.
    pub method: LayerMethod,
    /// The time the layers' numbers measure: `device` (GPU time), or `cpu`
    /// on a trace without GPU ops, whose layers are groups of CPU ops. Every
    /// `device_us` and `by_category` of the rows is then CPU time.
    #[serde(skip_serializing_if = "is_default")]
    pub basis: TimeBasis,
    /// How sure the method is, 0 to 1.
    pub confidence: f64,
    /// Number of layers found.
    pub count: u64,
    /// For `repetition`: the period (ops per layer) found.
    pub period: Option<u64>,
    /// The op, annotation or module name that marks a layer.
    pub marker: Option<String>,
    /// A sentence on how the layers were found, or why not.
    pub detail: String,
    /// Steps the per-layer numbers are averaged over (1 without steps).
    pub steps: u64,
    /// Forward passes the per-layer numbers are averaged over, where a
    /// trace without step marks runs its forward pass several times (0
    /// otherwise): the numbers are then per pass, not per step.
    #[serde(skip_serializing_if = "is_default")]
    pub passes: u64,
    /// The rows of this page.
    pub items: Vec<LayerRow>,
    /// Device time outside any layer (embedding, sampling, communication outside layers), per step.
    pub outside: LayerRow,
}

/// One layer's device time, averaged per step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LayerRow {
    /// Index.
    pub index: i64,
    /// The decoder block's kind where names tell: `linear` (no attention's
    /// KV cache), `moe` or `dense`; `prefix` is no longer written.
    pub kind: Option<LayerKind>,
    /// Device time per step, µs (CPU time where the layers' `basis` is `cpu`).
    pub device_us: f64,
    /// By category.
    pub by_category: BTreeMap<String, f64>,
    /// Top ops.
    pub top_ops: Vec<NameTime>,
    /// Top kernels.
    pub top_kernels: Vec<NameTime>,
}

/// A name with a time, for short top-N lists.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NameTime {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Time, µs.
    pub us: f64,
}

/// One finding: a plain sentence with its numbers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Finding {
    /// Stable identifier of the rule that produced it (`top_op`, `gpu_idle`, ...).
    pub kind: FindingKind,
    /// The sentence.
    pub text: String,
    /// How much it matters: the share of step or GPU time it speaks of (0-100).
    pub impact_pct: f64,
    /// The table row it speaks of, for linking: `ops`, `kernels`, `steps`, `gpu`, `layers`.
    pub tab: Option<FindingTab>,
    /// The name, as written in the trace or given by the user.
    pub name: Option<String>,
    /// Evidence of another finding's root cause: the place, in the same
    /// list, of the finding that leads its group (the cause's fix where one
    /// is known). `None` for a lead and for a finding of its own. A lead's
    /// `impact_pct` is its group's; the impacts of the leads are what add up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<u32>,
}

/// Cross-rank summary of a multi-rank run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RanksSummary {
    /// Ranks.
    pub ranks: Vec<RankStats>,
    /// Rank with the largest mean step time (or span without steps).
    pub slowest_rank: Option<i64>,
    /// How much slower the slowest rank is than the median rank, in %.
    pub slowest_by_pct: f64,
    /// Per-rank self device share of the top ops (by total over ranks).
    pub top_ops: Vec<RankOpShare>,
    /// Ranked sentences, most important first.
    pub findings: Vec<Finding>,
}

/// One rank's headline numbers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RankStats {
    /// The rank (process index in the job).
    pub rank: i64,
    /// Steps.
    pub steps: u64,
    /// Mean step time, µs.
    pub mean_step_us: f64,
    /// P90 step, µs.
    pub p90_step_us: f64,
    /// Step, µs.
    pub step_us: Vec<f64>,
    /// First start to last end, µs.
    pub span_us: f64,
    /// Share of the window the GPU was busy, %.
    pub busy_pct: f64,
    /// Device time of communication (nccl/rccl) GPU ops.
    pub collective_us: f64,
    /// GPU op, µs.
    pub gpu_op_us: f64,
    /// What bounds this rank's step (a cross-rank summary stored before
    /// it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// Self device share of one op on each rank.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RankOpShare {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Indexed like `RanksSummary::ranks`.
    pub pct: Vec<f64>,
    /// Time, µs.
    pub us: Vec<f64>,
}

// ---------------------------------------------------------------- diff

/// Before/after comparison of two runs' summaries.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Diff {
    /// Run A.
    pub a: DiffSide,
    /// Run B.
    pub b: DiffSide,
    /// `per step` when both runs have steps, else `per trace`.
    pub basis: DiffBasis,
    /// Steps.
    pub steps: StepsDiff,
    /// GPU busy.
    pub gpu_busy: ValueDiff,
    /// Ops.
    pub ops: Vec<DeltaRow>,
    /// Each op's self CPU time per step (per trace without steps), A and B,
    /// the step ranges' own self time (Python between ops) as
    /// `ProfilerStep#*`, ranked by the change: what the host spent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_ops: Vec<DeltaRow>,
    /// The host's time as a whole, and how its change is spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostChange>,
    /// Kernels.
    pub kernels: Vec<DeltaRow>,
    /// Categories.
    pub categories: Vec<DeltaRow>,
    /// Per-layer attribution.
    pub layers: Vec<LayerDelta>,
    /// Added ops.
    pub added_ops: Vec<String>,
    /// Removed ops.
    pub removed_ops: Vec<String>,
    /// Added kernels.
    pub added_kernels: Vec<String>,
    /// Removed kernels.
    pub removed_kernels: Vec<String>,
    /// Per-rank comparison when both runs have several ranks.
    pub ranks: Vec<RankDelta>,
    /// Ranked sentences, most important first.
    pub findings: Vec<DiffFinding>,
    /// What `ops` measure: self device time, or self CPU time when neither
    /// trace has GPU ops.
    pub op_time: TimeBasis,
    /// Memory per device both runs have (traces with `[memory]` events):
    /// the peak and the churn per step, before and after.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryDelta>,
}

/// One device's memory in a diff.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct MemoryDelta {
    /// `cuda:0`, `cpu`.
    pub device: String,
    /// Peak allocated in A and B, bytes.
    pub a_peak_bytes: i64,
    /// B's.
    pub b_peak_bytes: i64,
    /// Change of the peak, %.
    pub peak_change_pct: f64,
    /// Bytes made and dropped within a step, per step, in A and B.
    pub a_churn_bytes_per_step: Option<f64>,
    /// B's.
    pub b_churn_bytes_per_step: Option<f64>,
}

/// Which run a side of a diff is.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DiffSide {
    /// The run id (22 URL-safe characters).
    pub id: String,
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Devices.
    pub devices: Vec<String>,
    /// Steps.
    pub steps: u64,
    /// Mean step time, µs.
    pub mean_step_us: f64,
    /// P50 step, µs.
    pub p50_step_us: f64,
    /// Share of the window the GPU was busy, %.
    pub busy_pct: f64,
    /// Per-layer attribution.
    pub layers: Vec<LayerRow>,
    /// Layer method.
    pub layer_method: LayerMethod,
    /// What bounds the run's step, and the parts it is told by (a diff of
    /// summaries stored before it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// What bounds a run's step: the GPU (busy most of the step), the host
/// (CPU work between launches, launch overhead, Python), or waits on syncs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Bound {
    /// Which.
    pub by: StepBound,
    /// Share of the window the GPU was busy, %.
    pub gpu_busy_pct: f64,
    /// Self CPU time of every op, runtime call and step range per step
    /// (per trace without steps), µs, waits aside: the host's work.
    pub host_us: f64,
    /// CPU time blocked waiting for the GPU (synchronizing calls, launches
    /// on a full queue) per step, µs.
    pub sync_us: f64,
    /// The step's time (per trace without steps), µs.
    pub step_us: f64,
}

impl Bound {
    /// Words for it: `bound by the GPU (busy 87.0%)`.
    pub fn words(&self) -> String {
        use crate::units::{pct, time_us};
        match self.by {
            StepBound::Gpu => format!("bound by the GPU (busy {})", pct(self.gpu_busy_pct)),
            StepBound::Host => format!(
                "bound by the host ({} of CPU work per step; the GPU busy {})",
                time_us(self.host_us),
                pct(self.gpu_busy_pct)
            ),
            StepBound::Sync => format!(
                "bound by waits on syncs ({} of {} host time per step; the GPU busy {})",
                time_us(self.sync_us),
                time_us(self.host_us),
                pct(self.gpu_busy_pct)
            ),
        }
    }
}

/// How the host's time changed from A to B, and how that change is spread
/// over the host's ops.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HostChange {
    /// A's host time per step, µs ([`Bound::host_us`]).
    pub a_us: f64,
    /// B's.
    pub b_us: f64,
    /// Change, %.
    pub change_pct: f64,
    /// The median of B's time over A's across the host's ops.
    pub median_ratio: f64,
    /// Share of A's host time in ops whose ratio is within
    /// [`UNIFORM_BAND`](crate::UNIFORM_BAND) of the median, %.
    pub uniform_pct: f64,
    /// Whether the change is spread over the ops alike: the host itself
    /// ran slower (or faster), not one op.
    pub uniform: bool,
    /// The op the change is concentrated in, when one holds most of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concentrated_in: Option<String>,
}

/// Ops whose time changed by the median ratio within this band (±15%)
/// changed alike: the band the diff's host rule uses (issue 42: the H200
/// pair's host ops grew 12-39%, around a median of 1.2x).
pub const UNIFORM_BAND: f64 = 0.15;

/// Step time of run a against run b.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StepsDiff {
    /// Run A mean, µs.
    pub a_mean_us: f64,
    /// Run B mean, µs.
    pub b_mean_us: f64,
    /// Change from A to B, %.
    pub change_pct: f64,
    /// Run A p50, µs.
    pub a_p50_us: f64,
    /// Run B p50, µs.
    pub b_p50_us: f64,
    /// P50 change, %.
    pub p50_change_pct: f64,
}

/// A regression gate's answer over a diff: the verdict, each budget's
/// check, and why (one line each), as `kinetoscope diff --fail-above`
/// prints them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Gate {
    /// Pass, fail or incomparable.
    pub verdict: GateVerdict,
    /// Each budget checked: step time per step kind, then each op.
    pub checks: Vec<GateCheck>,
    /// Why the verdict is what it is, one line per reason.
    pub reasons: Vec<String>,
}

/// One budget against its two numbers.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GateCheck {
    /// What is measured: `decode step time (p50)`, `aten::copy_`.
    pub what: String,
    /// Run A (the baseline), µs (per step for ops on traces with steps).
    pub a_us: f64,
    /// Run B (the patch), µs.
    pub b_us: f64,
    /// Change from A to B, %.
    pub change_pct: f64,
    /// The most it may grow, %.
    pub budget_pct: f64,
    /// Whether it stays within the budget.
    pub ok: bool,
}

/// A diff with its gate's verdict (`kinetoscope diff --format json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GatedDiff {
    /// The diff, its fields at the top level.
    #[serde(flatten)]
    pub diff: Diff,
    /// The verdict, when budgets were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
}

/// A number of run a against run b.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ValueDiff {
    /// Value in run A (the baseline), µs.
    pub a_us: f64,
    /// Value in run B (the patch), µs.
    pub b_us: f64,
    /// B minus A, µs.
    pub delta_us: f64,
    /// Change from A to B, %.
    pub change_pct: f64,
}

/// A matched row (op, kernel, category) of a diff; times per step or per trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DeltaRow {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Value in run A (the baseline), µs.
    pub a_us: f64,
    /// Value in run B (the patch), µs.
    pub b_us: f64,
    /// B minus A, µs.
    pub delta_us: f64,
    /// Change from A to B, %.
    pub change_pct: f64,
    /// Run A calls.
    pub a_calls: f64,
    /// Run B calls.
    pub b_calls: f64,
    /// `name` or `normalized` (kernels matched without template arguments,
    /// addresses and hashes), `added` or `removed`.
    pub matched_by: MatchedBy,
    /// Kernels: the name on side b when it differs from side a.
    pub b_name: Option<String>,
    /// The category.
    pub category: Option<KernelCategory>,
    /// Kernels: a short name, unique within the diff's kernel rows (what
    /// differs kept: functor, dtype, tile), for tables; `name` is the full
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short_name: Option<String>,
}

/// One layer of a diff, per step.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct LayerDelta {
    /// Index.
    pub index: i64,
    /// Value in run A (the baseline), µs.
    pub a_us: f64,
    /// Value in run B (the patch), µs.
    pub b_us: f64,
    /// B minus A, µs.
    pub delta_us: f64,
}

/// One rank of a multi-rank diff.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RankDelta {
    /// The rank (process index in the job).
    pub rank: i64,
    /// Run A mean step, µs.
    pub a_mean_step_us: f64,
    /// Run B mean step, µs.
    pub b_mean_step_us: f64,
    /// Change from A to B, %.
    pub change_pct: f64,
    /// What bounds this rank's step in A (none from a cross-rank summary
    /// stored before bounds were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_bound: Option<Bound>,
    /// In B.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_bound: Option<Bound>,
    /// Change of this rank's host time per step ([`Bound::host_us`]), %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_change_pct: Option<f64>,
}

/// One plain sentence of a diff.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DiffFinding {
    /// The sentence.
    pub text: String,
}

// ---------------------------------------------------------------- runs API

/// A run: one upload or capture, with one trace per rank.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RunInfo {
    /// The run id (22 URL-safe characters).
    pub id: String,
    /// Link to the run page, relative to the server (`/runs/{id}`).
    pub url: String,
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Free-form labels.
    pub tags: Vec<String>,
    /// A free-form note.
    pub note: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// `queued`, `capturing`, `analyzing`, `done` or `failed`.
    pub status: RunStatus,
    /// Finer progress in words (`collecting 5/8 ranks`, `analyzing 2/8 ranks`).
    pub stage: String,
    /// Why the run failed, when it did.
    pub error: Option<String>,
    /// Compressed bytes parsed so far, over all ranks.
    pub progress_bytes: u64,
    /// Compressed bytes to parse, over all ranks.
    pub total_bytes: u64,
    /// `upload` or `capture`.
    pub source: RunSource,
    /// Ranks.
    pub ranks: Vec<RankInfo>,
    /// Headline numbers once analyzed (from the first rank's summary).
    pub devices: Vec<String>,
    /// Steps.
    pub steps: Option<u64>,
    /// Mean step time, µs.
    pub mean_step_us: Option<f64>,
    /// Top finding.
    pub top_finding: Option<String>,
    /// Analyzer version.
    pub analyzer_version: Option<u32>,
    /// The names this run is the current baseline of (`PATCH /api/runs/{id}`
    /// with `baseline_of`); empty for most runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub baseline_of: Vec<String>,
}

/// The current baseline of a name: `GET /api/baselines/{name}`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Baseline {
    /// The baseline's name (`decode-glm5-tp8`).
    pub name: String,
    /// When the run became this name's baseline, RFC 3339 UTC.
    pub set_at: String,
    /// The run.
    pub run: RunInfo,
}

/// The longest baseline name.
pub const MAX_BASELINE_NAME: usize = 100;

/// Checks a baseline name: 1 to [`MAX_BASELINE_NAME`] characters of ASCII
/// letters, digits, `-`, `_`, `.` and `:`, so that it can stand in a URL
/// path and a shell command unquoted.
pub fn check_baseline_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_BASELINE_NAME {
        return Err(format!(
            "a baseline name has 1 to {MAX_BASELINE_NAME} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err(format!(
            "{name:?} is not a baseline name: use letters, digits, '-', '_', '.' and ':'"
        ));
    }
    Ok(())
}

/// One rank (trace file) of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RankInfo {
    /// The rank (process index in the job).
    pub rank: i64,
    /// File.
    pub file: String,
    /// `queued`, `analyzing`, `done` or `failed`.
    pub status: RunStatus,
    /// Error.
    pub error: Option<String>,
    /// Bytes.
    pub bytes: u64,
    /// Progress, bytes.
    pub progress_bytes: u64,
    /// Sha256.
    pub sha256: String,
    /// `json`, `gzip` or `zstd`.
    pub encoding: Encoding,
}

/// One stored output of a run's analysis (`GET /api/runs/{id}/artifacts`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ArtifactInfo {
    /// The rank it belongs to.
    pub rank: i64,
    /// Which output.
    pub name: ArtifactName,
    /// Stored size in bytes.
    pub bytes: u64,
    /// The analyzer version that produced it.
    pub analyzer_version: u32,
    /// `database` or `blob`.
    pub stored_in: StoredIn,
}

/// A page of runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RunList {
    /// Runs.
    pub runs: Vec<RunInfo>,
    /// Rows in all, over every page.
    pub total: u64,
    /// Index of the first row of this page.
    pub offset: u64,
    /// Limit.
    pub limit: u64,
}

/// The answer to an upload or a capture request.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Created {
    /// The run id (22 URL-safe characters).
    pub id: String,
    /// Link to the page, relative to the server.
    pub url: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Captures: the run the capture fills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// An error body: `{error, detail}`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ApiError {
    /// A short machine-readable code (`not_found`, `bad_request`, ...).
    pub error: String,
    /// A sentence for people.
    pub detail: String,
}

/// An inference engine the worker can capture from.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct EngineInfo {
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Flavour.
    pub flavour: EngineFlavour,
    /// Ranks.
    pub ranks: u32,
    /// Whether it answered just now.
    pub reachable: bool,
    /// Detail.
    pub detail: Option<String>,
}

/// A capture request (`POST /api/captures`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CaptureRequest {
    /// Engine.
    pub engine: String,
    /// Number of steps.
    pub num_steps: u32,
    /// The name, as written in the trace or given by the user.
    pub name: String,
    /// Activities.
    pub activities: Option<Vec<String>>,
    /// Record shapes.
    pub record_shapes: Option<bool>,
    /// With stack.
    pub with_stack: Option<bool>,
}

/// A run's summary as served to the dashboard: the stored summary with long
/// tables cut to their top rows (the full tables are paged separately).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SummaryView {
    /// Summary.
    pub summary: Summary,
    /// Ops total.
    pub ops_total: u64,
    /// Kernels total.
    pub kernels_total: u64,
    /// The rank (process index in the job).
    pub rank: i64,
    /// Ranks.
    pub ranks: Vec<i64>,
    /// Cross rank.
    pub cross_rank: Option<RanksSummary>,
    /// The artifacts stored for this rank (`memory`, `counters` only where
    /// the trace had their events): the dashboard asks only for those.
    pub artifacts: Vec<ArtifactName>,
}

/// A page of a long table (`/api/runs/{id}/ops`, `/kernels`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Page<T> {
    /// The rows of this page.
    pub items: Vec<T>,
    /// Rows in all, over every page.
    pub total: u64,
    /// Index of the first row of this page.
    pub offset: u64,
}

// ---------------------------------------------------------------- units

/// Formatting of times, bytes and rates for people, shared by the findings
/// text, the CLI tables and the dashboard so all three read the same.
pub mod units {
    /// A duration in µs with a unit that keeps 3 significant digits:
    /// `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
    pub fn time_us(us: f64) -> String {
        let a = us.abs();
        if a == 0.0 {
            "0".into()
        } else if a < 1.0 {
            format!("{:.0} ns", us * 1e3)
        } else if a < 1e3 {
            format!("{} µs", sig3(us))
        } else if a < 1e6 {
            format!("{} ms", sig3(us / 1e3))
        } else {
            format!("{} s", sig3(us / 1e6))
        }
    }

    /// Bytes with decimal units: `857 MB`, `1.2 GB`, `512 B`.
    pub fn bytes(b: f64) -> String {
        let a = b.abs();
        if a < 1e3 {
            format!("{b:.0} B")
        } else if a < 1e6 {
            format!("{} kB", sig3(b / 1e3))
        } else if a < 1e9 {
            format!("{} MB", sig3(b / 1e6))
        } else if a < 1e12 {
            format!("{} GB", sig3(b / 1e9))
        } else {
            format!("{} TB", sig3(b / 1e12))
        }
    }

    /// A rate given in GB/s (1e9 B/s): `1.03 TB/s`, `450 GB/s`, `3.2 MB/s`.
    pub fn rate_gbps(gbps: f64) -> String {
        let bps = gbps * 1e9;
        if bps >= 1e12 {
            format!("{} TB/s", sig3(bps / 1e12))
        } else if bps >= 1e9 {
            format!("{} GB/s", sig3(bps / 1e9))
        } else {
            format!("{} MB/s", sig3(bps / 1e6))
        }
    }

    /// A FLOP rate given in TFLOP/s: `55.2 TFLOP/s`, `1.98 PFLOP/s`,
    /// `310 GFLOP/s`.
    pub fn rate_tflops(tflops: f64) -> String {
        if tflops >= 1e3 {
            format!("{} PFLOP/s", sig3(tflops / 1e3))
        } else if tflops >= 1.0 {
            format!("{} TFLOP/s", sig3(tflops))
        } else {
            format!("{} GFLOP/s", sig3(tflops * 1e3))
        }
    }

    /// A percentage with one decimal: `69.3%`.
    pub fn pct(p: f64) -> String {
        format!("{p:.1}%")
    }

    /// A signed change in percent: `-29.1%`, `+3.0%`.
    pub fn change_pct(p: f64) -> String {
        format!("{p:+.1}%")
    }

    /// A count that may be fractional (calls per step): `78`, `2.5`.
    pub fn count(x: f64) -> String {
        if (x - x.round()).abs() < 0.05 {
            format!("{:.0}", x.round())
        } else {
            format!("{x:.1}")
        }
    }

    /// A count of calls with its noun: "1 call", "12 calls", "10.2 calls"
    /// (a count per step may have a fraction).
    pub fn calls(x: f64) -> String {
        match count(x) {
            n if n == "1" => "1 call".to_string(),
            n => format!("{n} calls"),
        }
    }

    /// A whole number with its thousands grouped by thin spaces, as
    /// people read counts: 856 004 -> "856 004" (U+202F between groups).
    pub fn grouped(n: u64) -> String {
        let digits = n.to_string();
        let mut out = String::with_capacity(digits.len() * 2);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push('\u{202F}');
            }
            out.push(c);
        }
        out
    }

    /// Three significant digits, trailing zeros kept short: 857, 1.03, 12.3.
    pub fn sig3(x: f64) -> String {
        let a = x.abs();
        if a >= 100.0 {
            format!("{x:.0}")
        } else if a >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn formats() {
            assert_eq!(time_us(0.85), "850 ns");
            assert_eq!(time_us(12.34), "12.3 µs");
            assert_eq!(time_us(4560.0), "4.56 ms");
            assert_eq!(time_us(93_200.0), "93.2 ms");
            assert_eq!(time_us(1_230_000.0), "1.23 s");
            assert_eq!(bytes(857e6), "857 MB");
            assert_eq!(rate_gbps(1030.0), "1.03 TB/s");
            assert_eq!(rate_gbps(450.0), "450 GB/s");
            assert_eq!(count(78.0), "78");
            assert_eq!(count(2.5), "2.5");
            assert_eq!(calls(1.0), "1 call");
            assert_eq!(calls(1.01), "1 call");
            assert_eq!(calls(1.2), "1.2 calls");
            assert_eq!(calls(0.0), "0 calls");
            assert_eq!(calls(78.0), "78 calls");
            assert_eq!(change_pct(-29.14), "-29.1%");
            assert_eq!(grouped(856_004), "856\u{202F}004");
            assert_eq!(grouped(1_400_000), "1\u{202F}400\u{202F}000");
            assert_eq!(grouped(999), "999");
            assert_eq!(grouped(0), "0");
        }
    }
}

// ---------------------------------------------------------------- timeline

/// `GET /api/runs/{id}/timeline`: what the timeline of one rank holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineInfo {
    /// First start over every event, ns (trace clock).
    pub start_ns: i64,
    /// Last end (exclusive), ns.
    pub end_ns: i64,
    /// CPU threads first, then GPU streams.
    pub tracks: Vec<TimelineTrack>,
    /// The steps band.
    pub steps: Vec<TimelineStep>,
    /// The layers band (every layer of every step), where layers were found.
    pub layers: Vec<TimelineLayer>,
    /// The rank this is.
    pub rank: i64,
    /// Every rank of the run.
    pub ranks: Vec<i64>,
}

/// One track of the timeline.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineTrack {
    /// The track's id in window queries.
    pub id: u32,
    /// `cpu` or `gpu`.
    pub kind: TrackKind,
    /// A label for people.
    pub label: String,
    /// Process id as written in the trace.
    pub pid: String,
    /// Thread id as written in the trace.
    pub tid: String,
    /// GPU device, for GPU tracks.
    pub device: Option<i64>,
    /// GPU stream, for GPU tracks.
    pub stream: Option<i64>,
    /// Rows (nesting depth, or overlap) the track needs.
    pub rows: u32,
    /// Every event drawn on the track.
    pub events: u64,
    /// Events of the track that overlap too many others to be drawn (past
    /// the track's row cap): counted here, not in any window.
    pub hidden: u64,
}

/// A step in the steps band.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineStep {
    /// The step's name.
    pub name: String,
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
}

/// A layer in the layers band.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineLayer {
    /// The layer's index.
    pub index: i64,
    /// First start of its GPU ops, ns.
    pub start_ns: i64,
    /// Last end, ns.
    pub end_ns: i64,
}

/// `GET /api/runs/{id}/timeline/window`: one track between two times.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineWindow {
    /// The track.
    pub track: u32,
    /// At most one slice per pixel bucket per row.
    pub slices: Vec<TimelineSlice>,
    /// The window held more slices than one answer carries: the first rows'
    /// slices are here, the rest are left out (ask for a narrower window).
    pub truncated: bool,
}

/// `GET /api/runs/{id}/timeline/window?format=columns`: the same slices as
/// [`TimelineWindow`], as columns, each name once: what the app asks for
/// (numbers only, so a large window parses fast).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineColumns {
    /// The track.
    pub track: u32,
    /// The distinct names; `name` indexes them.
    pub names: Vec<String>,
    /// Per slice: start, ns.
    pub start_ns: Vec<i64>,
    /// Per slice: first start to last end, ns.
    pub dur_ns: Vec<i64>,
    /// Per slice: row.
    pub row: Vec<u32>,
    /// Per slice: index into `names`.
    pub name: Vec<u32>,
    /// Per slice: events merged.
    pub count: Vec<u32>,
    /// Per slice: total duration of its events, ns.
    pub busy_ns: Vec<i64>,
    /// Per slice: the event (or the longest merged one).
    pub event: Vec<u32>,
    /// As in [`TimelineWindow::truncated`].
    pub truncated: bool,
}

/// One event, or several merged into one pixel bucket of one row.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineSlice {
    /// Start of the first event, ns.
    pub start_ns: i64,
    /// First start to last end, ns.
    pub dur_ns: i64,
    /// Row within the track.
    pub row: u32,
    /// The event's name, or the longest merged event's.
    pub name: String,
    /// Events merged (1: a single event).
    pub count: u32,
    /// Total duration of the merged events, ns.
    pub busy_ns: i64,
    /// The event's id when `count` is 1, else the longest one's.
    pub event: u32,
}

/// A reference to an event, with its name.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineRef {
    /// The event's id.
    pub event: u32,
    /// Its name.
    pub name: String,
    /// `op`, `annotation`, `runtime`, `kernel`, `memcpy` or `memset`.
    pub kind: SliceKind,
    /// Its track.
    pub track: u32,
    /// Its start, ns.
    pub start_ns: i64,
}

/// `GET /api/runs/{id}/timeline/event/{event}`: one event's details.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineEvent {
    /// The event's id.
    pub event: u32,
    /// Its name.
    pub name: String,
    /// `op`, `annotation`, `runtime`, `kernel`, `memcpy` or `memset`.
    pub kind: SliceKind,
    /// Start, ns.
    pub start_ns: i64,
    /// Duration, ns.
    pub dur_ns: i64,
    /// Its track and row.
    pub track: u32,
    /// Its row.
    pub row: u32,
    /// The track's label.
    pub track_label: String,
    /// Arguments: `Input Dims`, `Input type`, `grid`, `block`, `bytes`, and
    /// bytes moved and bandwidth for copies and casts.
    pub args: BTreeMap<String, String>,
    /// A GPU op's launch (the runtime call).
    pub launch: Option<TimelineRef>,
    /// The op that made the launch, then its parents, innermost first
    /// (for a CPU slice: its parents).
    pub parents: Vec<TimelineRef>,
    /// GPU ops this launch, or the launches under this op, produced.
    pub kernels: Vec<TimelineRef>,
    /// The Python frames above the chain (outermost first), where the trace
    /// has them (`with_stack`).
    pub python: Vec<String>,
    /// Bytes a copy or cast moves (its inputs' bytes), as `args["bytes moved"]` says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_moved: Option<f64>,
    /// A GPU copy's or cast's bandwidth, GB/s, as `args["bandwidth"]` says:
    /// the page sets it against the device's peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
}

/// `GET /api/runs/{id}/timeline/search`: where a name occurs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineSearch {
    /// Events whose name contains the text (case-insensitive).
    pub matches: u64,
    /// Per track with matches, their count in each of `px` buckets over the
    /// whole trace.
    pub tracks: Vec<TimelineDensity>,
    /// The earliest match.
    pub first: Option<TimelineFirst>,
    /// The longest match (the earliest of equals): what "On timeline" from
    /// a finding selects, the call that costs the most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest: Option<TimelineFirst>,
}

/// Matches of one track over the whole trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineDensity {
    /// The track.
    pub id: u32,
    /// Matches per bucket.
    pub density: Vec<u32>,
}

/// The earliest match of a search.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TimelineFirst {
    /// Its id.
    pub event: u32,
    /// Its start, ns.
    pub start_ns: i64,
}

/// `GET /api/diff/{a}/{b}/align`: where an anchor lies in each run, so their
/// timelines can be drawn with it at the same x.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DiffAlign {
    /// The anchor used: `step:N`, `layer:L` (in each run's median step), or
    /// `median step`.
    pub anchor: String,
    /// Where it lies in run a.
    pub a: AlignSpan,
    /// Where it lies in run b.
    pub b: AlignSpan,
}

/// A span of one run's trace clock.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AlignSpan {
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
}
