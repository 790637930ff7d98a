//! Fixed sets of values of the JSON contract, as types. Each serializes to
//! exactly the word it has always been written as; `as_str` gives that
//! word, `FromStr` reads it back (for database columns and query strings).

/// Declares a string enum: variants with their words, the default first.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident ($label:literal) { $($(#[$vmeta:meta])* $variant:ident => $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word this value is written as.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::ALL[0]
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok($name::$variant),)+
                    other => Err(format!(
                        concat!("unknown ", $label, " {:?}: use one of {}"),
                        other,
                        [$($word),+].join(", ")
                    )),
                }
            }
        }
    };
}

string_enum! {
    /// Where a run (or one of its ranks) stands.
    RunStatus ("status") {
        /// Waiting for a worker.
        Queued => "queued",
        /// A capture is collecting rank files from an engine.
        Capturing => "capturing",
        /// A worker is reading and analyzing the trace.
        Analyzing => "analyzing",
        /// Analyzed: the summary is stored.
        Done => "done",
        /// The trace could not be analyzed (the reason is stored).
        Failed => "failed",
    }
}

impl RunStatus {
    /// Whether the run will not change by itself any more.
    pub fn is_final(self) -> bool {
        matches!(self, RunStatus::Done | RunStatus::Failed)
    }
}

string_enum! {
    /// How a run came to be.
    RunSource ("source") {
        /// Uploaded (HTTP, CLI or browser).
        Upload => "upload",
        /// Captured from a running engine.
        Capture => "capture",
    }
}

string_enum! {
    /// What a job does.
    JobKind ("job kind") {
        /// Analyze one rank's trace.
        Analyze => "analyze",
        /// Capture the ranks of a run from an engine.
        Capture => "capture",
    }
}

string_enum! {
    /// How a stored trace file is compressed.
    Encoding ("encoding") {
        /// Plain JSON.
        Json => "json",
        /// gzip (as torch writes `.json.gz`).
        Gzip => "gzip",
        /// zstd.
        Zstd => "zstd",
    }
}

string_enum! {
    /// How a trace file is compressed (the half of its [`Encoding`] that
    /// the reader undoes before any format is read).
    Compression ("compression") {
        /// Not compressed.
        None => "none",
        /// gzip.
        Gzip => "gzip",
        /// zstd.
        Zstd => "zstd",
    }
}

string_enum! {
    /// The file format inside the compression: what reader parses it.
    TraceFormat ("trace format") {
        /// Kineto's Chrome-trace JSON (`torch.profiler`'s
        /// `export_chrome_trace`).
        KinetoJson => "kineto-json",
    }
}

impl Encoding {
    /// The compression of a stored trace, apart from its format.
    pub fn compression(self) -> Compression {
        match self {
            Encoding::Json => Compression::None,
            Encoding::Gzip => Compression::Gzip,
            Encoding::Zstd => Compression::Zstd,
        }
    }

    /// The file format of a stored trace, apart from its compression (one
    /// format today: a second reader adds a variant here, and stored
    /// encodings keep their words).
    pub fn format(self) -> TraceFormat {
        TraceFormat::KinetoJson
    }

    /// The stored word for a format and a compression.
    pub fn of(format: TraceFormat, compression: Compression) -> Encoding {
        match (format, compression) {
            (TraceFormat::KinetoJson, Compression::None) => Encoding::Json,
            (TraceFormat::KinetoJson, Compression::Gzip) => Encoding::Gzip,
            (TraceFormat::KinetoJson, Compression::Zstd) => Encoding::Zstd,
        }
    }

    /// The usual file suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Gzip => "json.gz",
            Encoding::Zstd => "json.zst",
        }
    }
}

string_enum! {
    /// The serving engine behind a capture.
    EngineFlavour ("engine flavour") {
        /// SGLang (`/start_profile` with a step count).
        Sglang => "sglang",
        /// vLLM (`/start_profile`, `/stop_profile`).
        Vllm => "vllm",
    }
}

string_enum! {
    /// What a GPU kernel does, by its name.
    KernelCategory ("kernel category") {
        /// Matrix multiplies (cuBLAS, CUTLASS, hipBLASLt, Triton GEMMs).
        Gemm => "gemm",
        /// Attention kernels (flash, paged, MHA).
        Attention => "attention",
        /// Collectives (NCCL, RCCL).
        Communication => "communication",
        /// Copies, casts, memsets.
        Memory => "memory",
        /// Elementwise kernels.
        Elementwise => "elementwise",
        /// Reductions.
        Reduction => "reduction",
        /// Normalization (layer norm, RMS norm).
        Norm => "norm",
        /// Anything else.
        Other => "other",
    }
}

