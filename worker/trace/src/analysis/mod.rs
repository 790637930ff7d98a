//! Analysis: a parsed [`Trace`] in, a [`Summary`] out. Pure code: no I/O,
//! no clock, no randomness, so the same trace always gives the same summary.
//!
//! - [`links`]: op tree per thread, GPU op -> launch -> op.
//! - [`python`]: Python frames above the ops (`with_stack` traces).
//! - [`steps`]: step detection and step kinds.
//! - [`names`]: kernel short names and categories.
//! - [`shapes`]: bytes moved by copy/cast ops.
//! - [`gpu_time`]: busy/idle and per-stream time.
//! - [`layers`]: per-layer attribution.
//! - [`findings`]: the ranked sentences.

// The tables are struct-of-arrays: their columns are indexed in parallel.
#![allow(clippy::needless_range_loop)]

pub mod findings;
pub mod gpu_time;
pub mod layers;
pub mod links;
pub mod names;
pub mod python;
mod repeats;
pub mod shapes;
pub mod steps;

use crate::import::store::{CpuKind, GpuKind, IntColumn, Sym, TimeColumn, Trace};
use hashbrown::HashMap;
use kinetoscope_types::*;
use links::{Links, NO};
use steps::{step_at, StepCursor, StepSpan};

/// Version of the analysis; bump it whenever the summary changes so stored
/// runs get re-analyzed.
pub const ANALYZER_VERSION: u32 = 5;

/// Choices a user can make about the analysis (the contract type).
pub use kinetoscope_types::AnalysisOptions;

/// How many chains are kept per kernel, and shape groups per op and kernel.
const MAX_CHAINS: usize = 20;
const MAX_SHAPE_GROUPS: usize = 8;
const MAX_KERNEL_GROUPS: usize = 8;

/// Everything the analysis derives once and the table builders share.
pub(crate) struct Context<'a> {
    pub t: &'a Trace,
    pub links: Links,
    pub steps: Vec<StepSpan>,
    /// Per GPU slice: index of the step its launch falls in.
    pub gpu_step: Vec<u32>,
    /// Total GPU-op time, ns.
    pub gpu_op_ns: i64,
    /// The time the op table ranks by ([`TimeBasis::of`]).
    pub basis: TimeBasis,
    /// Per CPU slice: the outermost `cpu_op` around it or itself (annotations
    /// such as `ProfilerStep#N` are skipped), or [`NO`]. Only read to find
    /// Python stacks: empty when the trace has no Python frames.
    pub top_op: Vec<u32>,
    /// Python stacks: id 0 is the empty stack.
    pub py_stacks: Vec<Vec<Sym>>,
    /// Python stack id per query slice (outermost ops, graph launches).
    pub py_stack_of: HashMap<u32, u32>,
    /// Per GPU slice: the graph replay context (an op, annotation or Python
    /// frame name) it is attributed to, or [`NO`].
    pub replay: Vec<Sym>,
}

/// Per-slice sums only the op table reads: kept apart from [`Context`] so
/// they are freed as soon as that table is built (three `i64` per CPU slice
/// are the largest arrays of the analysis).
struct OpSums {
    /// Per CPU slice: device time of GPU ops it launched directly (graph
    /// replays excepted: they have rows of their own), ns.
    self_dev: IntColumn,
    /// Per CPU slice: device time of GPU ops launched in its subtree,
    /// graph replays included, ns.
    total_dev: IntColumn,
    /// Per CPU slice: time of its direct children (clamped to its span), ns.
    child_ns: IntColumn,
}

impl Context<'_> {
    /// The Python stack id of the code that issued GPU op `g`: above the
    /// outermost op of its launch, or above a graph launch itself.
    pub fn py_stack_of_gpu(&self, g: usize) -> u32 {
        if self.py_stacks.len() <= 1 {
            return 0;
        }
        let r = self.links.launch[g];
        if r == NO {
            return 0;
        }
        if self.links.graph[g] {
            if let Some(&s) = self.py_stack_of.get(&r) {
                return s;
            }
        }
        let op = self.links.op[g];
        if op == NO {
            return self.py_stack_of.get(&r).copied().unwrap_or(0);
        }
        let top = self.top_op[op as usize];
        if top == NO {
            return 0;
        }
        self.py_stack_of.get(&top).copied().unwrap_or(0)
    }

    /// What a GPU op's device time is charged to: `(false, op)` for the
    /// innermost `cpu_op` of its launch, `(true, context)` for a graph
    /// replay; `None` when neither.
    pub fn owner(&self, g: usize) -> Option<(bool, Sym)> {
        if self.replay[g] != NO {
            return Some((true, self.replay[g]));
        }
        let mut op = self.links.op[g];
        while op != NO {
            if self.t.cpu.kind[op as usize] == CpuKind::Op {
                return Some((false, self.t.cpu.name[op as usize]));
            }
            op = self.links.parent[op as usize];
        }
        None
    }

    /// The op-table name of an [`owner`](Self::owner).
    pub fn owner_name(&self, owner: (bool, Sym)) -> String {
        match owner {
            (true, ctx) => replay_row_name(self.t.name(ctx)),
            (false, op) => self.t.name(op).to_string(),
        }
    }

    /// The Python stack (names) of an id, with install prefixes cut
    /// (`/opt/.../site-packages/vllm/x.py(1): f` -> `vllm/x.py(1): f`).
    pub fn py_names(&self, id: u32) -> Vec<String> {
        self.py_stacks[id as usize]
            .iter()
            .map(|&s| python::short_frame(self.t.name(s)).to_string())
            .collect()
    }
}

/// The op-table name of a graph replay context.
pub fn replay_row_name(context: &str) -> String {
    format!("graph replay: {}", python::short_frame(context))
}

/// Everything an analysis produces: the summary, and the artifacts stored
/// beside it.
pub struct Analysis {
    /// The summary (tables, findings).
    pub summary: Summary,
    /// The timeline index.
    pub timeline: crate::timeline::TimelineIndex,
}

