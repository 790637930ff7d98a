//! The op table, by torch's `key_averages` rules: one row per op name
//! (calls folded as torch folds them), its self and total CPU and device
//! time, its input-shape groups with bytes moved and the chain that called
//! them; and one row per graph replay context.

use super::attribution::OpSums;
use super::chains::Chains;
use super::links::{RowIds, NO};
use super::steps::StepCursor;
use super::{pct, replay_row_name, shapes, us, Context, MAX_SHAPE_GROUPS};
use crate::import::store::{CpuKind, Sym};
use hashbrown::HashMap;
use kinetoscope_types::{OpKind, OpRow, PartlyUsed, ShapeGroup};

/// The op table: the ops' rows and the replays', ranked.
/// With it, the words of the trace's note on the ops it leaves out
/// ([`super::MAX_TABLE_ROWS`]).
pub(crate) fn table(
    cx: &Context,
    sums: &OpSums,
    chains: &mut Chains,
) -> (Vec<OpRow>, Option<String>) {
    // Only the listed names have shape groups ([`accumulate`]).
    let Accumulated { by_name, groups } = accumulate(cx, sums, chains);
    let (listed, cut) = listed_rows(&by_name);
    let mut by_op = shape_groups(cx, chains, groups);
    partly_used(&mut by_op, cx);
    let mut rows: Vec<OpRow> = listed
        .into_iter()
        .map(|sym| {
            let groups = by_op.remove(&sym).unwrap_or_default();
            row(cx, sym, &by_name[sym as usize], groups)
        })
        .collect();
    rows.extend(replay_rows(cx));
    sort_ops(&mut rows);
    let total_cpu: i64 = by_name.iter().map(|a| a.self_cpu).sum();
    let note = cut.map(|(n, cpu)| {
        format!(
            "the op table lists the {} op names with the most time; {n} more, {:.1}% of self CPU time, are left out",
            super::MAX_TABLE_ROWS,
            pct(cpu, total_cpu as f64),
        )
    });
    (rows, note)
}

/// Per op name and per (name, shapes, dtypes): the sums its rows are made of.
struct Accumulated {
    /// By name symbol.
    by_name: Vec<OpAcc>,
    /// By (name, shapes, dtypes).
    groups: HashMap<(Sym, Sym, Sym), GroupAcc>,
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
    /// Steps with a call, and the last such step (+1; 0 before any).
    steps_seen: u32,
    last_step: u32,
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
///
/// Each slice's call is found once, a walk up the chain stopping at the
/// first slice already resolved, so the whole table is linear however deep
/// such chains nest (a "staircase" of partly overlapping same-named ops
/// makes one chain as deep as the trace: walking it from every slice was
/// quadratic, RELIABILITY.md).
struct FoldedCalls {
    /// Per CPU slice that folds into its parent: the slice whose call it
    /// is ([`NO`] for the rest, their own call: most slices).
    call: RowIds,
}

impl FoldedCalls {
    fn new(cx: &Context) -> FoldedCalls {
        let n = cx.t.cpu.len();
        // Per CPU slice: its direct children in the op tree, saturating at 2.
        let mut children = vec![0u8; n];
        for i in 0..n {
            let p = cx.links.parent.get(i);
            if p != NO {
                let c = &mut children[p as usize];
                *c = c.saturating_add(1).min(2);
            }
        }
        let name = cx.t.cpu.name();
        // The parent `i` folds into, if it does.
        let folds = |i: usize| {
            let p = cx.links.parent.get(i);
            (p != NO && children[p as usize] == 1 && name[p as usize] == name[i])
                .then_some(p as usize)
        };
        let mut call = RowIds::new(n);
        let mut path = Vec::new();
        for i in 0..n {
            crate::cancel::point(i);
            if call.get(i) != NO || folds(i).is_none() {
                continue;
            }
            let mut j = i;
            let resolved = loop {
                if call.get(j) != NO {
                    break call.get(j);
                }
                match folds(j) {
                    Some(p) => {
                        path.push(j);
                        j = p;
                    }
                    None => break j as u32,
                }
            };
            for k in path.drain(..) {
                call.set(k, resolved);
            }
        }
        FoldedCalls { call }
    }

