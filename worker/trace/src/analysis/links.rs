//! Correlation: the op tree on each CPU thread, each GPU op's launch, and the
//! op that issued each launch.
//!
//! - Op nesting is by time on the same `(pid, tid)`: Kineto writes no parent
//!   ids for `cpu_op`/`user_annotation`. Slices are ordered by start, longer
//!   first, ops before runtime calls at equal spans; a slice is inside the
//!   innermost open op whose span contains its start. Partial overlaps (a
//!   child outliving its parent by rounding) are tolerated: the child stays a
//!   child and its time counts only up to the parent's end.
//! - GPU op -> launch: the runtime call with the same `args.correlation`;
//!   when a GPU op has no correlation, the launch flow (`ac2g` and its older
//!   names) ending at the GPU op leads to the runtime call where it starts.
//! - Launch -> op: the innermost op around the launch on its thread. In
//!   traces whose runtime calls carry the launching op's `External id`
//!   (2020-21 and 2024+ files), that id decides when time nesting is
//!   ambiguous (integer-µs timestamps). In 2022-23 files `External id` merely
//!   repeats the correlation and is never used: joining on it matches
//!   unrelated ops by numeric coincidence.

use crate::import::store::{sort_by_start, CpuKind, IntColumn, LaunchIds, Tables, Trace, NONE};
use hashbrown::HashMap;
use kinetoscope_types::{Attribution, ExternalIdRegime};

/// "No index" in the link vectors.
pub const NO: u32 = u32::MAX;

/// Per row, an id or [`NO`], where most rows stay [`NO`]: kept as the id
/// plus one in zeroed memory, whose pages the system maps only once a row
/// on them is set. A `vec![NO; n]` writes every page: 4 resident bytes a
/// CPU slice for a memo that a trace of CPU ops alone never sets (the
/// launch chains', the folded calls', the runtime calls' launchers; 12 of
/// the 44 bytes an event of `few3m` in BENCHMARKS.md). A GPU op's launch,
/// its op, its replay context and its step are kept so too: a trace of GPU
/// ops alone (`activities=[CUDA]`) sets none of them, and a trace without
/// graphs no replay context (16 bytes a GPU op of the `gpu` shape's 38).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowIds {
    rows: Vec<u32>,
}

impl RowIds {
    /// `n` rows, all [`NO`].
    pub fn new(n: usize) -> RowIds {
        RowIds { rows: vec![0; n] }
    }

    /// Row `i`'s id, or [`NO`].
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        self.rows[i].wrapping_sub(1)
    }

    /// Sets row `i` to `id` ([`NO`] unsets it).
    #[inline]
    pub fn set(&mut self, i: usize, id: u32) {
        self.rows[i] = id.wrapping_add(1);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every row's id in row order, [`NO`] where unset.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.rows.iter().map(|r| r.wrapping_sub(1))
    }

    /// Every row's id, [`NO`] where unset (tests).
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }
}

/// [`RowIds`] for a memo, whose rows are read before they are set: each
/// page is written before its first read. A zeroed page is mapped on its
/// first read as the shared zero page, and the write after it then costs a
/// second fault and a TLB flush on each core the process runs on (an
/// interrupt to the other thread): `Chains::of` took 7 ms more of real9's
/// op and kernel tables that way (48-53 ms against 41-45; perf and
/// `KINETOSCOPE_PHASES=1`, BENCHMARKS.md, sixteenth session). Pages never
/// read stay unmapped (writing every page up front added about 5 MB to the
/// CLI's peak on `shapes.py`'s `manysteps`).
pub struct MemoIds {
    rows: Vec<u32>,
    /// Per page of rows, whether it was written (or read) yet.
    touched: Vec<bool>,
}

impl MemoIds {
    /// Rows a page holds (4 KiB of `u32`s).
    const PAGE: usize = 1024;

