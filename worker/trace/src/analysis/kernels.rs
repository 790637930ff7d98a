//! The kernel table: one row per GPU op name (kernels, memcpys, memsets)
//! with its launch geometries, the ops and chains that launched it, the
//! Python stack that issued most of its time, and bytes moved.

use super::chains::Chains;
use super::links::NO;
use super::{names, pct, shapes, us, Context, MAX_CHAINS, MAX_KERNEL_GROUPS};
use crate::import::store::{GpuKind, Sym};
use hashbrown::HashMap;
use kinetoscope_types::{GpuOpKind, KernelGroup, KernelRow, LaunchChain};

/// The kernel table, by total device time.
pub(crate) struct Table {
    pub rows: Vec<KernelRow>,
    /// The words of the trace's note on the GPU ops the table leaves out
    /// ([`super::MAX_TABLE_ROWS`]).
    pub note: Option<String>,
    /// Their device time, ns: the GPU-op total is the rows' and this.
    pub left_out_ns: f64,
    /// Their kernel calls, and those of names that run small on average
    /// ([`super::findings::is_small_kernel`]).
    pub left_out_kernel_calls: (u64, u64),
}

/// The kernel table, by total device time.
pub(crate) fn table(cx: &Context, chains: &mut Chains) -> Table {
    let mut acc = accumulate(cx, chains);
    let (listed, cut) = super::listed_rows(
        acc.iter()
            .map(|(&sym, a)| (sym, (a.total, a.calls), a.total as f64))
            .collect(),
    );
    let left_out_ns = cut.map_or(0.0, |(_, ns)| ns);
    let note = cut.map(|(n, ns)| {
        format!(
            "the kernel table lists the {} GPU op names with the most time; {n} more, {:.1}% of GPU op time, are left out",
            super::MAX_TABLE_ROWS,
            pct(ns, cx.gpu_op_ns as f64),
        )
    });
    let mut rows: Vec<KernelRow> = listed
        .into_iter()
        .filter_map(|sym| acc.remove(&sym).map(|a| (sym, a)))
        .map(|(sym, a)| row(cx, chains, sym, a))
        .collect();
    // What is left in `acc` is what the table leaves out.
    let left_out_kernel_calls = acc
        .values()
        .filter(|a| a.kind == GpuKind::Kernel && a.calls > 0)
        .fold((0, 0), |(all, small), a| {
            let avg_us = us(a.total) / a.calls as f64;
            (
                all + a.calls,
                small + u64::from(super::findings::is_small_kernel(avg_us)) * a.calls,
            )
        });
    drop(acc);
    rows.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then(a.name.cmp(&b.name)));
    // One short name per row: kernels whose short names agree gain what
    // tells them apart (memcpys and memsets keep their names).
    let full: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let distinct = names::distinct_short_names(&full);
    for (r, short) in rows.iter_mut().zip(distinct) {
        if r.kind == GpuOpKind::Kernel {
            r.short_name = short;
        }
    }
    Table {
        rows,
        note,
        left_out_ns,
        left_out_kernel_calls,
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
    /// (op chain, launch name, the CUDA-graph kernel annotation or 0) ->
    /// its calls.
    chains: HashMap<(u32, Sym, Sym), ChainAcc>,
}

/// Calls of one launch chain: (calls, ns, Python stack -> ns).
type ChainAcc = (u64, i64, HashMap<u32, i64>);