    /// The slice whose call slice `i` is: `i`, or the outermost of the
    /// same-named single-child parents it is folded into.
    fn call_of(&self, i: usize) -> usize {
        match self.call.get(i) {
            NO => i,
            c => c as usize,
        }
    }
}

/// Adds up every CPU slice into its name's and its signature's sums.
fn accumulate(cx: &Context, sums: &OpSums, chains: &mut Chains) -> Accumulated {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut seen = vec![false; t.names.len()];
    let mut distinct = 0;
    for i in 0..cpu.len() {
        if cpu.kind()[i] != CpuKind::Module && !seen[cpu.name()[i] as usize] {
            seen[cpu.name()[i] as usize] = true;
            distinct += 1;
        }
    }
    if distinct <= super::MAX_TABLE_ROWS {
        return accumulate_for(cx, sums, chains, |_| true);
    }
    // More names than the table lists: the names' sums first, then the
    // shape groups of the names listed only (a group each of a million
    // names held hundreds of MB).
    let names = accumulate_for(cx, sums, chains, |_| false);
    let (listed, _) = listed_rows(&names.by_name);
    let mut keep = vec![false; t.names.len()];
    for sym in listed {
        keep[sym as usize] = true;
    }
    accumulate_for(cx, sums, chains, |sym| keep[sym as usize])
}

/// The rows' sums: the table's, and what it leaves out
/// ([`super::listed_rows`]).
fn listed_rows(by_name: &[OpAcc]) -> (Vec<Sym>, Option<(usize, f64)>) {
    super::listed_rows(
        by_name
            .iter()
            .enumerate()
            .filter(|(_, a)| a.seen)
            .map(|(sym, a)| {
                (
                    sym as Sym,
                    (a.self_dev, a.self_cpu, a.calls),
                    a.self_cpu as f64,
                )
            })
            .collect(),
    )
}

/// [`accumulate`], with the shape groups of the names `grouped` says.
fn accumulate_for(
    cx: &Context,
    sums: &OpSums,
    chains: &mut Chains,
    grouped: impl Fn(Sym) -> bool,
) -> Accumulated {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut acc: Vec<OpAcc> = Vec::new();
    acc.resize_with(t.names.len(), OpAcc::default);
    let mut groups: HashMap<(Sym, Sym, Sym), GroupAcc> = HashMap::new();
    // GPU ops each op name launched directly (graph replays have rows of
    // their own).
    for g in 0..t.gpu.len() {
        crate::cancel::point(g);
        let op = cx.links.op.get(g);
        if op != NO && !cx.links.graph[g] && cpu.kind()[op as usize] != CpuKind::Module {
            acc[cpu.name()[op as usize] as usize].gpu_ops += 1;
        }
    }
    let have_steps = !cx.steps.is_empty();
    let mut step = StepCursor::new(&cx.steps);
    let folded = FoldedCalls::new(cx);
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        let kind = cpu.kind()[i];
        if kind == CpuKind::Module {
            continue;
        }
        // torch's rule: a call whose parent has its name and no other
        // child is the parent's (one call, its time the parent's self time).
        let call = folded.call_of(i);
        let whole = call == i;
        let a = &mut acc[cpu.name()[i] as usize];
        a.seen = true;
        a.kind = Some(a.kind.map_or(kind, |k| k.min(kind)));
        let self_cpu = (cpu.dur().get(i) - sums.child_ns.get(i)).max(0);
        a.self_cpu += self_cpu;
        a.self_dev += sums.self_dev.get(i);
        // Device totals stay a sum over every slice of the name, as the
        // independent reference checks them (tests/it/expected.rs).
        a.total_dev += sums.total_dev.get(i);
        let step_of = if have_steps {
            step.at(cpu.ts().get(i))
        } else {
            None
        };
        let in_step = step_of.is_some();
        if whole {
            a.calls += 1;
            a.cpu_total += cpu.dur().get(i);
            if in_step {
                a.calls_in_steps += 1;
            }
        }
        let (shapes, dtypes) = (cpu.shapes(call), cpu.dtypes(call));
        if (shapes != 0 || dtypes != 0) && grouped(cpu.name()[i]) {
            let gacc = groups.entry((cpu.name()[i], shapes, dtypes)).or_default();
            if whole {
                gacc.calls += 1;
                gacc.calls_in_steps += in_step as u64;
                // Slices come in time order, so a step's calls are together.
                if let Some(k) = step_of {
                    if gacc.last_step != k as u32 + 1 {
                        gacc.last_step = k as u32 + 1;
                        gacc.steps_seen += 1;
                    }
                }
            }
            gacc.self_cpu += self_cpu;
            gacc.self_dev += sums.self_dev.get(i);
            let parent = cx.links.parent.get(call);
            let chain = if parent == NO {
                0
            } else {
                chains.of(cx, parent)
            };
            let e = gacc
                .parents
                .entry((chain, cx.py_stack_of_op(i)))
                .or_default();
            e.0 += sums.self_dev.get(i);
            e.1 += 1;
        }
    }
    Accumulated {
        by_name: acc,
        groups,
    }
}