    /// `n` rows, all [`NO`].
    pub fn new(n: usize) -> MemoIds {
        MemoIds {
            rows: vec![0; n],
            touched: vec![false; n.div_ceil(Self::PAGE)],
        }
    }

    /// Row `i`'s id, or [`NO`].
    #[inline]
    pub fn get(&mut self, i: usize) -> u32 {
        self.touch(i);
        self.rows[i].wrapping_sub(1)
    }

    /// Sets row `i` to `id`.
    #[inline]
    pub fn set(&mut self, i: usize, id: u32) {
        self.touch(i);
        self.rows[i] = id.wrapping_add(1);
    }

    #[inline(always)]
    fn touch(&mut self, i: usize) {
        let page = i / Self::PAGE;
        if !self.touched[page] {
            self.touched[page] = true;
            // Untouched, so still zero: a write of a value the compiler
            // cannot see is 0 maps a page as the process's own. The rows'
            // 4 KiB lie across two of the system's pages (the list is not
            // page-aligned): its first row and its last.
            let (first, last) = (
                page * Self::PAGE,
                ((page + 1) * Self::PAGE).min(self.rows.len()) - 1,
            );
            self.rows[first] = std::hint::black_box(0);
            self.rows[last] = std::hint::black_box(0);
        }
    }
}

/// The deepest an op slice nests in the op tree: a slice that would open
/// deeper is a leaf of the slice at this depth (its own children become
/// that slice's). Every walk up the tree (launch owners, chains, folded
/// calls, layer markers) is then bounded by it, however an upload nests: a
/// "staircase" of partly overlapping ops nests as deep as it is long, and
/// made those walks quadratic (RELIABILITY.md). Real traces nest ops,
/// annotations and runtime calls at most 12 deep (the 8-rank DLRM and the
/// CUDA-graph traces of `../shared/traces`, counted by
/// `tests/it/shared_traces.rs::op_trees_stay_within_their_depth`), so 128
/// is ten times that and changes no real trace.
pub const MAX_OP_DEPTH: usize = 128;

/// The links the analysis is built on.
pub struct Links {
    /// Per CPU slice: the innermost enclosing op or annotation, or [`NO`].
    pub parent: RowIds,
    /// Per CPU slice: time of its direct children (clamped to its span), ns.
    pub child_ns: IntColumn,
    /// Per track (by id; empty for GPU streams): its CPU slices, module
    /// frames aside, in start order, longer first among equal starts, then
    /// annotations, ops, calls. The timeline lays threads out from these.
    pub by_thread: Vec<Vec<u32>>,
    /// Per GPU slice: the runtime call that launched it, or [`NO`].
    pub launch: RowIds,
    /// Per GPU slice: the op that issued the launch, or [`NO`].
    pub op: RowIds,
    /// Per GPU slice: whether a graph launch (replay) ran it.
    pub graph: Vec<bool>,
    /// Attribution.
    pub attribution: Attribution,
}

/// Builds the op tree and the GPU-op links.
pub fn link(t: &Trace) -> Links {
    let ids = t.ids();
    Launches::find(t, ids).link(t, Some(ids.cpu_external_id()))
}

/// Each GPU op's launch, found by the ids that link them: the first half of
/// [`link`]. Once found, nothing reads the correlations or the flows again,
/// nor `External id` unless [`Launches::needs_external_id`] says so: a caller
/// that owns the trace drops the [`LaunchIds`] (keeping `External id` only
/// then) before the op tree's links are made.
pub struct Launches {
    /// Per GPU slice: the runtime call that launched it, or [`NO`].
    launch: RowIds,
    /// Whether `External id` on runtime calls names their op.
    names_op: bool,
    attribution: Attribution,
}

impl Launches {
    /// Finds each GPU op's launch.
    pub fn find(t: &Tables, ids: &LaunchIds) -> Launches {
        let mut attribution = Attribution::default();
        let names_op = external_id_names_op(t, ids, &mut attribution);
        let launch = gpu_launches(t, ids, &mut attribution);
        Launches {
            launch,
            names_op,
            attribution,
        }
    }

