//! The trace's facts: event counts by kind and category, devices, the
//! profiler's options, how GPU ops were attributed, and notes on what the
//! trace lacks (no launches, a graph capture, no kernel timing).

use super::{us, Context};
use crate::import::store::{self, GpuKind, IntColumn, Sym, Tables, TimeColumn};
use kinetoscope_types::{units, CategoryCount, PeakMemory, TraceInfo, TraceLayout};

/// First start and last end over all stored slices, ns.
pub(crate) fn window(t: &Tables) -> Option<(i64, i64)> {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let mut visit = |ts: &TimeColumn, dur: &IntColumn| {
        for (a, d) in ts.iter().zip(dur.iter()) {
            lo = lo.min(a);
            hi = hi.max(a + d);
        }
    };
    visit(t.cpu.ts(), t.cpu.dur());
    visit(t.gpu.ts(), t.gpu.dur());
    visit(t.other.ts(), t.other.dur());
    (lo <= hi).then_some((lo, hi))
}

/// The trace's facts: what it holds, where it came from, what it lacks.
pub(crate) fn trace_info(cx: &Context) -> TraceInfo {
    let t = cx.t;
    let c = &t.counters;
    let count_gpu = |k: GpuKind| t.gpu.kind().iter().filter(|&&x| x == k).count() as u64;
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
            cc.category != "(none)" && !crate::import::builder::is_known_category(&cc.category)
        })
        .map(|cc| cc.category.clone())
        .collect();
    let active = active_devices(t);
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
    // Runtime calls counted by name first, then the names read once each.
    let mut by_name = vec![0u64; t.names.len()];
    for (n, k) in t.cpu.name().iter().zip(t.cpu.kind()) {
        if k.is_runtime() {
            by_name[*n as usize] += 1;
        }
    }
    let runtime_calls: u64 = by_name.iter().sum();
    let launches: u64 = by_name
        .iter()
        .enumerate()
        .filter(|&(n, &c)| c > 0 && t.name(n as Sym).contains("Launch"))
        .map(|(_, c)| c)
        .sum();
    if launches > 100 && a.gpu_ops * 10 < launches {
        notes.push(format!(
            "{launches} launches but only {} GPU ops ran: this looks like a CUDA/HIP graph capture, which records launches without executing them",
            a.gpu_ops
        ));
    }
    let past = t.names.past_bound;
    if past.folded + past.lumped > 0 {
        notes.push(format!(
            "More than {} distinct names and shapes (or {} MB of them): past that, {} were kept with their numbers as # (request_# for request_1234, [[#, #]] for [[4096, 8]]), and {} more as \"{}\"",
            store::MAX_TEXTS,
            store::MAX_TEXT_POOL_BYTES >> 20,
            past.folded,
            past.lumped,
            store::LUMPED_TEXT
        ));
    }
    let past_series = t.counter_samples.past_bound;
    if past_series > 0 {
        notes.push(format!(
            "More than {} counter series: the {past_series} samples of the series past that were left out",
            store::MAX_COUNTER_SERIES
        ));
    }
    if t.memory.past_bound > 0 {
        notes.push(format!(
            "More than {} devices in the memory events: the {} events of the devices past that were left out",
            store::MAX_MEMORY_DEVICES,
            t.memory.past_bound
        ));
    }
    if c.past_tracks > 0 {
        notes.push(format!(
            "More than {} threads and streams: the {} slices of the threads past that are on one track, \"{}\"",
            store::MAX_TRACKS,
            c.past_tracks,
            store::LUMPED_TRACK
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
        cpu_ops: t.cpu.kind().iter().filter(|k| k.is_op()).count() as u64,
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
            TraceLayout::Array
        } else {
            TraceLayout::Object
        },
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

/// The devices that ran a GPU op, in order: found as a set (a value a GPU
/// op, sorted, took 8 bytes an event at the analysis's peak).
fn active_devices(t: &Tables) -> Vec<i64> {
    let mut active: Vec<i64> = t
        .gpu
        .device()
        .iter()
        .zip(t.gpu.kind())
        .filter(|(_, k)| k.is_gpu_op())
        .map(|(d, _)| d)
        .collect::<hashbrown::HashSet<i64>>()
        .into_iter()
        .collect();
    active.sort_unstable();
    active
}