string_enum! {
    /// What a GPU op is.
    GpuOpKind ("GPU op kind") {
        /// A kernel.
        Kernel => "kernel",
        /// A memory copy.
        Memcpy => "memcpy",
        /// A memory set.
        Memset => "memset",
    }
}

string_enum! {
    /// What a row of the op table is.
    OpKind ("op kind") {
        /// An ATen or custom op (`cpu_op`).
        Op => "op",
        /// A `record_function` range (`user_annotation`).
        Annotation => "annotation",
        /// A CUDA/HIP runtime or driver call.
        Runtime => "runtime",
        /// A graph replay context: the GPU ops its replays ran.
        Graph => "graph",
    }
}

string_enum! {
    /// How layers were found.
    LayerMethod ("layer method") {
        /// Not found.
        None => "none",
        /// Annotations carrying a layer index.
        Annotation => "annotation",
        /// `nn.Module` frames of a layer class.
        Module => "module",
        /// A kernel sequence that repeats once per layer.
        Repetition => "repetition",
        /// Set by the user (marker and/or period).
        Override => "override",
    }
}

string_enum! {
    /// The tab of the run page a finding links to.
    FindingTab ("tab") {
        /// The op table.
        Ops => "ops",
        /// The kernel table.
        Kernels => "kernels",
        /// The steps.
        Steps => "steps",
        /// GPU busy time and categories.
        Gpu => "gpu",
        /// The layers.
        Layers => "layers",
        /// The cross-rank comparison.
        Ranks => "ranks",
        /// Memory over time (traces with `profile_memory=True`).
        Memory => "memory",
    }
}

string_enum! {
    /// What bounds a run's step.
    StepBound ("step bound") {
        /// The GPU: it is busy most of the step.
        Gpu => "gpu",
        /// The host: CPU work between launches, launch overhead, Python.
        Host => "host",
        /// Waits on synchronizing calls while the GPU idles.
        Sync => "sync",
    }
}

impl StepBound {
    /// The words for it after "bound by": `the GPU`, `its host`, `waits on syncs`.
    pub fn words(self) -> &'static str {
        match self {
            StepBound::Gpu => "the GPU",
            StepBound::Host => "its host",
            StepBound::Sync => "waits on syncs",
        }
    }
}

string_enum! {
    /// What a step did, where its name tells.
    StepKind ("step kind") {
        /// Prompt processing (SGLang's extend).
        Prefill => "prefill",
        /// Token generation.
        Decode => "decode",
        /// Both in one batch.
        Mixed => "mixed",
    }
}

string_enum! {
    /// What kind of decoder block a layer is.
    LayerKind ("layer kind") {
        /// A dense (MLP) layer among MoE ones.
        Dense => "dense",
        /// A mixture-of-experts layer.
        Moe => "moe",
        /// One of the first layers, whose op sequence differs from the rest.
        Prefix => "prefix",
        /// A layer without attention's KV cache (linear attention, Mamba):
        /// a hybrid model's layers between its attention ones.
        Linear => "linear",
        /// A layer unlike the rest that none of the other kinds describes.
        Other => "other",
    }
}

string_enum! {
    /// A named output of an analysis job.
    ArtifactName ("artifact") {
        /// The summary: tables and findings (kept in the database).
        Summary => "summary",
        /// The timeline index (in the blob store).
        Timeline => "timeline",
        /// Memory over time, per device ([`crate::MemoryReport`], JSON in
        /// the blob store): only for traces with `[memory]` events.
        Memory => "memory",
        /// Counter tracks ([`crate::CounterReport`], JSON in the blob
        /// store): only for traces with `ph: "C"` events.
        Counters => "counters",
    }
}

string_enum! {
    /// What an API token may do; each scope may do all that the ones before
    /// it may (the order is the enum's).
    TokenScope ("token scope") {
        /// List and search runs (and, on a private server, read them): a viewer.
        Read => "read",
        /// Create runs (uploads) and captures: what a CI job needs.
        Upload => "upload",
        /// Everything `Upload` may, plus edit, delete and re-analyze runs.
        Admin => "admin",
    }
}