/// Analyzes a parsed trace: the summary only.
pub fn analyze(t: &Trace, opts: &AnalysisOptions) -> Summary {
    summarize(t, links::link(t), Early::find(t, opts), opts, |_| ()).0
}

/// Analyzes a parsed trace: the summary and every artifact.
pub fn analyze_all(t: &Trace, opts: &AnalysisOptions) -> Analysis {
    let (summary, timeline) = summarize(
        t,
        links::link(t),
        Early::find(t, opts),
        opts,
        crate::timeline::TimelineIndex::build,
    );
    Analysis { summary, timeline }
}

/// What the analysis job stores: the summary, and the timeline index as
/// [`TimelineIndex::write`](crate::timeline::TimelineIndex::write) writes it.
pub struct StoredAnalysis {
    /// The summary (tables, findings).
    pub summary: Summary,
    /// The timeline index, compressed, ready to store.
    pub timeline: Vec<u8>,
}

/// [`analyze_all`] for a trace the caller is done with (the analysis job),
/// the index written out as it is built: the columns each phase no longer
/// needs are freed before the next (the launch ids once launches are
/// found, `External id` once launches are linked to ops), and
/// the index's rows are compressed one by one rather than held. The same
/// summary, and the same index once read back.
pub fn analyze_stored(mut t: Trace, opts: &AnalysisOptions) -> std::io::Result<StoredAnalysis> {
    // The op tree needs only the CPU slices' times, the launches only the
    // ids, the steps and the Python frames' tree only the trace: the tree on
    // one core, the rest on the other (the op tree takes longest).
    let (launches, early, tree) = std::thread::scope(|scope| {
        let tree = scope.spawn(|| links::OpTree::build(&t));
        let launches = links::Launches::find(&t);
        let early = Early::find(&t, opts);
        (
            launches,
            early,
            tree.join().expect("building the op tree panicked"),
        )
    });
    // What nothing reads once launches are found: the ids that link them.
    t.cpu.correlation = IntColumn::default();
    t.gpu.correlation = IntColumn::default();
    t.flows = Default::default();
    if !launches.needs_external_id() {
        t.cpu.external_id = IntColumn::default();
    }
    let links = launches.link_tree(&t, tree);
    t.cpu.external_id = IntColumn::default();
    let (summary, timeline) = summarize(
        &t,
        links,
        early,
        opts,
        crate::timeline::TimelineIndex::build_stored,
    );
    Ok(StoredAnalysis {
        summary,
        timeline: timeline?,
    })
}

/// What the analysis finds from the trace alone, before the op tree and
/// the launches are known (the job finds it beside them).
struct Early {
    /// The steps, and what they were found by.
    steps: (Vec<StepSpan>, Option<steps::StepSource>),
    /// The Python frames' tree.
    frames: python::Frames,
}

impl Early {
    fn find(t: &Trace, opts: &AnalysisOptions) -> Early {
        Early {
            steps: steps::find_steps(t, opts.step_marker.as_deref()),
            frames: python::Frames::new(t),
        }
    }
}