    /// Whether [`link`](Self::link) reads `External id`.
    pub fn needs_external_id(&self) -> bool {
        self.names_op
    }

    /// Builds the op tree and the rest of the links.
    pub fn link(self, t: &Tables, external_id: Option<&IntColumn>) -> Links {
        self.link_tree(t, external_id, OpTree::build(t))
    }

    /// The rest of the links, over an op tree already built (it needs no
    /// ids, so it can be built while the launches are found). `External id`
    /// is read only where [`needs_external_id`](Self::needs_external_id);
    /// `None` there is a bug.
    pub fn link_tree(self, t: &Tables, external_id: Option<&IntColumn>, tree: OpTree) -> Links {
        let Launches {
            launch,
            names_op,
            mut attribution,
        } = self;
        let OpTree {
            parent,
            child_ns,
            by_thread,
        } = tree;
        let external_id = external_id.filter(|_| names_op);
        assert!(
            external_id.is_some() || !names_op,
            "the links need External id and it was dropped"
        );
        let launcher = launching_ops(t, &parent, external_id);
        let (op, graph) = gpu_ops(t, &launch, &launcher, &mut attribution);
        Links {
            parent,
            child_ns,
            by_thread,
            launch,
            op,
            graph,
            attribution,
        }
    }
}

impl Links {
    /// Op and annotation slices, parents before their children: each
    /// thread's in start order (a parent is on its child's thread, and
    /// starts first). Read from `by_thread` rather than kept beside it,
    /// 4 bytes an op less at the analysis's peak.
    pub fn preorder<'a>(&'a self, t: &'a Tables) -> impl DoubleEndedIterator<Item = u32> + 'a {
        self.by_thread
            .iter()
            .flat_map(|v| v.iter().copied())
            .filter(move |&i| t.cpu.kind()[i as usize].is_op())
    }
}

/// The op tree: the links that need only the CPU slices' times and kinds.
pub struct OpTree {
    parent: RowIds,
    child_ns: IntColumn,
    by_thread: Vec<Vec<u32>>,
}

