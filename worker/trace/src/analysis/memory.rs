//! Memory: what a trace made with `profile_memory=True` allocates, when,
//! and who holds it, from its `[memory]` events.
//!
//! Per device, the events are replayed in time order. An allocation
//! (`Bytes` > 0) is live at its address until a free of that address;
//! `Total Allocated` after each event is the curve. The replay gives:
//!
//! - the peak (the first event at the highest total) and the allocations
//!   live then, each with the op that made it: the innermost op around the
//!   allocation on its thread, past the allocator's own `aten::empty*`
//!   (so a cast's buffer belongs to `aten::_to_copy`, not to its
//!   `aten::empty_strided`);
//! - per op signature: bytes allocated per call and per step, and the part
//!   freed before its step ended (churn: a buffer made and dropped in
//!   every layer);
//! - per step: the peak and the net change (steps that keep ending higher
//!   are a leak);
//! - the curve at a bounded resolution: every event in a window around the
//!   peak and each step's extremes exact, the rest as each time bucket's
//!   lowest and highest, so a 14 M-event trace's artifact stays small.
//!
//! Bad inputs give sensible results: a free without its allocation frees
//! nothing known, a reused address replaces what it held, totals below
//! zero are kept as written.

use super::links::NO;
use super::resolution::{keep_bucket_extremes, keep_extremes};
use super::steps::{step_at, StepCursor};
use super::Context;
use crate::import::store::{CpuKind, MemoryEvent, MemoryEvents, Sym};
use hashbrown::{HashMap, HashTable};
use kinetoscope_types::{
    LiveAllocation, MemoryDevice, MemoryReport, MemorySummary, SignatureMemory, StepMemory,
};
use std::hash::BuildHasher;

/// Allocations listed as live at the peak.
const LIVE_AT_PEAK: usize = 20;
/// Of those, kept in the summary.
const LIVE_IN_SUMMARY: usize = 5;
/// Events kept exact on each side of the peak.
const PEAK_WINDOW: usize = 1000;
/// Time buckets of the rest of the curve (each keeps its lowest and highest).
const BUCKETS: usize = 2000;
/// Signatures kept in the artifact.
const MAX_SIGNATURES: usize = 200;
/// Allocations followed while live at once, at most (each is 8 bytes in
/// the replay's table, up to 18 bytes with the table's slack, so 18 MB at
/// most). Why this value: real captures hold at most a few hundred at once
/// (measured 2026-12-05: `torch-h200-train-gpt6` 164, the family's
/// `moe-train-8l` 197, the H200 decode with memory 12, the generated story
/// with `--memory` 9), so only a trace that never frees reaches it
/// (`memsame` in BENCHMARKS.md, every allocation live at the end), where
/// the table alone outgrew the CLI's 32 bytes an event. Past it an allocation
/// is still counted in its signature's bytes and calls, but not followed
/// to its free (churn) nor listed as live at the peak; the trace's notes
/// say how many. Test: `memory::past_the_live_bound_allocations_are_counted_not_followed`.
pub(crate) const MAX_LIVE: usize = 1 << 20;

/// The memory pass's outputs: the summary's part and the artifact.
pub(crate) struct Memory {
    pub summary: Vec<MemorySummary>,
    pub report: MemoryReport,
    /// What the trace's notes say of the pass's bounds.
    pub notes: Vec<String>,
}

/// Ops that only obtain memory for the op around them: an allocation inside
/// one belongs to its parent.
fn is_allocator(name: &str) -> bool {
    matches!(
        name,
        "aten::empty"
            | "aten::empty_strided"
            | "aten::empty_like"
            | "aten::new_empty"
            | "aten::new_empty_strided"
            | "aten::resize_"
            | "aten::zeros"
            | "aten::zeros_like"
            | "aten::ones"
            | "aten::full"
    )
}

/// Finds the op that made an allocation: the innermost op or annotation
/// around `ts` on the thread of `track`, past allocator ops and runtime
/// calls.
struct OpAt<'c, 'a> {
    cx: &'c Context<'a>,
}

