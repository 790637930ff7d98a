//! Analysis: a parsed [`Trace`] in, a [`Summary`] out. Pure code: no I/O,
//! no clock, no randomness, so the same trace always gives the same summary.
//!
//! - [`links`]: op tree per thread, GPU op -> launch -> op.
//! - [`steps`]: step detection.
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
pub mod shapes;
pub mod steps;

use crate::trace::store::{CpuKind, GpuKind, Sym, Trace};
use hashbrown::HashMap;
use kinetoscope_types::*;
use links::{Links, NO};
use steps::{step_at, StepSpan};

/// Version of the analysis; bump it whenever the summary changes so stored
/// runs get re-analyzed.
pub const ANALYZER_VERSION: u32 = 1;

/// Choices a user can make about the analysis.
#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    /// Op, annotation or module name that marks one layer (overrides detection).
    pub layer_marker: Option<String>,
    /// Number of layers per step (overrides the period search).
    pub layer_period: Option<u64>,
}

/// How many chains are kept per kernel, and shape groups per op.
const MAX_CHAINS: usize = 20;
const MAX_SHAPE_GROUPS: usize = 5;

/// Everything the analysis derives once and the table builders share.
pub(crate) struct Context<'a> {
    pub t: &'a Trace,
    pub links: Links,
    pub steps: Vec<StepSpan>,
    /// Per GPU slice: index of the step its launch falls in.
    pub gpu_step: Vec<u32>,
    /// Total GPU-op time, ns.
    pub gpu_op_ns: i64,
    /// Per CPU slice: device time of GPU ops it launched directly, ns.
    pub self_dev: Vec<i64>,
    /// Per CPU slice: device time of GPU ops launched in its subtree, ns.
    pub total_dev: Vec<i64>,
}