impl OpTree {
    /// Builds the op tree of a trace: per CPU slice its parent, per slice
    /// its children's time, and each thread's slices in start order.
    pub fn build(t: &Tables) -> OpTree {
        let cpu = &t.cpu;
        let n = cpu.len();
        // Zeroed: a trace of top-level ops alone sets no row of it.
        let mut parent = RowIds::new(n);
        let mut child_ns = IntColumn::zeros(n);

        // Bucket slices by thread; module frames are not part of the op tree.
        // Each thread's list is made at its size: grown by pushes, a list
        // is copied as it doubles (4 bytes a slice, twice, at the peak).
        let mut sizes = vec![0usize; t.tracks.len()];
        for i in 0..n {
            if cpu.kind()[i] != CpuKind::Module {
                sizes[cpu.track().get(i) as usize] += 1;
            }
        }
        let mut by_thread: Vec<Vec<u32>> = sizes.into_iter().map(Vec::with_capacity).collect();
        for i in 0..n {
            crate::cancel::point(i);
            if cpu.kind()[i] != CpuKind::Module {
                by_thread[cpu.track().get(i) as usize].push(i as u32);
            }
        }
        // Python frames per thread, by start, longer first: they are not in
        // the op tree, but, as in torch's own event tree, a frame directly
        // inside an op is one of its children (its time is not the op's
        // self time) and an op inside a frame is not its enclosing op's
        // direct child.
        let py = &t.python;
        let mut py_by_thread: Vec<Vec<u32>> = vec![Vec::new(); t.tracks.len()];
        for f in 0..py.len() {
            if let Some(v) = py_by_thread.get_mut(py.track()[f] as usize) {
                v.push(f as u32);
            }
        }
        // The walk's stack: a slice or a frame, and the innermost op slice
        // at or below it (what a new slice's parent is).
        let mut stack: Vec<(Open, u32)> = Vec::new();
        for (slices, frames) in by_thread.iter_mut().zip(py_by_thread.iter_mut()) {
            // Stable sort: Kineto writes parents before children, so equal keys
            // keep file order. Nearly sorted input makes this cheap.
            // Among equal starts and durations: annotations before ops before
            // calls.
            let rank = |i: u32| match cpu.kind()[i as usize] {
                CpuKind::Annotation => 0u8,
                CpuKind::Op => 1,
                _ => 2,
            };
            sort_by_start(slices, cpu.ts(), cpu.dur(), |a, b| rank(a).cmp(&rank(b)));
            if !frames.is_empty() {
                sort_by_start(frames, py.ts(), py.dur(), |_, _| std::cmp::Ordering::Equal);
            }
            stack.clear();
            // Op slices on the stack.
            let mut depth = 0usize;
            let mut next_frame = 0usize;
            for &c in slices.iter() {
                let ci = c as usize;
                let ts = cpu.ts().get(ci);
                // Frames that start before this slice (or with it and last
                // longer) come first.
                while let Some(&f) = frames.get(next_frame) {
                    let (fts, fdur) = (py.ts().get(f as usize), py.dur().get(f as usize));
                    if fts > ts || (fts == ts && fdur <= cpu.dur().get(ci)) {
                        break;
                    }
                    next_frame += 1;
                    pop_outside(&mut stack, &mut depth, cpu, py, fts);
                    pop_outlasted(&mut stack, &mut depth, cpu, py, fts + fdur);
                    let op_below = stack.last().map_or(NO, |&(_, op)| op);
                    if let Some(&(Open::Slice(top), _)) = stack.last() {
                        child_ns.add(top as usize, fdur.max(0));
                    }
                    stack.push((Open::Frame(f), op_below));
                }
                pop_outside(&mut stack, &mut depth, cpu, py, ts);
                if let Some(&(open, op)) = stack.last() {
                    parent.set(ci, op);
                    if let Open::Slice(top) = open {
                        let ti = top as usize;
                        let end =
                            (ts + cpu.dur().get(ci)).min(cpu.ts().get(ti) + cpu.dur().get(ti));
                        child_ns.add(ti, (end - ts).max(0));
                    }
                }
                if cpu.kind()[ci].is_op() && depth < MAX_OP_DEPTH {
                    depth += 1;
                    stack.push((Open::Slice(c), c));
                }
            }
        }

        overhead_in_calls(t, &by_thread, &mut child_ns);
        OpTree {
            parent,
            child_ns,
            by_thread,
        }
    }
}

/// Kineto's `overhead` events sit on a track of their own, but torch's
/// event tree (and so `key_averages`) has each inside the runtime call
/// around it in time: a `cudaLaunchKernel` that blocked on a full launch
/// queue holds a `Command Buffer Full` of nearly its whole length, which is
/// not the call's self time (885 ms of self CPU against torch's 55 ms on
/// the H200 stack-and-memory capture, `tests/it/expected.rs`). Each such
/// event's time is its enclosing call's children's time; with several
/// calls around it (threads), the innermost, latest-starting one.
fn overhead_in_calls(t: &Tables, by_thread: &[Vec<u32>], child_ns: &mut IntColumn) {
    let cpu = &t.cpu;
    let overhead: Vec<u32> = (0..cpu.len() as u32)
        .filter(|&i| cpu.kind()[i as usize] == CpuKind::Overhead)
        .collect();
    if overhead.is_empty() {
        return;
    }
    // Every runtime call, by start (each thread's list is in start order).
    let mut calls: Vec<u32> = by_thread
        .iter()
        .flatten()
        .copied()
        .filter(|&i| cpu.kind()[i as usize].is_runtime())
        .collect();
    calls.sort_by_key(|&i| (cpu.ts().get(i as usize), i));
    // The longest call, so a search back from a start can stop once no
    // earlier call could still be open.
    let longest = calls
        .iter()
        .map(|&i| cpu.dur().get(i as usize))
        .max()
        .unwrap_or(0);
    for (n, &o) in overhead.iter().enumerate() {
        crate::cancel::point(n);
        let (ts, end) = (
            cpu.ts().get(o as usize),
            cpu.ts().get(o as usize) + cpu.dur().get(o as usize),
        );
        let k = calls.partition_point(|&c| cpu.ts().get(c as usize) <= ts);
        let found = calls[..k]
            .iter()
            .rev()
            .take_while(|&&c| cpu.ts().get(c as usize) + longest >= ts)
            .take(64)
            .find(|&&c| cpu.ts().get(c as usize) + cpu.dur().get(c as usize) >= end);
        if let Some(&c) = found {
            child_ns.add(c as usize, end - ts);
        }
    }
}