/// The summary, and what `timeline` makes of the timeline index's inputs
/// (the index itself, or its stored form; nothing for the summary alone).
/// Independent parts run two at a time (see the comments below).
fn summarize<R>(
    t: &Trace,
    mut links: links::Links,
    early: Early,
    opts: &AnalysisOptions,
    timeline: impl FnOnce(crate::timeline::Inputs) -> R,
) -> (Summary, R) {
    let Early {
        steps: (steps, source),
        frames,
    } = early;
    let cpu = &t.cpu;
    let gpu = &t.gpu;

    // Python stacks above the outermost ops and above graph launches.
    // The outermost cpu_op of each slice (parents come first in preorder),
    // where there are stacks to look up.
    let mut top_op = Vec::new();
    if !frames.is_empty() {
        top_op = vec![NO; cpu.len()];
        for &o in &links.preorder {
            let o = o as usize;
            let p = links.parent[o];
            top_op[o] = if p != NO && top_op[p as usize] != NO {
                top_op[p as usize]
            } else if cpu.kind[o] == CpuKind::Op {
                o as u32
            } else {
                NO
            };
        }
    }
    let mut py_stacks: Vec<Vec<Sym>> = vec![Vec::new()];
    let mut py_stack_of: HashMap<u32, u32> = HashMap::new();
    let mut replay_frame: HashMap<u32, Sym> = HashMap::new();
    if !frames.is_empty() {
        let mut slices: Vec<u32> = (0..cpu.len() as u32)
            .filter(|&i| top_op[i as usize] == i)
            .collect();
        for g in 0..gpu.len() {
            let r = links.launch[g];
            if r != NO && (links.graph[g] || links.op[g] == NO) {
                slices.push(r);
            }
        }
        slices.sort_unstable();
        slices.dedup();
        let queries: Vec<(u32, i64)> = slices
            .iter()
            .map(|&i| (cpu.track.get(i as usize), cpu.ts.get(i as usize)))
            .collect();
        let inner = frames.innermost(t, &queries);
        let mut ids: HashMap<u32, u32> = HashMap::new();
        let mut by_names: HashMap<Vec<Sym>, u32> = HashMap::new();
        for (k, &slice) in slices.iter().enumerate() {
            let f = inner[k];
            if f == NO {
                continue;
            }
            let id = *ids.entry(f).or_insert_with(|| {
                let names = frames.stack(t, f);
                // Most frames' stacks are some earlier frame's (each layer
                // runs the same code): copied only when new.
                if let Some(&id) = by_names.get(&names) {
                    return id;
                }
                let next = py_stacks.len() as u32;
                py_stacks.push(names.clone());
                by_names.insert(names, next);
                next
            });
            py_stack_of.insert(slice, id);
            if cpu.kind[slice as usize].is_runtime() {
                if let Some(sym) = frames.innermost_user(t, f) {
                    replay_frame.insert(slice, sym);
                }
            }
        }
    }

    let mut self_dev = IntColumn::zeros(cpu.len());
    // Graph replays first; each slice's own launches are added below.
    let mut total_dev = IntColumn::zeros(cpu.len());
    let mut replay = vec![NO; gpu.len()];
    let mut gpu_step = vec![NO; gpu.len()];
    let mut gpu_op_ns = 0i64;
    // GPU-op time launched within steps: against the steps' time, whether
    // they are bound by the host.
    let mut step_gpu_ns = 0i64;
    let a = &mut links.attribution;
    let mut step = StepCursor::new(&steps);
    for g in 0..gpu.len() {
        if !gpu.kind[g].is_gpu_op() {
            continue;
        }
        let d = gpu.dur.get(g);
        gpu_op_ns += d;
        let r = links.launch[g];
        let op = links.op[g];
        if links.graph[g] {
            // A replay belongs to its context: the op or annotation around
            // the launch, else the Python code that called it.
            let ctx = if op != NO {
                total_dev.add(op as usize, d);
                cpu.name[op as usize]
            } else {
                replay_frame.get(&r).copied().unwrap_or(NO)
            };
            replay[g] = ctx;
            if ctx == NO {
                a.unattributed_us += d as f64 / 1e3;
            } else {
                a.graph_replay_us += d as f64 / 1e3;
            }
        } else if op != NO {
            self_dev.add(op as usize, d);
        } else if r != NO {
            a.unattributed_us += d as f64 / 1e3;
        }
        if r != NO {
            if let Some(s) = step.at(cpu.ts.get(r as usize)) {
                gpu_step[g] = s as u32;
                step_gpu_ns += d;
            }
        }
    }
    let step_ns: i64 = steps.iter().map(|s| s.end - s.ts).sum();
    let basis = TimeBasis::of(us(gpu_op_ns), us(step_ns), us(step_gpu_ns));
    for (i, own) in self_dev.iter().enumerate() {
        if own != 0 {
            total_dev.add(i, own);
        }
    }
    for &op in links.preorder.iter().rev() {
        let p = links.parent[op as usize];
        let below = total_dev.get(op as usize);
        if p != NO && below != 0 {
            total_dev.add(p as usize, below);
        }
    }
    // The preorder has done its work (outermost ops, subtree sums).
    links.preorder = Vec::new();
    let sums = OpSums {
        self_dev,
        total_dev,
        child_ns: std::mem::take(&mut links.child_ns),
    };
    let mut cx = Context {
        t,
        links,
        steps,
        gpu_step,
        gpu_op_ns,
        basis,
        top_op,
        py_stacks,
        py_stack_of,
        replay,
    };

    // The trace's facts, the steps, the graphs and the layers (which ops are
    // in which layer) on a second core while the op and kernel tables are
    // made (they share the launch chains: a second core's own chains, 4
    // bytes per CPU slice beside the op table's sums, lifted the job's peak
    // past the index build's, 34.5 bytes per event at 300 steps); then the
    // layers' numbers (they need the kernel table) while the timeline index
    // is laid out.
    let ((trace, (step_rows, steps_stats), graphs, (found, spans)), ops, kernels) =
        std::thread::scope(|scope| {
            let (cx, source) = (&cx, source);
            let side = scope.spawn(move || {
                (
                    trace_info(cx),
                    step_rows(cx, source),
                    graph_stats(cx),
                    layers::find(cx, opts),
                )
            });
            let mut chains = Chains::new(cpu.len());
            let mut ops = op_rows(cx, &sums, &mut chains);
            drop(sums);
            ops.extend(replay_rows(cx));
            sort_ops(&mut ops);
            let kernels = kernel_rows(cx, &mut chains);
            drop(chains);
            (
                side.join().expect("the trace's facts panicked"),
                ops,
                kernels,
            )
        });
    let gpu_time = gpu_time::compute(t, &kernels, trace.span_us);
    let by_thread = std::mem::take(&mut cx.links.by_thread);
    let (layers, timeline) = std::thread::scope(|scope| {
        let (cx, kernels) = (&cx, &kernels);
        let numbers = scope.spawn(move || layers::numbers(cx, kernels, found));
        let timeline = timeline(crate::timeline::Inputs {
            trace: t,
            parent: &cx.links.parent,
            threads: by_thread,
            launch: &cx.links.launch,
            steps: cx
                .steps
                .iter()
                .map(|s| (t.name(s.name).to_string(), s.ts, s.end))
                .collect(),
            layers: spans,
            stacks: &cx.py_stacks,
            stack_of: &cx.py_stack_of,
        });
        let layers = numbers.join().expect("layer attribution panicked");
        (layers, timeline)
    });
    drop(cx);
    let mut summary = Summary {
        analyzer_version: ANALYZER_VERSION,
        trace,
        ops,
        kernels,
        steps: step_rows,
        steps_stats,
        gpu_time,
        layers,
        graphs,
        findings: Vec::new(),
    };
    summary.findings = findings::find(&summary);
    (summary, timeline)
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// First start and last end over all stored slices, ns.
fn window(t: &Trace) -> Option<(i64, i64)> {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut visit = |ts: &TimeColumn, dur: &IntColumn| {
        for (a, d) in ts.iter().zip(dur.iter()) {
            lo = lo.min(a);
            hi = hi.max(a + d);
        }
    };
    visit(&t.cpu.ts, &t.cpu.dur);
    visit(&t.gpu.ts, &t.gpu.dur);
    visit(&t.other.ts, &t.other.dur);
    (lo <= hi).then_some((lo, hi))
}

fn trace_info(cx: &Context) -> TraceInfo {
    let t = cx.t;
    let c = &t.counters;
    let count_gpu = |k: GpuKind| t.gpu.kind.iter().filter(|&&x| x == k).count() as u64;
    let (lo, hi) = window(t).unwrap_or((0, 0));
    let start_epoch_ns = match t.meta.base_time_ns {
        Some(base) => Some(base.saturating_add(lo)),
        None if lo > 1_000_000_000_000_000_000 => Some(lo),
        None => None,
    };
    let mut categories: Vec<CategoryCount> = c
        .by_cat
        .iter()
        .map(|(&sym, &n)| CategoryCount {
            category: if sym == 0 {
                "(none)".into()
            } else {
                t.name(sym).to_string()
            },
            events: n,
        })
        .collect();
    categories.sort_by(|a, b| b.events.cmp(&a.events).then(a.category.cmp(&b.category)));
    let unknown_categories: Vec<String> = categories
        .iter()
        .filter(|cc| {
            cc.category != "(none)" && !crate::import::parse::is_known_category(&cc.category)
        })
        .map(|cc| cc.category.clone())
        .collect();
    let mut active: Vec<i64> = t
        .gpu
        .device
        .iter()
        .zip(&t.gpu.kind)
        .filter(|(_, k)| k.is_gpu_op())
        .map(|(d, _)| d)
        .collect();
    active.sort_unstable();
    active.dedup();
    let a = &cx.links.attribution;
    let mut notes = Vec::new();
    if a.without_launch > 0 {
        notes.push(format!(
            "{} GPU ops ({}) have no launch in the file: they were launched before the profiling window opened",
            a.without_launch,
            units::time_us(a.unattributed_us)
        ));
    }
    let profiler_ranges = categories
        .iter()
        .find(|cc| cc.category == "cuda_profiler_range")
        .map_or(0, |cc| cc.events);
    if profiler_ranges > 0 && a.gpu_ops == 0 {
        notes.push(format!(
            "GPU work appears only as {profiler_ranges} cuda_profiler_range counter ranges (CUPTI range profiler): there is no kernel timing"
        ));
    }
    let runtime_calls = t.cpu.kind.iter().filter(|k| k.is_runtime()).count() as u64;
    let launches = t
        .cpu
        .name
        .iter()
        .zip(&t.cpu.kind)
        .filter(|(n, k)| k.is_runtime() && t.name(**n).contains("Launch"))
        .count() as u64;
    if launches > 100 && a.gpu_ops * 10 < launches {
        notes.push(format!(
            "{launches} launches but only {} GPU ops ran: this looks like a CUDA/HIP graph capture, which records launches without executing them",
            a.gpu_ops
        ));
    }
    if t.cpu.is_empty() && a.gpu_ops > 0 {
        notes.push("GPU-only trace: no CPU ops, so kernels cannot be attributed to ops".into());
    }
    if a.gpu_ops == 0 && profiler_ranges == 0 {
        notes.push("No GPU ops in this trace (CPU-only or non-GPU accelerator)".into());
    }
    TraceInfo {
        events: c.events,
        time_basis: cx.basis,
        kernels: count_gpu(GpuKind::Kernel),
        memcpys: count_gpu(GpuKind::Memcpy),
        memsets: count_gpu(GpuKind::Memset),
        cpu_ops: t.cpu.kind.iter().filter(|k| k.is_op()).count() as u64,
        runtime_calls,
        span_us: us(hi - lo),
        start_epoch_ns,
        devices: t.meta.devices.iter().map(|d| d.name.clone()).collect(),
        active_devices: active,
        rank: t.meta.rank,
        world_size: t.meta.world_size,
        backend: t.meta.backend.clone(),
        profiler_options: t.meta.options.clone(),
        layout: if t.meta.layout_array {
            "array"
        } else {
            "object"
        }
        .into(),
        schema_version: t.meta.schema_version,
        trace_name: t.meta.trace_name.clone(),
        base_time_ns: t.meta.base_time_ns,
        json_bytes: c.json_bytes,
        categories,
        unknown_categories,
        attribution: a.clone(),
        peak_memory: c
            .peak_memory
            .iter()
            .map(|(d, b)| PeakMemory {
                device: d.clone(),
                bytes: *b,
            })
            .collect(),
        notes,
    }
}

fn step_rows(cx: &Context, source: Option<steps::StepSource>) -> (Vec<StepRow>, StepsStats) {
    let t = cx.t;
    let gpu = &t.gpu;
    let (lo, _) = window(t).unwrap_or((0, 0));
    let mut rows: Vec<StepRow> = cx
        .steps
        .iter()
        .map(|s| StepRow {
            name: t.name(s.name).to_string(),
            number: steps::step_number(t.name(s.name)),
            start_us: us(s.ts - lo),
            cpu_us: us(s.end - s.ts),
            kind: s.kind,
            ..Default::default()
        })
        .collect();
    let mut span: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); rows.len()];
    for g in 0..gpu.len() {
        let s = cx.gpu_step[g];
        if s == NO {
            continue;
        }
        let s = s as usize;
        rows[s].device_us += us(gpu.dur.get(g));
        rows[s].kernels += 1;
        span[s].0 = span[s].0.min(gpu.ts.get(g));
        span[s].1 = span[s].1.max(gpu.ts.get(g) + gpu.dur.get(g));
    }
    for (row, (a, b)) in rows.iter_mut().zip(span) {
        if a <= b {
            row.gpu_span_us = us(b - a);
        }
    }
    let stats = |rows: &[&StepRow]| -> (u64, f64, f64, f64, f64, f64, f64) {
        let mut durs: Vec<f64> = rows.iter().map(|r| r.cpu_us).collect();
        durs.sort_by(f64::total_cmp);
        let n = durs.len();
        (
            n as u64,
            durs.iter().sum::<f64>() / n as f64,
            steps::percentile(&durs, 50.0),
            steps::percentile(&durs, 90.0),
            durs[0],
            durs[n - 1],
            rows.iter().map(|r| r.device_us).sum::<f64>() / n as f64,
        )
    };
    // A trailing step that ran no GPU op in a trace that has GPU ops (the
    // engine's frame after its last batch) is no step of the model's.
    let mut left_out: u64 = 0;
    if cx.gpu_op_ns > 0 {
        for row in rows.iter_mut().rev() {
            if row.kernels > 0 || left_out as usize + 1 >= cx.steps.len() {
                break;
            }
            row.left_out = true;
            left_out += 1;
        }
    }
    if rows.is_empty() {
        return (rows, StepsStats::default());
    }
    let all: Vec<&StepRow> = rows.iter().filter(|r| !r.left_out).collect();
    let (count, mean_us, p50_us, p90_us, min_us, max_us, mean_device_us) = stats(&all);
    let mut by_kind = Vec::new();
    for kind in [
        steps::StepKind::Prefill,
        steps::StepKind::Decode,
        steps::StepKind::Mixed,
    ] {
        let of: Vec<&StepRow> = all
            .iter()
            .copied()
            .filter(|r| r.kind == Some(kind))
            .collect();
        if !of.is_empty() {
            let (count, mean_us, p50_us, _, _, _, mean_device_us) = stats(&of);
            by_kind.push(StepKindStats {
                kind,
                count,
                mean_us,
                p50_us,
                mean_device_us,
            });
        }
    }
    let stats = StepsStats {
        count,
        left_out,
        source: source.unwrap_or_default(),
        mean_us,
        p50_us,
        p90_us,
        min_us,
        max_us,
        mean_device_us,
        by_kind,
    };
    (rows, stats)
}