impl OpAt<'_, '_> {
    fn find(&self, track: u32, ts: i64) -> u32 {
        let cpu = &self.cx.t.cpu;
        let Some(slices) = self.cx.links.by_thread.get(track as usize) else {
            return NO;
        };
        // The last slice starting at or before ts; the one around ts is it
        // or one of its ancestors (slices nest).
        let k = slices.partition_point(|&i| cpu.ts().get(i as usize) <= ts);
        if k == 0 {
            return NO;
        }
        let mut i = slices[k - 1];
        let mut guard = 0;
        while i != NO && guard < 10_000 {
            let u = i as usize;
            let (start, end) = (cpu.ts().get(u), cpu.ts().get(u) + cpu.dur().get(u));
            let kind = cpu.kind()[u];
            let inside = start <= ts && ts <= end;
            if inside && kind.is_op() && !is_allocator(self.cx.t.name(cpu.name()[u])) {
                return i;
            }
            i = self.cx.links.parent.get(u);
            guard += 1;
        }
        NO
    }
}

/// One device's events in time order: indices into the trace's.
struct Events<'a> {
    all: &'a MemoryEvents,
    idx: Vec<u32>,
}

impl Events<'_> {
    fn len(&self) -> usize {
        self.idx.len()
    }

    /// The `k`-th event in time order.
    fn get(&self, k: usize) -> MemoryEvent {
        self.all.get(self.idx[k] as usize)
    }

    fn ts(&self, k: usize) -> i64 {
        self.all.ts(self.idx[k] as usize)
    }

    fn addr(&self, k: usize) -> i64 {
        self.all.addr(self.idx[k] as usize)
    }

    fn bytes(&self, k: usize) -> i64 {
        self.all.bytes(self.idx[k] as usize)
    }

    fn total(&self, k: usize) -> i64 {
        self.all.total_allocated(self.idx[k] as usize)
    }

    /// The first event whose time is not `before`.
    fn partition_point(&self, before: impl Fn(i64) -> bool) -> usize {
        self.idx
            .partition_point(|&i| before(self.all.ts(i as usize)))
    }
}

/// One live allocation during the replay: its event (`k`, in time order)
/// and signature. Its address, bytes and time are its event's; its op and
/// step are found again where they are needed (the 20 largest at the
/// peak; a free within a step): 8 bytes a live allocation in the table
/// rather than 48 with its key, since every one may be live at once
/// (`memsame` in BENCHMARKS.md).
#[derive(Clone, Copy)]
struct Live {
    k: u32,
    sig: u32,
}

#[derive(Default)]
struct SigAcc {
    name: Sym,
    shapes: Sym,
    dtypes: Sym,
    calls: u64,
    last_op: u32,
    bytes: i64,
    churn: i64,
}

/// The memory pass.
pub(crate) fn analyze(cx: &Context) -> Memory {
    let t = cx.t;
    let mem = &t.memory;
    let mut out = Memory {
        summary: Vec::new(),
        report: MemoryReport::default(),
        notes: Vec::new(),
    };
    if mem.events.is_empty() {
        return out;
    }
    let ops = OpAt { cx };
    // Each device's events, in one pass over them all.
    let mut by_device: Vec<Vec<u32>> = vec![Vec::new(); mem.devices.len()];
    for i in 0..mem.events.len() {
        if let Some(v) = by_device.get_mut(mem.events.device(i) as usize) {
            v.push(i as u32);
        }
    }
    for (device, mut idx) in mem.devices.iter().zip(by_device) {
        // File order within a time; torch writes them in time order, mostly.
        idx.sort_by_key(|&i| mem.events.ts(i as usize));
        if idx.is_empty() {
            continue;
        }
        let events = Events {
            all: &mem.events,
            idx,
        };
        let (report, summary, unfollowed) = device_memory(cx, &ops, device, &events);
        if unfollowed > 0 {
            out.notes.push(format!(
                "More than {MAX_LIVE} allocations live at once on {device}: the {unfollowed} made past that are counted, but not followed to their frees nor listed as live at the peak"
            ));
        }
        out.report.devices.push(report);
        out.summary.push(summary);
    }
    out
}