/// What is open on a thread's walk: an op or annotation slice, or a Python
/// frame.
#[derive(Clone, Copy)]
enum Open {
    Slice(u32),
    Frame(u32),
}

/// Pops what ended before `ts` (a zero-length slice or frame holds what
/// starts with it).
fn pop_outside(
    stack: &mut Vec<(Open, u32)>,
    depth: &mut usize,
    cpu: &crate::import::store::CpuTable,
    py: &crate::import::store::PythonTable,
    ts: i64,
) {
    pop_while(stack, depth, |open| {
        let top_ts = match open {
            Open::Slice(s) => cpu.ts().get(s as usize),
            Open::Frame(f) => py.ts().get(f as usize),
        };
        !(top_ts <= ts && (ts < end_of(open, cpu, py) || ts == top_ts))
    });
}

/// Pops what a frame ending at `end` outlasts, as torch's event tree does
/// (`_populate_cpu_children`): it holds no partial children, so a frame
/// that starts inside an open slice or frame and ends after it is not its
/// child, and what opens inside the frame is the frame's. Inductor's
/// wrapper frame starts inside `AOTDispatcher Runtime Wrapper Prologue`
/// and outlasts it; its frames below, the generated code's, hold the
/// `## Call CompiledFxGraph ##` range's C++ kernels (each torch counts as
/// the range's children: 35 µs of self CPU, where leaving the outlasting
/// frame out of the walk, with what was inside it, gave 254 ms on a
/// capture of seed 31337, `make captures-unseen`). Each slice or frame is
/// popped once, so the walk stays linear on a staircase of frames.
fn pop_outlasted(
    stack: &mut Vec<(Open, u32)>,
    depth: &mut usize,
    cpu: &crate::import::store::CpuTable,
    py: &crate::import::store::PythonTable,
    end: i64,
) {
    pop_while(stack, depth, |open| end > end_of(open, cpu, py));
}

/// Pops the walk's stack while `gone` says its top is closed, counting the
/// op slices popped off `depth`.
fn pop_while(stack: &mut Vec<(Open, u32)>, depth: &mut usize, gone: impl Fn(Open) -> bool) {
    while let Some(&(open, _)) = stack.last() {
        if !gone(open) {
            return;
        }
        if let Open::Slice(_) = open {
            *depth -= 1;
        }
        stack.pop();
    }
}

/// Where an open slice or frame ends.
fn end_of(
    open: Open,
    cpu: &crate::import::store::CpuTable,
    py: &crate::import::store::PythonTable,
) -> i64 {
    match open {
        Open::Slice(s) => cpu.ts().get(s as usize) + cpu.dur().get(s as usize),
        Open::Frame(f) => py.ts().get(f as usize) + py.dur().get(f as usize),
    }
}