#[derive(Default)]
struct OpAcc {
    seen: bool,
    kind: Option<CpuKind>,
    calls: u64,
    calls_in_steps: u64,
    self_cpu: i64,
    cpu_total: i64,
    self_dev: i64,
    total_dev: i64,
    gpu_ops: u64,
}

#[derive(Default)]
struct GroupAcc {
    calls: u64,
    calls_in_steps: u64,
    self_cpu: i64,
    self_dev: i64,
    /// (parent chain, Python stack) -> (device ns, calls).
    parents: HashMap<(u32, u32), (i64, u64)>,
}

/// torch's `EventList._remove_dup_nodes`, the rule `key_averages` counts
/// calls by: an op whose parent has the same name and no other child is
/// folded into that parent (a wrapper calling its own implementation, as
/// `aten::add_` does): one call, whose self time is both slices' self
/// time. Repeated until nothing folds, so a chain of such calls is one.
struct FoldedCalls {
    /// Per CPU slice: its direct children in the op tree, saturating at 2.
    children: Vec<u8>,
}

impl FoldedCalls {
    fn new(cx: &Context) -> FoldedCalls {
        let mut children = vec![0u8; cx.t.cpu.len()];
        for &p in &cx.links.parent {
            if p != NO {
                let c = &mut children[p as usize];
                *c = c.saturating_add(1).min(2);
            }
        }
        FoldedCalls { children }
    }