fn device_memory(
    cx: &Context,
    ops: &OpAt,
    device: &str,
    events: &Events,
) -> (MemoryDevice, MemorySummary, u64) {
    let t = cx.t;
    let steps = &cx.steps;
    // The peak: the first event at the highest total.
    let (mut peak_k, mut peak) = (0usize, i64::MIN);
    let mut reserved_peak = -1i64;
    for k in 0..events.len() {
        let e = events.get(k);
        if e.total_allocated > peak {
            (peak_k, peak) = (k, e.total_allocated);
        }
        reserved_peak = reserved_peak.max(e.total_reserved);
    }
    let Replay {
        sigs,
        at_peak,
        steps: step_mem,
        unfollowed,
    } = replay(cx, ops, events, peak_k);
    // Live at the peak, largest first.
    let live_at_peak: Vec<LiveAllocation> = at_peak
        .iter()
        .take(LIVE_AT_PEAK)
        .map(|l| live_allocation(cx, ops, &events.get(l.k as usize)))
        .collect();
    let by_signature = signature_rows(cx, &sigs);
    let series = series(events, peak_k, &step_mem);
    let peak_ns = events.ts(peak_k);
    let peak_step = StepCursor::new(steps)
        .at(peak_ns)
        .map(|s| steps[s].label(t));
    let churn_total: f64 = by_signature.iter().map(|s| s.churn_bytes_per_step).sum();
    let mut top_churn: Vec<SignatureMemory> = by_signature
        .iter()
        .filter(|s| s.churn_bytes_per_step > 0.0)
        .cloned()
        .collect();
    top_churn.sort_by(|a, b| b.churn_bytes_per_step.total_cmp(&a.churn_bytes_per_step));
    top_churn.truncate(3);
    let summary = MemorySummary {
        device: device.to_string(),
        peak_bytes: peak,
        peak_ns,
        peak_step,
        reserved_peak_bytes: (reserved_peak >= 0).then_some(reserved_peak),
        live_at_peak: live_at_peak.iter().take(LIVE_IN_SUMMARY).cloned().collect(),
        churn_bytes_per_step: (!steps.is_empty()).then_some(churn_total),
        top_churn,
        steps: step_mem.len() as u64,
        growth_bytes_per_step: growth(&step_mem, peak),
    };
    let report = MemoryDevice {
        device: device.to_string(),
        peak_bytes: peak,
        peak_ns,
        reserved_peak_bytes: reserved_peak,
        series,
        events: events.len() as u64,
        live_at_peak,
        by_signature,
        steps: step_mem,
    };
    (report, summary, unfollowed)
}

/// What replaying one device's allocations and frees in order gives.
struct Replay {
    /// Bytes allocated by each (op, shapes, dtypes).
    sigs: Vec<SigAcc>,
    /// The largest allocations live at the peak event ([`largest`]).
    at_peak: Vec<Live>,
    /// Each step's peak and net change (steps with events only).
    steps: Vec<StepMemory>,
    /// Allocations made while [`MAX_LIVE`] were live: not followed.
    unfollowed: u64,
}

/// Replays one device's memory events: each allocation's op signature and
/// step, churn (freed in the step it was made in), what is live at the
/// event `peak_k`, and each step's peak and net change.
fn replay(cx: &Context, ops: &OpAt, events: &Events, peak_k: usize) -> Replay {
    let t = cx.t;
    let cpu = &t.cpu;
    let steps = &cx.steps;
    // Live allocations by address (their events'); a reused address
    // replaces what it held.
    let hasher = hashbrown::DefaultHashBuilder::default();
    let hash = |addr: i64| hasher.hash_one(addr);
    let mut live: HashTable<Live> = HashTable::new();
    let mut sigs: Vec<SigAcc> = Vec::new();
    let mut sig_of: HashMap<(Sym, Sym, Sym), u32> = HashMap::new();
    let mut at_peak: Vec<Live> = Vec::new();
    let mut unfollowed = 0u64;
    let mut cursor = StepCursor::new(steps);
    let mut step_mem: Vec<StepMemory> = steps
        .iter()
        .map(|s| StepMemory {
            step: t.name(s.name).to_string(),
            start_ns: s.ts,
            end_ns: s.end,
            peak_bytes: i64::MIN,
            net_bytes: 0,
        })
        .collect();
    // Total allocated before each step's first event and after its last.
    let mut step_bounds: Vec<Option<(i64, i64)>> = vec![None; steps.len()];
    for k in 0..events.len() {
        let e = events.get(k);
        let step = cursor.at(e.ts);
        if let Some(s) = step {
            let m = &mut step_mem[s];
            m.peak_bytes = m.peak_bytes.max(e.total_allocated);
            let before = e.total_allocated - e.bytes;
            let b = step_bounds[s].get_or_insert((before, e.total_allocated));
            b.1 = e.total_allocated;
        }
        if e.bytes > 0 {
            let op = ops.find(e.track, e.ts);
            let (name, shapes, dtypes) = if op == NO {
                (0, 0, 0)
            } else {
                let u = op as usize;
                (cpu.name()[u], cpu.shapes(u), cpu.dtypes(u))
            };
            let next = sigs.len() as u32;
            let sig = *sig_of.entry((name, shapes, dtypes)).or_insert_with(|| {
                sigs.push(SigAcc {
                    name,
                    shapes,
                    dtypes,
                    last_op: NO,
                    ..Default::default()
                });
                next
            });
            let acc = &mut sigs[sig as usize];
            acc.bytes += e.bytes;
            if acc.last_op != op || op == NO {
                acc.calls += 1;
                acc.last_op = op;
            }
            let new = Live { k: k as u32, sig };
            let h = hash(e.addr);
            let full = live.len() >= MAX_LIVE;
            match live.find_mut(h, |l| events.addr(l.k as usize) == e.addr) {
                Some(l) => *l = new,
                None if full => unfollowed += 1,
                None => {
                    live.insert_unique(h, new, |l| hash(events.addr(l.k as usize)));
                }
            }
        } else if e.bytes < 0 {
            let found = live.find_entry(hash(e.addr), |l| events.addr(l.k as usize) == e.addr);
            if let Ok(entry) = found {
                let (l, _) = entry.remove();
                // Freed in the step it was made in: churn.
                let made = l.k as usize;
                if step.is_some() && step_at(steps, events.ts(made)) == step {
                    sigs[l.sig as usize].churn += events.bytes(made);
                }
            }
        }
        if k == peak_k {
            at_peak = largest(live.iter(), events);
        }
    }
    for (s, b) in step_bounds.iter().enumerate() {
        if let Some((start, end)) = b {
            step_mem[s].net_bytes = end - start;
        }
    }
    let steps = step_mem
        .into_iter()
        .filter(|m| m.peak_bytes != i64::MIN)
        .collect();
    Replay {
        sigs,
        at_peak,
        steps,
        unfollowed,
    }
}