string_enum! {
    /// Where a job of the queue stands (the `jobs.state` column).
    JobState ("job state") {
        /// Waiting to be claimed (`run_after` says from when).
        Queued => "queued",
        /// Claimed by a worker, under a lease.
        Running => "running",
        /// Finished; its result is stored.
        Done => "done",
        /// Given up on (bad input, or out of attempts).
        Failed => "failed",
    }
}

string_enum! {
    /// How a trace's GPU work was issued.
    GraphMode ("graph mode") {
        /// Every kernel launched one by one.
        Eager => "eager",
        /// Graph replays run nearly all device time.
        Graph => "graph",
        /// Graph replays with eager GPU work between them.
        Piecewise => "piecewise",
    }
}

string_enum! {
    /// What a slice of the timeline is. The declaration order is the code
    /// the stored timeline index writes (`as u8`): never reorder it.
    SliceKind ("slice kind") {
        /// An ATen or custom op (`cpu_op`).
        Op => "op",
        /// A `record_function` range (`user_annotation`).
        Annotation => "annotation",
        /// A runtime or driver call.
        Runtime => "runtime",
        /// A GPU kernel.
        Kernel => "kernel",
        /// A GPU memory copy.
        Memcpy => "memcpy",
        /// A GPU memory set.
        Memset => "memset",
    }
}

impl SliceKind {
    /// Whether it runs on the GPU.
    pub fn is_gpu(self) -> bool {
        matches!(
            self,
            SliceKind::Kernel | SliceKind::Memcpy | SliceKind::Memset
        )
    }
}

string_enum! {
    /// What a timeline track holds.
    TrackKind ("track kind") {
        /// A CPU thread's slices.
        Cpu => "cpu",
        /// A GPU stream's kernels, copies and sets.
        Gpu => "gpu",
    }
}

string_enum! {
    /// How a trace file lays out its events.
    TraceLayout ("layout") {
        /// A `traceEvents` object.
        Object => "object",
        /// The 2020 bare array.
        Array => "array",
    }
}

string_enum! {
    /// What a trace's `External id` on runtime events means.
    ExternalIdRegime ("external id regime") {
        /// No runtime event has both ids.
        None => "none",
        /// It links runtime events to ops (2020-21, 2024+ traces).
        ExternalId => "external_id",
        /// It merely repeats the correlation (2022-23 traces).
        Correlation => "correlation",
    }
}

string_enum! {
    /// The rule that produced a finding (stable across versions).
    FindingKind ("finding kind") {
        /// An op (its leading input signature) that dominates the time.
        TopOp => "top_op",
        /// How much graph replays run, and what bounds them.
        GraphReplay => "graph_replay",
        /// The top kernel, its geometry and who launches it.
        TopKernel => "top_kernel",
        /// A kernel category that dominates.
        TopCategory => "top_category",
        /// An idle GPU.
        GpuIdle => "gpu_idle",
        /// Small kernels while the GPU idles: launch overhead.
        LaunchBound => "launch_bound",
        /// The CPU blocked in synchronizing calls.
        Sync => "sync",
        /// Copies from pageable host memory.
        PageableCopy => "pageable_copy",
        /// What the layers spend their time on.
        Layers => "layers",
        /// Prefill and decode steps apart.
        StepKinds => "step_kinds",
        /// A step slow against its kind's median.
        SlowStep => "slow_step",
        /// Steps that compiled (`torch.compile` inside the profiled steps).
        Compiling => "compiling",
        /// Device time no op can be blamed for.
        Unattributed => "unattributed",
        /// Across ranks: the slowest rank against the median one.
        Straggler => "straggler",
        /// Across ranks: the spread of time in collectives.
        Collectives => "collectives",
        /// A copy or cast of the same whole tensor on every call while the
        /// steps use a growing part of it.
        WholeTensor => "whole_tensor",
        /// Kernels whose grid leaves SMs empty, or whose launch takes
        /// longer than their run (eager, no graphs).
        LaunchGeometry => "launch_geometry",
        /// A GEMM far below the device's FLOP peak because its shape is
        /// small (decode batch sizes).
        SmallGemm => "small_gemm",
        /// What the memory peak is made of.
        MemoryPeak => "memory_peak",
        /// An op signature that allocates a large buffer and frees it on
        /// every call (allocator churn).
        MemoryChurn => "memory_churn",
        /// Memory that grows from step to step.
        MemoryGrowth => "memory_growth",
    }
}