    /// The slice whose call slice `i` is: `i`, or the outermost of the
    /// same-named single-child parents it is folded into.
    fn call_of(&self, cx: &Context, mut i: usize) -> usize {
        let cpu = &cx.t.cpu;
        loop {
            let p = cx.links.parent[i];
            if p == NO || self.children[p as usize] != 1 || cpu.name[p as usize] != cpu.name[i] {
                return i;
            }
            i = p as usize;
        }
    }
}

fn op_rows(cx: &Context, sums: &OpSums, chains: &mut Chains) -> Vec<OpRow> {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut acc: Vec<OpAcc> = Vec::new();
    acc.resize_with(t.names.len(), OpAcc::default);
    let mut groups: HashMap<(Sym, Sym, Sym), GroupAcc> = HashMap::new();
    // GPU ops each op name launched directly (graph replays have rows of
    // their own).
    for g in 0..t.gpu.len() {
        let op = cx.links.op[g];
        if op != NO && !cx.links.graph[g] && cpu.kind[op as usize] != CpuKind::Module {
            acc[cpu.name[op as usize] as usize].gpu_ops += 1;
        }
    }
    let have_steps = !cx.steps.is_empty();
    let mut step = StepCursor::new(&cx.steps);
    let folded = FoldedCalls::new(cx);
    for i in 0..cpu.len() {
        let kind = cpu.kind[i];
        if kind == CpuKind::Module {
            continue;
        }
        // torch's rule: a call whose parent has its name and no other
        // child is the parent's (one call, its time the parent's self time).
        let call = folded.call_of(cx, i);
        let whole = call == i;
        let a = &mut acc[cpu.name[i] as usize];
        a.seen = true;
        a.kind = Some(a.kind.map_or(kind, |k| k.min(kind)));
        let self_cpu = (cpu.dur.get(i) - sums.child_ns.get(i)).max(0);
        a.self_cpu += self_cpu;
        a.self_dev += sums.self_dev.get(i);
        // Device totals stay a sum over every slice of the name, as the
        // independent reference checks them (tests/expected.rs).
        a.total_dev += sums.total_dev.get(i);
        let in_step = have_steps && step.at(cpu.ts.get(i)).is_some();
        if whole {
            a.calls += 1;
            a.cpu_total += cpu.dur.get(i);
            if in_step {
                a.calls_in_steps += 1;
            }
        }
        let (shapes, dtypes) = (cpu.shapes(call), cpu.dtypes(call));
        if shapes != 0 || dtypes != 0 {
            let gacc = groups.entry((cpu.name[i], shapes, dtypes)).or_default();
            if whole {
                gacc.calls += 1;
                gacc.calls_in_steps += in_step as u64;
            }
            gacc.self_cpu += self_cpu;
            gacc.self_dev += sums.self_dev.get(i);
            let parent = cx.links.parent[call];
            let chain = if parent == NO {
                0
            } else {
                chains.of(cx, parent)
            };
            let top = cx.top_op.get(i).copied().unwrap_or(NO);
            let py = if top == NO {
                0
            } else {
                cx.py_stack_of.get(&top).copied().unwrap_or(0)
            };
            let e = gacc.parents.entry((chain, py)).or_default();
            e.0 += sums.self_dev.get(i);
            e.1 += 1;
        }
    }
    let total_gpu = us(cx.gpu_op_ns);
    let basis = cx.basis;
    let n_steps = cx.steps.len();
    let per_step = |calls: u64| (n_steps > 0).then(|| calls as f64 / n_steps as f64);
    // Shape groups per op name, with bytes for copy-like ops.
    let mut by_op: HashMap<Sym, Vec<ShapeGroup>> = HashMap::new();
    for ((name, shapes, dtypes), g) in groups {
        let op = t.name(name);
        let bytes = shapes::copy_bytes(op, t.name(shapes), t.name(dtypes));
        let self_dev_us = us(g.self_dev);
        let (parents, python) = g
            .parents
            .iter()
            .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
            .map(|(&(chain, py), _)| (chains.names(t, chain), cx.py_names(py)))
            .unwrap_or_default();
        by_op.entry(name).or_default().push(ShapeGroup {
            shapes: t.name(shapes).to_string(),
            dtypes: t.name(dtypes).to_string(),
            calls: g.calls,
            self_cpu_us: us(g.self_cpu),
            self_device_us: self_dev_us,
            bytes_per_call: bytes.map(|b| b as f64),
            achieved_gbps: bytes
                .filter(|_| g.self_dev > 0)
                .map(|b| b as f64 * g.calls as f64 / self_dev_us / 1e3),
            calls_per_step: per_step(g.calls_in_steps),
            device_pct: pct(self_dev_us, total_gpu),
            conversion: shapes::conversion(op, t.name(dtypes))
                .map(|(from, to)| format!("{from} -> {to}")),
            parents,
            python,
        });
    }
    acc.iter()
        .enumerate()
        .filter(|(_, a)| a.seen)
        .map(|(sym, a)| {
            let mut groups = by_op.remove(&(sym as Sym)).unwrap_or_default();
            // By the time the trace has (device time, or self CPU time on
            // a trace without GPU ops), then calls.
            let time = |g: &ShapeGroup| basis.pick(g.self_device_us, g.self_cpu_us);
            groups.sort_by(|x, y| {
                time(y)
                    .total_cmp(&time(x))
                    .then(y.calls.cmp(&x.calls))
                    .then(x.shapes.cmp(&y.shapes))
                    .then(x.dtypes.cmp(&y.dtypes))
            });
            // Bytes and rate of the signature that carries the op's time,
            // not an average over unlike calls.
            let top = groups.first();
            let (bytes_per_call, achieved_gbps) = (
                top.and_then(|g| g.bytes_per_call),
                top.and_then(|g| g.achieved_gbps),
            );
            groups.truncate(MAX_SHAPE_GROUPS);
            let self_dev = us(a.self_dev);
            OpRow {
                name: t.name(sym as Sym).to_string(),
                kind: match a.kind {
                    Some(CpuKind::Annotation) => OpKind::Annotation,
                    Some(CpuKind::Op) => OpKind::Op,
                    _ => OpKind::Runtime,
                },
                calls: a.calls,
                self_cpu_us: us(a.self_cpu),
                cpu_total_us: us(a.cpu_total),
                self_device_us: self_dev,
                device_total_us: us(a.total_dev),
                device_pct: pct(self_dev, total_gpu),
                gpu_ops: a.gpu_ops,
                calls_per_step: per_step(a.calls_in_steps),
                input_shapes: groups,
                bytes_per_call,
                achieved_gbps,
            }
        })
        .collect()
}