/// The [`LIVE_AT_PEAK`] largest of `live`, largest first, then earliest,
/// then the first made (the table's order is the hasher's, seeded per
/// process: it must not decide a tie): at most twice that many held
/// while they are read, not the whole live set (a million allocations
/// live at the peak were 32 MB of `memsame1m`'s, BENCHMARKS.md).
fn largest<'a>(live: impl Iterator<Item = &'a Live>, events: &Events) -> Vec<Live> {
    let key = |l: &Live| (events.bytes(l.k as usize), events.ts(l.k as usize));
    let order = |a: &Live, b: &Live| {
        let ((ab, at), (bb, bt)) = (key(a), key(b));
        bb.cmp(&ab).then(at.cmp(&bt)).then(a.k.cmp(&b.k))
    };
    let mut out: Vec<Live> = Vec::with_capacity(2 * LIVE_AT_PEAK);
    for &l in live {
        out.push(l);
        if out.len() == 2 * LIVE_AT_PEAK {
            out.sort_by(order);
            out.truncate(LIVE_AT_PEAK);
        }
    }
    out.sort_by(order);
    out.truncate(LIVE_AT_PEAK);
    out
}

/// The signatures' rows, most bytes per step first, at most
/// [`MAX_SIGNATURES`].
fn signature_rows(cx: &Context, sigs: &[SigAcc]) -> Vec<SignatureMemory> {
    let t = cx.t;
    let per = cx.steps.len().max(1) as f64;
    let mut rows: Vec<SignatureMemory> = sigs
        .iter()
        .filter(|s| s.bytes > 0)
        .map(|s| SignatureMemory {
            op: if s.name == 0 {
                "(outside any op)".into()
            } else {
                t.name(s.name).to_string()
            },
            shapes: t.name(s.shapes).to_string(),
            dtypes: t.name(s.dtypes).to_string(),
            calls: s.calls,
            bytes_per_call: s.bytes as f64 / s.calls.max(1) as f64,
            bytes_per_step: s.bytes as f64 / per,
            churn_bytes_per_step: s.churn as f64 / per,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.bytes_per_step
            .total_cmp(&a.bytes_per_step)
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.shapes.cmp(&b.shapes))
    });
    rows.truncate(MAX_SIGNATURES);
    rows
}

/// An allocation live at the peak, from its event.
fn live_allocation(cx: &Context, ops: &OpAt, e: &MemoryEvent) -> LiveAllocation {
    let t = cx.t;
    let cpu = &t.cpu;
    let op = ops.find(e.track, e.ts);
    if op == NO {
        return LiveAllocation {
            bytes: e.bytes,
            op: String::new(),
            shapes: String::new(),
            dtypes: String::new(),
            t_ns: e.ts,
            python: Vec::new(),
        };
    }
    let u = op as usize;
    // The Python stack above the op's outermost op, when the trace has one.
    let python = cx
        .stacks
        .top_op
        .get(u)
        .filter(|&&top| top != NO)
        .and_then(|top| cx.stacks.stack_of.get(top))
        .map(|&id| {
            cx.stacks.stacks[id as usize]
                .iter()
                .take(8)
                .map(|&s| t.name(s).to_string())
                .collect()
        })
        .unwrap_or_default();
    debug_assert!(cpu.kind()[u] != CpuKind::Module);
    LiveAllocation {
        bytes: e.bytes,
        op: t.name(cpu.name()[u]).to_string(),
        shapes: t.name(cpu.shapes(u)).to_string(),
        dtypes: t.name(cpu.dtypes(u)).to_string(),
        t_ns: e.ts,
        python,
    }
}