/// Whether `External id` on runtime calls names their op (else it merely
/// repeats the correlation, or is absent).
fn external_id_names_op(t: &Tables, ids: &LaunchIds, attribution: &mut Attribution) -> bool {
    let (correlation, external_id) = (ids.cpu_correlation(), ids.cpu_external_id());
    let cpu = &t.cpu;
    let n = cpu.len();
    let (mut with_both, mut equal) = (0u64, 0u64);
    for i in 0..n {
        crate::cancel::point(i);
        if cpu.kind()[i].is_runtime() && correlation.get(i) != NONE && external_id.get(i) != NONE {
            with_both += 1;
            if correlation.get(i) == external_id.get(i) {
                equal += 1;
            }
        }
    }
    let names_op = with_both > 0 && (equal as f64) < 0.9 * with_both as f64;
    attribution.external_id_regime = if with_both == 0 {
        ExternalIdRegime::None
    } else if names_op {
        ExternalIdRegime::ExternalId
    } else {
        ExternalIdRegime::Correlation
    };
    names_op
}

/// Per CPU slice, for runtime calls: the op that issued it (else [`NO`]).
/// `External id`, where given, names the op when time nesting disagrees.
fn launching_ops(t: &Tables, parent: &RowIds, external_id: Option<&IntColumn>) -> RowIds {
    let cpu = &t.cpu;
    let n = cpu.len();
    let mut launcher = RowIds::new(n);
    let mut by_external: Option<HashMap<i64, u32>> = None;
    for i in 0..n {
        crate::cancel::point(i);
        if !cpu.kind()[i].is_runtime() {
            continue;
        }
        let p = parent.get(i);
        launcher.set(i, p);
        let Some(external_id) = external_id.filter(|e| e.get(i) != NONE) else {
            continue;
        };
        let ext = external_id.get(i);
        if p != NO && external_id.get(p as usize) == ext {
            continue;
        }
        // Time nesting disagrees with the id: trust the id when it names an
        // op on the same thread (ambiguity from truncated timestamps).
        let map = by_external.get_or_insert_with(|| {
            let mut m = HashMap::new();
            for j in 0..n {
                if cpu.kind()[j].is_op() && external_id.get(j) != NONE {
                    m.entry(external_id.get(j)).or_insert(j as u32);
                }
            }
            m
        });
        if let Some(&j) = map.get(&ext) {
            if cpu.track().get(j as usize) == cpu.track().get(i) {
                launcher.set(i, j);
            }
        }
    }
    launcher
}

/// Whether a runtime or driver call replays a CUDA/HIP graph.
pub fn is_graph_launch(name: &str) -> bool {
    let base = name.split_once('_').map_or(name, |(b, _)| b);
    matches!(base, "cudaGraphLaunch" | "hipGraphLaunch" | "cuGraphLaunch")
}

/// Runtime and driver calls by `args.correlation`: their rows sorted by it,
/// searched by halving (a hash map of the same cost 9 bytes more per call,
/// and this is the analysis's largest moment). Where calls share a
/// correlation, the last in the file.
pub(crate) struct ByCorrelation<'a> {
    correlation: &'a crate::import::store::IntColumn,
    rows: Vec<u32>,
}

impl<'a> ByCorrelation<'a> {
    fn new(t: &Tables, ids: &'a LaunchIds) -> Self {
        let cpu = &t.cpu;
        let correlation = ids.cpu_correlation();
        let mut rows: Vec<u32> = (0..cpu.len() as u32)
            .filter(|&i| cpu.kind()[i as usize].is_runtime() && correlation.get(i as usize) != NONE)
            .collect();
        // Stable: calls with one correlation stay in file order. Calls come
        // in correlation order, so this is mostly one pass.
        rows.sort_by_key(|&i| correlation.get(i as usize));
        ByCorrelation { correlation, rows }
    }

    /// The call with correlation `c`.
    fn get(&self, c: i64) -> Option<u32> {
        let end = self
            .rows
            .partition_point(|&i| self.correlation.get(i as usize) <= c);
        let &last = self.rows[..end].last()?;
        (self.correlation.get(last as usize) == c).then_some(last)
    }
}