/// One row per graph replay context: the replays' GPU ops, apart from the
/// ops and annotations around them.
fn replay_rows(cx: &Context) -> Vec<OpRow> {
    let t = cx.t;
    let gpu = &t.gpu;
    let cpu = &t.cpu;
    #[derive(Default)]
    struct Acc {
        launches: hashbrown::HashSet<u32>,
        launches_in_steps: u64,
        launch_ns: i64,
        dev: i64,
        gpu_ops: u64,
    }
    let mut acc: HashMap<Sym, Acc> = HashMap::new();
    for g in 0..gpu.len() {
        let ctx = cx.replay[g];
        if ctx == NO {
            continue;
        }
        let a = acc.entry(ctx).or_default();
        a.dev += gpu.dur.get(g);
        a.gpu_ops += 1;
        let r = cx.links.launch[g];
        if a.launches.insert(r) {
            a.launch_ns += cpu.dur.get(r as usize);
            if cx.gpu_step[g] != NO {
                a.launches_in_steps += 1;
            }
        }
    }
    let total_gpu = us(cx.gpu_op_ns);
    let n_steps = cx.steps.len();
    acc.into_iter()
        .map(|(ctx, a)| OpRow {
            name: replay_row_name(t.name(ctx)),
            kind: OpKind::Graph,
            calls: a.launches.len() as u64,
            self_cpu_us: us(a.launch_ns),
            cpu_total_us: us(a.launch_ns),
            self_device_us: us(a.dev),
            device_total_us: us(a.dev),
            device_pct: pct(us(a.dev), total_gpu),
            gpu_ops: a.gpu_ops,
            calls_per_step: (n_steps > 0).then(|| a.launches_in_steps as f64 / n_steps as f64),
            ..Default::default()
        })
        .collect()
}

fn sort_ops(rows: &mut [OpRow]) {
    rows.sort_by(|a, b| {
        b.self_device_us
            .total_cmp(&a.self_device_us)
            .then(b.self_cpu_us.total_cmp(&a.self_cpu_us))
            .then(a.name.cmp(&b.name))
            .then(a.kind.cmp(&b.kind))
    });
}