/// Each op name's shape groups, with bytes and rate for copy-like ops.
fn shape_groups(
    cx: &Context,
    chains: &Chains,
    groups: HashMap<(Sym, Sym, Sym), GroupAcc>,
) -> HashMap<Sym, Vec<(ShapeGroup, u32)>> {
    let t = cx.t;
    let total_gpu = us(cx.gpu_op_ns);
    // Shape groups per op name, with bytes for copy-like ops.
    let mut by_op: HashMap<Sym, Vec<(ShapeGroup, u32)>> = HashMap::new();
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
        by_op.entry(name).or_default().push((
            ShapeGroup {
                shapes: t.name(shapes).to_string(),
                dtypes: t.name(dtypes).to_string(),
                calls: g.calls,
                self_cpu_us: us(g.self_cpu),
                self_device_us: self_dev_us,
                bytes_per_call: bytes.map(|b| b as f64),
                achieved_gbps: bytes
                    .filter(|_| g.self_dev > 0)
                    .map(|b| b as f64 * g.calls as f64 / self_dev_us / 1e3),
                calls_per_step: cx.per_step(g.calls_in_steps),
                device_pct: pct(self_dev_us, total_gpu),
                conversion: shapes::conversion(op, t.name(dtypes))
                    .map(|(from, to)| format!("{from} -> {to}")),
                parents,
                python,
                ..Default::default()
            },
            g.steps_seen,
        ));
    }
    by_op
}

/// Marks the copies and casts of a whole tensor that the steps use a
/// growing part of ([`PartlyUsed`]): a signature called in every step, at
/// least twice a step (once per layer, say), whose tensor has the layout of
/// a tensor that grows from step to step elsewhere in the trace (the same
/// trailing dimensions) with far more rows than the growing one ever has.
/// The founding story's cast of the whole KV pool in every layer, while
/// attention reads the step's few hundred keys, is the case; a cast that
/// follows the sequence (gather, then cast) grows itself and is not.
fn partly_used(by_op: &mut HashMap<Sym, Vec<(ShapeGroup, u32)>>, cx: &Context) {
    let steps = cx.steps.len() as u32;
    if steps < MIN_GROWING_STEPS {
        return;
    }
    loop_invariant(by_op, cx, steps);
    let t = cx.t;
    // Growing layouts: per (op, input, dim, the other dims), the lengths
    // that dim takes.
    let mut lengths: HashMap<(Sym, usize, usize, Vec<u64>), Vec<u64>> = HashMap::new();
    for (&op, groups) in by_op.iter() {
        if groups.len() < MIN_GROWING_STEPS as usize {
            continue;
        }
        for (g, _) in groups {
            for (j, dims) in shapes::dims(&g.shapes).into_iter().enumerate() {
                for d in 0..dims.len() {
                    let mut rest = dims.clone();
                    let len = rest.remove(d);
                    let key = (op, j, d, rest);
                    let seen = lengths.entry(key).or_default();
                    if !seen.contains(&len) {
                        seen.push(len);
                    }
                }
            }
        }
    }
    // (trailing dims after the growing one, most rows, op, its largest shape)
    let growing: Vec<(Vec<u64>, u64, Sym, Vec<u64>)> = lengths
        .into_iter()
        .filter(|(_, lens)| lens.len() >= MIN_GROWING_STEPS as usize)
        .filter_map(|((op, _, d, rest), lens)| {
            let tail = rest[d..].to_vec();
            let most = *lens.iter().max()?;
            let mut shape = rest.clone();
            shape.insert(d, most);
            (!tail.is_empty()).then_some((tail, most, op, shape))
        })
        .collect();
    if growing.is_empty() {
        return;
    }
    for (&op, groups) in by_op.iter_mut() {
        if !shapes::is_copy_like(t.name(op)) {
            continue;
        }
        for (g, steps_seen) in groups.iter_mut() {
            let every_step = *steps_seen >= steps
                && g.calls_per_step
                    .is_some_and(|c| c >= 2.0 && c.fract() == 0.0);
            if !every_step {
                continue;
            }
            let Some(dims) = shapes::dims(&g.shapes).into_iter().next() else {
                continue;
            };
            let best = growing
                .iter()
                .filter(|(tail, most, _, _)| {
                    dims.len() > tail.len()
                        && dims.ends_with(tail)
                        && dims[dims.len() - tail.len() - 1] >= PARTLY_USED_RATIO * most
                })
                .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)));
            if let Some((tail, most, seen_in, shape)) = best {
                let dim = dims.len() - tail.len() - 1;
                g.partly_used = Some(PartlyUsed {
                    dim: dim as u32,
                    rows: dims[dim],
                    used_rows: *most,
                    seen_in: t.name(*seen_in).to_string(),
                    seen_shape: format!("{shape:?}"),
                });
            }
        }
    }
}