/// Adds up every GPU op into its name's, geometry's and chain's sums.
fn accumulate(cx: &Context, chains: &mut Chains) -> HashMap<Sym, KernelAcc> {
    let t = cx.t;
    let gpu = &t.gpu;
    let cpu = &t.cpu;
    let mut acc: HashMap<Sym, KernelAcc> = HashMap::new();
    // The graph kernels' annotations (torch's `mark_kernels`), by row: what
    // a replay's kernel was recorded under, the attribution inside a graph.
    let annotations = gpu.annotations();
    let mut next = 0;
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        let kind = gpu.kind()[g];
        if !kind.is_gpu_op() {
            continue;
        }
        while next < annotations.len() && (annotations[next].0 as usize) < g {
            next += 1;
        }
        let annotation = match annotations.get(next) {
            Some(&(row, name)) if row as usize == g => name,
            _ => 0,
        };
        let d = gpu.dur().get(g);
        let a = acc.entry(gpu.name()[g]).or_insert_with(|| KernelAcc {
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
        let in_step = cx.gpu_step.get(g) != NO;
        a.calls += 1;
        a.total += d;
        a.min = a.min.min(d);
        a.max = a.max.max(d);
        a.bytes += gpu.bytes().get(g) as u64;
        a.calls_in_steps += in_step as u64;
        let grp = a.groups.entry((gpu.grid(g), gpu.block(g))).or_default();
        grp.calls += 1;
        grp.calls_in_steps += in_step as u64;
        grp.total += d;
        grp.bytes += gpu.bytes().get(g) as u64;
        let op = cx.links.op.get(g);
        if op != NO && !cx.links.graph[g] {
            let o = op as usize;
            *grp.ops
                .entry((cpu.name()[o], cpu.shapes(o), cpu.dtypes(o)))
                .or_default() += d;
        }
        let r = cx.links.launch.get(g);
        if r != NO {
            let chain = if op == NO { 0 } else { chains.of(cx, op) };
            let py = cx.py_stack_of_gpu(g);
            let e = a
                .chains
                .entry((chain, cpu.name()[r as usize], annotation))
                .or_default();
            e.0 += 1;
            e.1 += d;
            if py != 0 {
                *e.2.entry(py).or_default() += d;
            }
        }
    }
    acc
}

/// One GPU op name's row.
fn row(cx: &Context, chains: &Chains, sym: Sym, a: KernelAcc) -> KernelRow {
    let t = cx.t;
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
        .map(
            |(&(chain, launch, annotation), (calls, ns, stacks))| LaunchChain {
                chain: {
                    let mut names = chains.names(t, chain);
                    if annotation != 0 {
                        names.push(format!("in graph: {}", t.name(annotation)));
                    }
                    names
                },
                launch: t.name(launch).to_string(),
                calls: *calls,
                total_us: us(*ns),
                // The Python stack that issued most of this chain's time.
                python: stacks
                    .iter()
                    .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
                    .map(|(&py, _)| cx.py_names(py))
                    .unwrap_or_default(),
            },
        )
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
        .map(|(&geometry, k)| group(cx, geometry, k))
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
        category: names::category(kind, &name),
        kind,
        calls: a.calls,
        total_us: total,
        avg_us: total / a.calls as f64,
        min_us: us(a.min),
        max_us: us(a.max),
        pct: pct(total, us(cx.gpu_op_ns)),
        grid: geometry.map(|g| g.0),
        block: geometry.map(|g| g.1),
        bytes_per_call: (a.bytes > 0).then(|| a.bytes as f64 / a.calls as f64),
        calls_per_step: cx.per_step(a.calls_in_steps),
        launched_by,
        groups,
        name,
    }
}

/// One launch geometry's group of a kernel row: the op signature that
/// launched most of its time, and the bytes and rate of its calls.
fn group(cx: &Context, (grid, block): ([u32; 3], [u32; 3]), k: &KernelGroupAcc) -> KernelGroup {
    let t = cx.t;
    let has_geometry = (grid, block) != ([0; 3], [0; 3]);
    let top = k
        .ops
        .iter()
        .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
        .map(|(&sig, _)| sig);
    let op_name = top.map(|(o, _, _)| t.name(o));
    let copy = top.and_then(|(o, s, d)| shapes::copy_bytes(t.name(o), t.name(s), t.name(d)));
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
        calls_per_step: cx.per_step(k.calls_in_steps),
        total_us: total,
        avg_us: avg,
        pct: pct(total, us(cx.gpu_op_ns)),
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
        ..Default::default()
    }
}