/// Per GPU slice: its launch (by correlation, else by flow).
fn gpu_launches(t: &Tables, ids: &LaunchIds, attribution: &mut Attribution) -> RowIds {
    let gpu = &t.gpu;
    let by_corr = ByCorrelation::new(t, ids);
    let mut launch = RowIds::new(gpu.len());
    let mut missing_corr = false;
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if !gpu.kind()[g].is_gpu_op() {
            continue;
        }
        let c = ids.gpu_correlation().get(g);
        if c == NONE {
            missing_corr = true;
        } else if let Some(r) = by_corr.get(c) {
            launch.set(g, r);
            attribution.by_correlation += 1;
        }
    }
    if missing_corr {
        flow_fallback(t, ids, &by_corr, &mut launch, attribution);
    }
    launch
}

/// Per GPU slice: the op behind its launch, and whether a graph replay ran it.
fn gpu_ops(
    t: &Tables,
    launch: &RowIds,
    launcher: &RowIds,
    attribution: &mut Attribution,
) -> (RowIds, Vec<bool>) {
    let cpu = &t.cpu;
    let gpu = &t.gpu;
    let mut op = RowIds::new(gpu.len());
    let mut is_graph_sym: HashMap<u32, bool> = HashMap::new();
    let mut graph = vec![false; gpu.len()];
    let mut graph_launches = hashbrown::HashSet::new();
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if !gpu.kind()[g].is_gpu_op() {
            continue;
        }
        attribution.gpu_ops += 1;
        let r = launch.get(g);
        if r == NO {
            attribution.without_launch += 1;
            attribution.unattributed_us += gpu.dur().get(g) as f64 / 1e3;
            continue;
        }
        let sym = cpu.name()[r as usize];
        let is_graph = *is_graph_sym
            .entry(sym)
            .or_insert_with(|| is_graph_launch(t.name(sym)));
        if is_graph {
            attribution.graph_gpu_ops += 1;
            graph_launches.insert(r);
            graph[g] = true;
        }
        let o = launcher.get(r as usize);
        op.set(g, o);
        if o == NO {
            attribution.without_op += 1;
        }
    }
    attribution.graph_launches = graph_launches.len() as u64;
    (op, graph)
}

/// GPU ops without `args.correlation`: follow the launch flow. A flow end
/// sits at the GPU op (same track and start), its start at the runtime call;
/// where the parser dropped the start (it repeated the runtime call's
/// correlation), the runtime call with the flow's id as its correlation.
fn flow_fallback(
    t: &Tables,
    ids: &LaunchIds,
    by_corr: &ByCorrelation,
    launch: &mut RowIds,
    attribution: &mut Attribution,
) {
    let f = ids.flows();
    let mut start_at: HashMap<i64, (u32, i64)> = HashMap::new();
    let mut end_at: HashMap<(u32, i64), i64> = HashMap::new();
    for k in 0..f.id().len() {
        if f.is_start()[k] {
            start_at.insert(f.id().get(k), (f.track()[k], f.ts().get(k)));
        } else {
            end_at.insert((f.track()[k], f.ts().get(k)), f.id().get(k));
        }
    }
    let cpu = &t.cpu;
    let mut runtime_at: HashMap<(u32, i64), u32> = HashMap::new();
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i].is_runtime() {
            runtime_at
                .entry((cpu.track().get(i), cpu.ts().get(i)))
                .or_insert(i as u32);
        }
    }
    let gpu = &t.gpu;
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if launch.get(g) != NO || !gpu.kind()[g].is_gpu_op() || ids.gpu_correlation().get(g) != NONE
        {
            continue;
        }
        let found = end_at
            .get(&(gpu.track().get(g), gpu.ts().get(g)))
            .and_then(|id| {
                start_at
                    .get(id)
                    .and_then(|at| runtime_at.get(at).copied())
                    .or_else(|| by_corr.get(*id))
            });
        if let Some(r) = found {
            launch.set(g, r);
            attribution.by_flow += 1;
        }
    }
}