/// The least bytes a call of a repeated copy or cast moves for it to be
/// named loop-invariant work: 1 MiB, far below the story's 857 MB pool
/// cast, the H200 captures' 101 MB and the shared CPU capture's 31 MB
/// (`[2, 20000, 4, 64]`), far above the scalar conversions a step makes by
/// the dozen (`float -> BFloat16 [[8], [8], []]`, 48 bytes), which are no
/// work worth a sentence.
const LOOP_INVARIANT_MIN_BYTES: f64 = (1 << 20) as f64;

/// Marks the copies and casts of the same tensor (one shape and dtypes)
/// made a whole number of times, at least twice, in every step: work a
/// loop repeats on an input the loop does not change.
fn loop_invariant(by_op: &mut HashMap<Sym, Vec<(ShapeGroup, u32)>>, cx: &Context, steps: u32) {
    for (&op, groups) in by_op.iter_mut() {
        if !shapes::is_copy_like(cx.t.name(op)) {
            continue;
        }
        for (g, steps_seen) in groups.iter_mut() {
            g.loop_invariant = *steps_seen >= steps
                && g.calls_per_step
                    .is_some_and(|c| c >= 2.0 && c.fract() == 0.0)
                && g.bytes_per_call
                    .is_some_and(|b| b >= LOOP_INVARIANT_MIN_BYTES);
        }
    }
}

/// Steps (and distinct lengths) that make a layout "growing".
const MIN_GROWING_STEPS: u32 = 3;
/// How many times the steps' most rows a tensor holds to be "whole".
const PARTLY_USED_RATIO: u64 = 2;

/// One op name's row, from its sums and its shape groups.
fn row(cx: &Context, sym: Sym, a: &OpAcc, groups: Vec<(ShapeGroup, u32)>) -> OpRow {
    let mut groups: Vec<ShapeGroup> = groups.into_iter().map(|(g, _)| g).collect();
    let t = cx.t;
    let basis = cx.basis;
    // By the time the trace has (device time, or self CPU time on a trace
    // without GPU ops), then calls.
    let time = |g: &ShapeGroup| basis.pick(g.self_device_us, g.self_cpu_us);
    groups.sort_by(|x, y| {
        time(y)
            .total_cmp(&time(x))
            .then(y.calls.cmp(&x.calls))
            .then(x.shapes.cmp(&y.shapes))
            .then(x.dtypes.cmp(&y.dtypes))
    });
    // Bytes and rate of the signature that carries the op's time, not an
    // average over unlike calls.
    let top = groups.first();
    let (bytes_per_call, achieved_gbps) = (
        top.and_then(|g| g.bytes_per_call),
        top.and_then(|g| g.achieved_gbps),
    );
    groups.truncate(MAX_SHAPE_GROUPS);
    let self_dev = us(a.self_dev);
    OpRow {
        name: t.name(sym).to_string(),
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
        device_pct: pct(self_dev, us(cx.gpu_op_ns)),
        gpu_ops: a.gpu_ops,
        calls_per_step: cx.per_step(a.calls_in_steps),
        input_shapes: groups,
        bytes_per_call,
        achieved_gbps,
    }
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
    // One row per row name: the contexts whose names fold alike (the same
    // graph replayed under `ProfilerStep#1` … `#6`) are one row, as torch
    // prints them (`ProfilerStep#*`).
    let mut row_of: HashMap<Sym, usize> = HashMap::new();
    let mut row_named: HashMap<String, usize> = HashMap::new();
    let mut rows: Vec<(String, Acc)> = Vec::new();
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        let ctx = cx.replay.get(g);
        if ctx == NO {
            continue;
        }
        let k = *row_of.entry(ctx).or_insert_with(|| {
            // By name, not by a search of the rows: a trace of many
            // contexts would make that quadratic.
            let name = replay_row_name(t.name(ctx));
            *row_named.entry(name.clone()).or_insert_with(|| {
                rows.push((name, Acc::default()));
                rows.len() - 1
            })
        });
        let a = &mut rows[k].1;
        a.dev += gpu.dur().get(g);
        a.gpu_ops += 1;
        let r = cx.links.launch.get(g);
        if a.launches.insert(r) {
            a.launch_ns += cpu.dur().get(r as usize);
            if cx.gpu_step.get(g) != NO {
                a.launches_in_steps += 1;
            }
        }
    }
    let total_gpu = us(cx.gpu_op_ns);
    rows.into_iter()
        .map(|(name, a)| OpRow {
            name,
            kind: OpKind::Graph,
            calls: a.launches.len() as u64,
            self_cpu_us: us(a.launch_ns),
            cpu_total_us: us(a.launch_ns),
            self_device_us: us(a.dev),
            device_total_us: us(a.dev),
            device_pct: pct(us(a.dev), total_gpu),
            gpu_ops: a.gpu_ops,
            calls_per_step: cx.per_step(a.launches_in_steps),
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