/// Analyzes a parsed trace.
pub fn analyze(t: &Trace, opts: &AnalysisOptions) -> Summary {
    let links = links::link(t);
    let (steps, marker) = steps::find_steps(t);
    let cpu = &t.cpu;
    let gpu = &t.gpu;

    let mut self_dev = vec![0i64; cpu.len()];
    let mut gpu_step = vec![NO; gpu.len()];
    let mut gpu_op_ns = 0i64;
    for g in 0..gpu.len() {
        if !gpu.kind[g].is_gpu_op() {
            continue;
        }
        gpu_op_ns += gpu.dur[g];
        let op = links.op[g];
        if op != NO {
            self_dev[op as usize] += gpu.dur[g];
        }
        let r = links.launch[g];
        if r != NO {
            if let Some(s) = step_at(&steps, cpu.ts[r as usize]) {
                gpu_step[g] = s as u32;
            }
        }
    }
    let mut total_dev = self_dev.clone();
    for &op in links.preorder.iter().rev() {
        let p = links.parent[op as usize];
        if p != NO {
            total_dev[p as usize] += total_dev[op as usize];
        }
    }
    let cx = Context {
        t,
        links,
        steps,
        gpu_step,
        gpu_op_ns,
        self_dev,
        total_dev,
    };

    let trace = trace_info(&cx);
    let (step_rows, steps_stats) = step_rows(&cx, marker);
    let ops = op_rows(&cx);
    let kernels = kernel_rows(&cx);
    let gpu_time = gpu_time::compute(t, &kernels, trace.span_us);
    let layers = layers::attribute(&cx, &kernels, opts);
    let mut summary = Summary {
        analyzer_version: ANALYZER_VERSION,
        trace,
        ops,
        kernels,
        steps: step_rows,
        steps_stats,
        gpu_time,
        layers,
        findings: Vec::new(),
    };
    summary.findings = findings::find(&summary);
    summary
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
    let mut visit = |ts: &[i64], dur: &[i64]| {
        for (a, d) in ts.iter().zip(dur) {
            lo = lo.min(*a);
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
        .filter(|cc| cc.category != "(none)" && !crate::trace::parse::is_known_category(&cc.category))
        .map(|cc| cc.category.clone())
        .collect();
    let mut active: Vec<i64> = t
        .gpu
        .device
        .iter()
        .zip(&t.gpu.kind)
        .filter(|(_, k)| k.is_gpu_op())
        .map(|(d, _)| *d)
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
        layout: if t.meta.layout_array { "array" } else { "object" }.into(),
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

fn step_rows(cx: &Context, marker: Option<steps::StepMarker>) -> (Vec<StepRow>, StepsStats) {
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
        rows[s].device_us += us(gpu.dur[g]);
        rows[s].kernels += 1;
        span[s].0 = span[s].0.min(gpu.ts[g]);
        span[s].1 = span[s].1.max(gpu.ts[g] + gpu.dur[g]);
    }
    for (row, (a, b)) in rows.iter_mut().zip(span) {
        if a <= b {
            row.gpu_span_us = us(b - a);
        }
    }
    let mut durs: Vec<f64> = rows.iter().map(|r| r.cpu_us).collect();
    durs.sort_by(f64::total_cmp);
    let n = rows.len();
    let stats = if n == 0 {
        StepsStats::default()
    } else {
        StepsStats {
            count: n as u64,
            source: marker.map(|m| m.as_str().to_string()).unwrap_or_default(),
            mean_us: durs.iter().sum::<f64>() / n as f64,
            p50_us: steps::percentile(&durs, 50.0),
            p90_us: steps::percentile(&durs, 90.0),
            min_us: durs[0],
            max_us: durs[n - 1],
            mean_device_us: rows.iter().map(|r| r.device_us).sum::<f64>() / n as f64,
        }
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
    self_cpu: i64,
    self_dev: i64,
}

fn op_rows(cx: &Context) -> Vec<OpRow> {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut acc: Vec<OpAcc> = Vec::new();
    acc.resize_with(t.names.len(), OpAcc::default);
    let mut groups: HashMap<(Sym, Sym, Sym), GroupAcc> = HashMap::new();
    let mut gpu_ops_of = vec![0u32; cpu.len()];
    for g in 0..t.gpu.len() {
        let op = cx.links.op[g];
        if op != NO {
            gpu_ops_of[op as usize] += 1;
        }
    }
    let have_steps = !cx.steps.is_empty();
    for i in 0..cpu.len() {
        let kind = cpu.kind[i];
        if kind == CpuKind::Module {
            continue;
        }
        let a = &mut acc[cpu.name[i] as usize];
        a.seen = true;
        a.kind = Some(a.kind.map_or(kind, |k| k.min(kind)));
        a.calls += 1;
        let self_cpu = (cpu.dur[i] - cx.links.child_ns[i]).max(0);
        a.self_cpu += self_cpu;
        a.cpu_total += cpu.dur[i];
        a.self_dev += cx.self_dev[i];
        a.total_dev += cx.total_dev[i];
        a.gpu_ops += gpu_ops_of[i] as u64;
        if have_steps && step_at(&cx.steps, cpu.ts[i]).is_some() {
            a.calls_in_steps += 1;
        }
        if cpu.shapes[i] != 0 || cpu.dtypes[i] != 0 {
            let gacc = groups
                .entry((cpu.name[i], cpu.shapes[i], cpu.dtypes[i]))
                .or_default();
            gacc.calls += 1;
            gacc.self_cpu += self_cpu;
            gacc.self_dev += cx.self_dev[i];
        }
    }
    // Shape groups per op name, with bytes for copy-like ops.
    let mut by_op: HashMap<Sym, Vec<ShapeGroup>> = HashMap::new();
    for ((name, shapes, dtypes), g) in groups {
        let op = t.name(name);
        let bytes = shapes::copy_bytes(op, t.name(shapes), t.name(dtypes));
        let self_dev_us = us(g.self_dev);
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
        });
    }
    let total_gpu = us(cx.gpu_op_ns);
    let n_steps = cx.steps.len();
    let mut rows: Vec<OpRow> = acc
        .iter()
        .enumerate()
        .filter(|(_, a)| a.seen)
        .map(|(sym, a)| {
            let mut groups = by_op.remove(&(sym as Sym)).unwrap_or_default();
            groups.sort_by(|x, y| y.calls.cmp(&x.calls).then(x.shapes.cmp(&y.shapes)));
            // Bytes over all groups that know them.
            let (mut bytes, mut calls, mut dev) = (0.0, 0u64, 0.0);
            for g in &groups {
                if let Some(b) = g.bytes_per_call {
                    bytes += b * g.calls as f64;
                    calls += g.calls;
                    dev += g.self_device_us;
                }
            }
            groups.truncate(MAX_SHAPE_GROUPS);
            let self_dev = us(a.self_dev);
            OpRow {
                name: t.name(sym as Sym).to_string(),
                kind: match a.kind {
                    Some(CpuKind::Annotation) => "annotation",
                    Some(CpuKind::Op) => "op",
                    _ => "runtime",
                }
                .into(),
                calls: a.calls,
                self_cpu_us: us(a.self_cpu),
                cpu_total_us: us(a.cpu_total),
                self_device_us: self_dev,
                device_total_us: us(a.total_dev),
                device_pct: pct(self_dev, total_gpu),
                gpu_ops: a.gpu_ops,
                calls_per_step: (n_steps > 0).then(|| a.calls_in_steps as f64 / n_steps as f64),
                input_shapes: groups,
                bytes_per_call: (calls > 0).then(|| bytes / calls as f64),
                achieved_gbps: (calls > 0 && dev > 0.0).then(|| bytes / dev / 1e3),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.self_device_us
            .total_cmp(&a.self_device_us)
            .then(b.self_cpu_us.total_cmp(&a.self_cpu_us))
            .then(a.name.cmp(&b.name))
    });
    rows
}

struct KernelAcc {
    kind: GpuKind,
    calls: u64,
    calls_in_steps: u64,
    total: i64,
    min: i64,
    max: i64,
    bytes: u64,
    geometry: HashMap<([u32; 3], [u32; 3]), u64>,
    chains: HashMap<(u32, Sym), (u64, i64)>,
}

/// Interned op chains: id 0 is the empty chain; each id is (parent id, name).
struct Chains {
    ids: HashMap<(u32, Sym), u32>,
    nodes: Vec<(u32, Sym)>,
    of_op: HashMap<u32, u32>,
}

/// Stands for any `ProfilerStep#N` in a chain.
const ANY_STEP: Sym = Sym::MAX;

impl Chains {
    fn new() -> Self {
        Chains {
            ids: HashMap::new(),
            nodes: vec![(0, 0)],
            of_op: HashMap::new(),
        }
    }

    /// The chain id of an op slice (memoized; walks up the op tree).
    fn of(&mut self, cx: &Context, op: u32) -> u32 {
        if let Some(&c) = self.of_op.get(&op) {
            return c;
        }
        let mut path = vec![op];
        let mut base = 0u32;
        let mut p = cx.links.parent[op as usize];
        while p != NO {
            if let Some(&c) = self.of_op.get(&p) {
                base = c;
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
            self.of_op.insert(o, id);
            base = id;
        }
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

fn kernel_rows(cx: &Context) -> Vec<KernelRow> {
    let t = cx.t;
    let gpu = &t.gpu;
    let mut acc: HashMap<Sym, KernelAcc> = HashMap::new();
    let mut chains = Chains::new();
    for g in 0..gpu.len() {
        let kind = gpu.kind[g];
        if !kind.is_gpu_op() {
            continue;
        }
        let d = gpu.dur[g];
        let a = acc.entry(gpu.name[g]).or_insert_with(|| KernelAcc {
            kind,
            calls: 0,
            calls_in_steps: 0,
            total: 0,
            min: i64::MAX,
            max: i64::MIN,
            bytes: 0,
            geometry: HashMap::new(),
            chains: HashMap::new(),
        });
        a.calls += 1;
        a.total += d;
        a.min = a.min.min(d);
        a.max = a.max.max(d);
        a.bytes += gpu.bytes[g];
        if cx.gpu_step[g] != NO {
            a.calls_in_steps += 1;
        }
        if gpu.grid[g] != [0, 0, 0] || gpu.block[g] != [0, 0, 0] {
            *a.geometry.entry((gpu.grid[g], gpu.block[g])).or_insert(0) += 1;
        }
        let r = cx.links.launch[g];
        if r != NO {
            let op = cx.links.op[g];
            let chain = if op == NO { 0 } else { chains.of(cx, op) };
            let e = a.chains.entry((chain, t.cpu.name[r as usize])).or_insert((0, 0));
            e.0 += 1;
            e.1 += d;
        }
    }
    let total_gpu = us(cx.gpu_op_ns);
    let n_steps = cx.steps.len();
    let mut rows: Vec<KernelRow> = acc
        .into_iter()
        .map(|(sym, a)| {
            let name = t.name(sym).to_string();
            let kind = a.kind.as_str();
            let geometry = a
                .geometry
                .iter()
                .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
                .map(|(k, _)| *k);
            let mut launched_by: Vec<LaunchChain> = a
                .chains
                .iter()
                .map(|(&(chain, launch), &(calls, ns))| LaunchChain {
                    chain: chains.names(t, chain),
                    launch: t.name(launch).to_string(),
                    calls,
                    total_us: us(ns),
                })
                .collect();
            launched_by.sort_by(|x, y| {
                y.total_us
                    .total_cmp(&x.total_us)
                    .then(y.calls.cmp(&x.calls))
                    .then(x.chain.cmp(&y.chain))
            });
            launched_by.truncate(MAX_CHAINS);
            let total = us(a.total);
            KernelRow {
                short_name: if a.kind == GpuKind::Kernel {
                    names::short_name(&name)
                } else {
                    name.clone()
                },
                category: names::category(kind, &name).into(),
                kind: kind.into(),
                calls: a.calls,
                total_us: total,
                avg_us: total / a.calls as f64,
                min_us: us(a.min),
                max_us: us(a.max),
                pct: pct(total, total_gpu),
                grid: geometry.map(|g| g.0),
                block: geometry.map(|g| g.1),
                bytes_per_call: (a.bytes > 0).then(|| a.bytes as f64 / a.calls as f64),
                calls_per_step: (n_steps > 0).then(|| a.calls_in_steps as f64 / n_steps as f64),
                launched_by,
                name,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then(a.name.cmp(&b.name)));
    rows
}