/// How much of the device time graph replays run, and what runs between them.
fn graph_stats(cx: &Context) -> GraphStats {
    let t = cx.t;
    let gpu = &t.gpu;
    let a = &cx.links.attribution;
    if a.graph_launches == 0 {
        return GraphStats {
            mode: GraphMode::Eager,
            eager_us: us(cx.gpu_op_ns),
            ..Default::default()
        };
    }
    let (mut graph_ns, mut eager_ns) = (0i64, 0i64);
    let mut eager: HashMap<Sym, i64> = HashMap::new();
    let mut launches: Vec<u32> = Vec::new();
    for g in 0..gpu.len() {
        if !gpu.kind[g].is_gpu_op() {
            continue;
        }
        if cx.links.graph[g] {
            graph_ns += gpu.dur.get(g);
            launches.push(cx.links.launch[g]);
        } else {
            eager_ns += gpu.dur.get(g);
            *eager.entry(gpu.name[g]).or_default() += gpu.dur.get(g);
        }
    }
    // Host time between consecutive replays on a thread, within a step.
    launches.sort_unstable();
    launches.dedup();
    let cpu = &t.cpu;
    launches.sort_by_key(|&r| (cpu.track.get(r as usize), cpu.ts.get(r as usize)));
    let mut between = 0i64;
    for w in launches.windows(2) {
        let (x, y) = (w[0] as usize, w[1] as usize);
        if cpu.track.get(x) != cpu.track.get(y) {
            continue;
        }
        let same_step = match (
            step_at(&cx.steps, cpu.ts.get(x)),
            step_at(&cx.steps, cpu.ts.get(y)),
        ) {
            (Some(p), Some(q)) => p == q,
            (None, None) => cx.steps.is_empty(),
            _ => false,
        };
        if same_step {
            between += (cpu.ts.get(y) - (cpu.ts.get(x) + cpu.dur.get(x))).max(0);
        }
    }
    let mut top: Vec<(Sym, i64)> = eager.into_iter().collect();
    top.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let total = cx.gpu_op_ns.max(1) as f64;
    GraphStats {
        mode: if (eager_ns as f64) < 0.1 * total {
            GraphMode::Graph
        } else {
            GraphMode::Piecewise
        },
        replays: a.graph_launches,
        gpu_ops: a.graph_gpu_ops,
        device_us: us(graph_ns),
        pct: pct(graph_ns as f64, total),
        eager_us: us(eager_ns),
        top_eager: top
            .into_iter()
            .take(3)
            .map(|(s, ns)| NameTime {
                name: names::short_name(t.name(s)),
                us: us(ns),
            })
            .collect(),
        host_between_us: us(between),
    }
}

/// Interned op chains: id 0 is the empty chain; each id is (parent id, name).
pub(crate) struct Chains {
    ids: HashMap<(u32, Sym), u32>,
    nodes: Vec<(u32, Sym)>,
    /// Per CPU slice: its chain id once known, else [`NO`].
    of_op: Vec<u32>,
    /// Scratch: the slices walked up from an op.
    path: Vec<u32>,
}

/// Stands for any `ProfilerStep#N` in a chain.
const ANY_STEP: Sym = Sym::MAX;

impl Chains {
    /// Chains of a trace with `slices` CPU slices.
    fn new(slices: usize) -> Self {
        Chains {
            ids: HashMap::new(),
            nodes: vec![(0, 0)],
            of_op: vec![NO; slices],
            path: Vec::new(),
        }
    }

    /// The chain id of an op slice (memoized; walks up the op tree).
    fn of(&mut self, cx: &Context, op: u32) -> u32 {
        if self.of_op[op as usize] != NO {
            return self.of_op[op as usize];
        }
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        path.push(op);
        let mut base = 0u32;
        let mut p = cx.links.parent[op as usize];
        while p != NO {
            if self.of_op[p as usize] != NO {
                base = self.of_op[p as usize];
                break;
            }
            path.push(p);
            p = cx.links.parent[p as usize];
        }
        for &o in path.iter().rev() {
            let name = cx.t.cpu.name[o as usize];
            let name = if steps::step_number(cx.t.name(name)).is_some() {
                ANY_STEP
            } else {
                name
            };
            let next = self.nodes.len() as u32;
            let id = *self.ids.entry((base, name)).or_insert(next);
            if id == next {
                self.nodes.push((base, name));
            }
            self.of_op[o as usize] = id;
            base = id;
        }
        self.path = path;
        base
    }

    fn names(&self, t: &Trace, mut id: u32) -> Vec<String> {
        let mut out = Vec::new();
        while id != 0 {
            let (parent, name) = self.nodes[id as usize];
            out.push(if name == ANY_STEP {
                "ProfilerStep#*".to_string()
            } else {
                t.name(name).to_string()
            });
            id = parent;
        }
        out.reverse();
        out
    }
}

#[derive(Default)]
struct KernelGroupAcc {
    calls: u64,
    calls_in_steps: u64,
    total: i64,
    bytes: u64,
    /// (op name, shapes, dtypes) of the launching op -> device ns.
    ops: HashMap<(Sym, Sym, Sym), i64>,
}

struct KernelAcc {
    kind: GpuKind,
    calls: u64,
    calls_in_steps: u64,
    total: i64,
    min: i64,
    max: i64,
    bytes: u64,
    groups: HashMap<([u32; 3], [u32; 3]), KernelGroupAcc>,
    /// (op chain, launch name) -> its calls.
    chains: HashMap<(u32, Sym), ChainAcc>,
}

/// Calls of one launch chain: (calls, ns, Python stack -> ns).
type ChainAcc = (u64, i64, HashMap<u32, i64>);