string_enum! {
    /// A regression gate's answer (`kinetoscope diff --fail-above`).
    GateVerdict ("gate verdict") {
        /// Within every budget: exit 0.
        Pass => "pass",
        /// Over a budget: exit 1.
        Fail => "fail",
        /// The runs cannot be compared (no common steps, an op in
        /// neither): exit 2.
        Incomparable => "incomparable",
    }
}

string_enum! {
    /// Where a run's device peaks come from.
    PeakSource ("peak source") {
        /// The built-in device table, matched from `deviceProperties`.
        Table => "table",
        /// The user's `--peak-gbps` / `--peak-tflops` (or the same options
        /// on re-analysis).
        Override => "override",
        /// The device is not in the table: no peaks.
        Unknown => "unknown",
    }
}

string_enum! {
    /// What a diff's numbers are per.
    DiffBasis ("diff basis") {
        /// Per step, when both runs have steps.
        PerStep => "per step",
        /// Per trace otherwise.
        PerTrace => "per trace",
    }
}

string_enum! {
    /// How a diff row's two sides were matched.
    MatchedBy ("match") {
        /// The same name.
        Name => "name",
        /// Kernels matched without template arguments, addresses and hashes.
        Normalized => "normalized",
        /// Only in run B.
        Added => "added",
        /// Only in run A.
        Removed => "removed",
    }
}

string_enum! {
    /// Where an artifact's bytes are kept.
    StoredIn ("stored in") {
        /// In the database (the summary).
        Database => "database",
        /// In the blob store.
        Blob => "blob",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for s in RunStatus::ALL {
            assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{s}\""));
            assert_eq!(s.as_str().parse::<RunStatus>().unwrap(), *s);
        }
        assert_eq!(
            "nope".parse::<RunStatus>().unwrap_err(),
            "unknown status \"nope\": use one of queued, capturing, analyzing, done, failed"
        );
        assert_eq!(LayerMethod::default(), LayerMethod::None);
        // An encoding is a format and a compression, and back, under the
        // words stored since the first run.
        for &e in Encoding::ALL {
            assert_eq!(Encoding::of(e.format(), e.compression()), e);
        }
        assert_eq!(Encoding::Json.compression(), Compression::None);
        assert_eq!(KernelCategory::Gemm.as_str(), "gemm");
    }
}

string_enum! {
    /// The time ops and their input signatures are ranked by: device time
    /// where the trace has GPU ops, else self CPU time (a CPU-only capture,
    /// whose time is all on the host).
    TimeBasis ("time basis") {
        /// Self device time.
        Device => "device",
        /// Self CPU time.
        Cpu => "cpu",
    }
}

/// Steps whose GPU work is below this share of their time are bound by the
/// host: their time is the CPU's, and findings rank by self CPU time.
pub const HOST_BOUND_GPU_SHARE: f64 = 0.3;

impl TimeBasis {
    /// The basis of a trace with `gpu_op_us` of GPU work, whose steps took
    /// `step_us` and launched `step_gpu_us` of it (0 and 0 without steps):
    /// device time, unless there is no GPU work or the steps are bound by
    /// the host (their GPU work under [`HOST_BOUND_GPU_SHARE`] of their
    /// time). The one rule the op table, the findings and the diff follow
    /// (through `TraceInfo.time_basis`).
    pub fn of(gpu_op_us: f64, step_us: f64, step_gpu_us: f64) -> TimeBasis {
        if gpu_op_us <= 0.0 || (step_us > 0.0 && step_gpu_us < HOST_BOUND_GPU_SHARE * step_us) {
            TimeBasis::Cpu
        } else {
            TimeBasis::Device
        }
    }

    /// Of a device time and a self CPU time, the one this basis measures.
    pub fn pick(self, device_us: f64, cpu_us: f64) -> f64 {
        match self {
            TimeBasis::Device => device_us,
            TimeBasis::Cpu => cpu_us,
        }
    }

    /// The words for it in sentences: `GPU time`, `CPU time`.
    pub fn words(self) -> &'static str {
        match self {
            TimeBasis::Device => "GPU time",
            TimeBasis::Cpu => "CPU time",
        }
    }
}