/// Memory that grows from step to step: at least 3 steps, at least 3 in 4
/// ending above where they began, and the growth over the steps at least
/// 1% of the peak (and 1 MB): the mean net change per step.
fn growth(steps: &[StepMemory], peak: i64) -> Option<f64> {
    if steps.len() < 3 {
        return None;
    }
    let up = steps.iter().filter(|s| s.net_bytes > 0).count();
    let total: i64 = steps.iter().map(|s| s.net_bytes).sum();
    let enough = total as f64 >= (0.01 * peak.max(0) as f64).max(1e6);
    (4 * up >= 3 * steps.len() && enough).then(|| total as f64 / steps.len() as f64)
}

/// The curve at a bounded resolution: every event within [`PEAK_WINDOW`]
/// of the peak, each step's highest and lowest, and each of [`BUCKETS`]
/// time buckets' highest and lowest; in time order, each event once.
fn series(events: &Events, peak_k: usize, steps: &[StepMemory]) -> Vec<[i64; 3]> {
    let n = events.len();
    let mut keep = vec![false; n];
    let lo = peak_k.saturating_sub(PEAK_WINDOW);
    let hi = (peak_k + PEAK_WINDOW + 1).min(n);
    keep[lo..hi].iter_mut().for_each(|k| *k = true);
    let total = |k: usize| events.total(k);
    for s in steps {
        let a = events.partition_point(|ts| ts < s.start_ns);
        let b = events.partition_point(|ts| ts <= s.end_ns);
        keep_extremes(a..b, total, &mut keep);
    }
    keep_bucket_extremes(n, BUCKETS, |k| events.ts(k), total, &mut keep);
    (0..n)
        .filter(|&k| keep[k])
        .map(|k| {
            let e = events.get(k);
            [e.ts, e.total_allocated, e.total_reserved]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: i64, bytes: i64, total: i64) -> MemoryEvent {
        MemoryEvent {
            ts,
            track: 0,
            device: 0,
            addr: ts,
            bytes,
            total_allocated: total,
            total_reserved: -1,
        }
    }

    #[test]
    fn the_curve_is_bounded_and_keeps_the_peak_and_the_ends() {
        let n = 200_000;
        let events: Vec<MemoryEvent> = (0..n)
            .map(|k| {
                ev(
                    k as i64 * 10,
                    1,
                    ((k * 7919) % 1000) as i64 + if k == 150_000 { 5000 } else { 0 },
                )
            })
            .collect();
        let mut all = MemoryEvents::default();
        events.iter().for_each(|e| all.push(e));
        let events = Events {
            all: &all,
            idx: (0..n as u32).collect(),
        };
        let s = series(&events, 150_000, &[]);
        assert!(
            s.len() <= 2 * PEAK_WINDOW + 2 * BUCKETS + 2 + 10,
            "{}",
            s.len()
        );
        assert!(s.iter().any(|p| p[0] == 1_500_000 && p[1] >= 5000));
        assert_eq!(s[0][0], 0);
        assert_eq!(s.last().unwrap()[0], (n as i64 - 1) * 10);
        assert!(s.windows(2).all(|w| w[0][0] <= w[1][0]));
    }

    #[test]
    fn growth_needs_most_steps_up() {
        let step = |net: i64| StepMemory {
            net_bytes: net,
            ..Default::default()
        };
        let leak: Vec<StepMemory> = (0..10).map(|_| step(50 << 20)).collect();
        assert_eq!(growth(&leak, 10 << 30), Some((50 << 20) as f64));
        let flat: Vec<StepMemory> = (0..10)
            .map(|k| step(if k % 2 == 0 { 1 << 20 } else { -(1 << 20) }))
            .collect();
        assert_eq!(growth(&flat, 10 << 30), None);
        let tiny: Vec<StepMemory> = (0..10).map(|_| step(1000)).collect();
        assert_eq!(growth(&tiny, 10 << 30), None);
    }
}