fn kernel_rows(cx: &Context, chains: &mut Chains) -> Vec<KernelRow> {
    let t = cx.t;
    let gpu = &t.gpu;
    let cpu = &t.cpu;
    let mut acc: HashMap<Sym, KernelAcc> = HashMap::new();
    for g in 0..gpu.len() {
        let kind = gpu.kind[g];
        if !kind.is_gpu_op() {
            continue;
        }
        let d = gpu.dur.get(g);
        let a = acc.entry(gpu.name[g]).or_insert_with(|| KernelAcc {
            kind,
            calls: 0,
            calls_in_steps: 0,
            total: 0,
            min: i64::MAX,
            max: i64::MIN,
            bytes: 0,
            groups: HashMap::new(),
            chains: HashMap::new(),
        });
        let in_step = cx.gpu_step[g] != NO;
        a.calls += 1;
        a.total += d;
        a.min = a.min.min(d);
        a.max = a.max.max(d);
        a.bytes += gpu.bytes.get(g) as u64;
        a.calls_in_steps += in_step as u64;
        let grp = a.groups.entry((gpu.grid(g), gpu.block(g))).or_default();
        grp.calls += 1;
        grp.calls_in_steps += in_step as u64;
        grp.total += d;
        grp.bytes += gpu.bytes.get(g) as u64;
        let op = cx.links.op[g];
        if op != NO && !cx.links.graph[g] {
            let o = op as usize;
            *grp.ops
                .entry((cpu.name[o], cpu.shapes(o), cpu.dtypes(o)))
                .or_default() += d;
        }
        let r = cx.links.launch[g];
        if r != NO {
            let chain = if op == NO { 0 } else { chains.of(cx, op) };
            let py = cx.py_stack_of_gpu(g);
            let e = a.chains.entry((chain, cpu.name[r as usize])).or_default();
            e.0 += 1;
            e.1 += d;
            if py != 0 {
                *e.2.entry(py).or_default() += d;
            }
        }
    }
    let total_gpu = us(cx.gpu_op_ns);
    let n_steps = cx.steps.len();
    let per_step = |calls: u64| (n_steps > 0).then(|| calls as f64 / n_steps as f64);
    let mut rows: Vec<KernelRow> = acc
        .into_iter()
        .map(|(sym, a)| {
            let name = t.name(sym).to_string();
            let kind = a.kind.public();
            let geometry = a
                .groups
                .iter()
                .filter(|(k, _)| *k != &([0; 3], [0; 3]))
                .max_by(|x, y| x.1.calls.cmp(&y.1.calls).then(y.0.cmp(x.0)))
                .map(|(k, _)| *k);
            let mut launched_by: Vec<LaunchChain> = a
                .chains
                .iter()
                .map(|(&(chain, launch), (calls, ns, stacks))| LaunchChain {
                    chain: chains.names(t, chain),
                    launch: t.name(launch).to_string(),
                    calls: *calls,
                    total_us: us(*ns),
                    // The Python stack that issued most of this chain's time.
                    python: stacks
                        .iter()
                        .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
                        .map(|(&py, _)| cx.py_names(py))
                        .unwrap_or_default(),
                })
                .collect();
            launched_by.sort_by(|x, y| {
                y.total_us
                    .total_cmp(&x.total_us)
                    .then(y.calls.cmp(&x.calls))
                    .then(x.chain.cmp(&y.chain))
                    .then(x.launch.cmp(&y.launch))
                    .then(x.python.cmp(&y.python))
            });
            launched_by.truncate(MAX_CHAINS);
            let mut groups: Vec<KernelGroup> = a
                .groups
                .iter()
                .map(|(&(grid, block), k)| {
                    let has_geometry = (grid, block) != ([0; 3], [0; 3]);
                    let top = k
                        .ops
                        .iter()
                        .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
                        .map(|(&sig, _)| sig);
                    let op_name = top.map(|(o, _, _)| t.name(o));
                    let copy = top
                        .and_then(|(o, s, d)| shapes::copy_bytes(t.name(o), t.name(s), t.name(d)));
                    let bytes_per_call = match copy {
                        Some(b) => Some(b as f64),
                        None if k.bytes > 0 => Some(k.bytes as f64 / k.calls as f64),
                        None => None,
                    };
                    let total = us(k.total);
                    let avg = total / k.calls as f64;
                    KernelGroup {
                        grid: has_geometry.then_some(grid),
                        block: has_geometry.then_some(block),
                        calls: k.calls,
                        calls_per_step: per_step(k.calls_in_steps),
                        total_us: total,
                        avg_us: avg,
                        pct: pct(total, total_gpu),
                        op: op_name.map(str::to_string),
                        shapes: top
                            .map(|(_, s, _)| t.name(s).to_string())
                            .filter(|s| !s.is_empty()),
                        dtypes: top
                            .map(|(_, _, d)| t.name(d).to_string())
                            .filter(|s| !s.is_empty()),
                        conversion: top
                            .and_then(|(o, _, d)| shapes::conversion(t.name(o), t.name(d)))
                            .map(|(from, to)| format!("{from} -> {to}")),
                        bytes_per_call,
                        achieved_gbps: bytes_per_call.filter(|_| avg > 0.0).map(|b| b / avg / 1e3),
                    }
                })
                .collect();
            groups.sort_by(|x, y| {
                y.total_us
                    .total_cmp(&x.total_us)
                    .then(y.calls.cmp(&x.calls))
                    .then(x.grid.cmp(&y.grid))
                    .then(x.block.cmp(&y.block))
            });
            groups.truncate(MAX_KERNEL_GROUPS);
            let total = us(a.total);
            KernelRow {
                short_name: if a.kind == GpuKind::Kernel {
                    names::short_name(&name)
                } else {
                    name.clone()
                },
                category: names::category(kind.as_str(), &name),
                kind,
                calls: a.calls,
                total_us: total,
                avg_us: total / a.calls as f64,
                min_us: us(a.min),
                max_us: us(a.max),
                pct: pct(total, total_gpu),
                grid: geometry.map(|g| g.0),
                block: geometry.map(|g| g.1),
                bytes_per_call: (a.bytes > 0).then(|| a.bytes as f64 / a.calls as f64),
                calls_per_step: per_step(a.calls_in_steps),
                launched_by,
                groups,
                name,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then(a.name.cmp(&b.name)));
    rows
}
