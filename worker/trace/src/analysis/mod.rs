//! Analysis: a parsed [`Trace`] in, a [`Summary`] out. Pure code: no I/O,
//! no clock, no randomness, so the same trace always gives the same summary.
//!
//! The passes, in the order [`summarize`] schedules them (each its own
//! module, each returning a named struct or a table of the contract):
//!
//! - [`links`]: op tree per thread, GPU op -> launch -> op.
//! - [`steps`]: step detection and step kinds; the step table.
//! - [`python`]: Python frames above the ops (`with_stack` traces), and
//!   the stacks the tables read.
//! - [`attribution`]: who each GPU op's device time belongs to (the one
//!   owner rule), per-op device sums, the time basis.
//! - [`trace_info`]: the trace's facts and notes.
//! - [`ops`]: the op table (torch's `key_averages` rules).
//! - [`kernels`]: the kernel table, with [`chains`] (launch chains).
//! - [`graphs`]: graph replay statistics.
//! - [`gpu_time`]: busy/idle and per-stream time.
//! - [`layers`]: per-layer attribution.
//! - [`counters`]: counter tracks (`ph: "C"`), and each kernel's mean of
//!   its device's counters.
//! - [`memory`]: the `[memory]` events replayed: the curve, the peak and
//!   what is live then, allocations per op signature, churn, growth.
//! - [`roofline`]: the device and its peaks; each signature's and kernel
//!   group's share of them.
//! - [`findings`]: the ranked sentences, over the finished summary.
//!
//! [`names`] (kernel short names and categories) and [`shapes`] (bytes
//! moved by copy/cast ops) are rules the passes share; [`limits`] holds the
//! pattern rules' limits with their evidence and margins.

// The tables are struct-of-arrays: their columns are indexed in parallel.
#![allow(clippy::needless_range_loop)]

mod attribution;
mod chains;
mod counters;
pub mod findings;
pub mod gpu_time;
mod graphs;
mod kernels;
pub mod layers;
pub mod limits;
pub mod links;
mod memory;
pub mod names;
mod ops;
pub mod python;
mod repeats;
mod resolution;
mod roofline;
pub mod shapes;
pub mod steps;
mod trace_info;

use crate::budget;
use crate::import::store::{Tables, Trace};
use kinetoscope_types::*;
use links::Links;
use serde_json::Value;
use steps::StepSpan;

/// Version of the analysis; bump it whenever the summary changes so stored
/// runs get re-analyzed.
pub const ANALYZER_VERSION: u32 = 27;

/// Choices a user can make about the analysis (the contract type).
pub use kinetoscope_types::AnalysisOptions;

/// How many chains are kept per kernel, and shape groups per op and kernel.
const MAX_CHAINS: usize = 20;
const MAX_SHAPE_GROUPS: usize = 8;
const MAX_KERNEL_GROUPS: usize = 8;

/// Most rows of the op table, and of the kernel table, the ones with the
/// most time kept (the trace's notes say how many were left out, and their
/// share). The most distinct op names of any trace we have is 232, and of
/// kernel names 174 (hta-a100-train-rank3of8-2022): no real trace is cut.
/// A trace whose every call has a name of its own (a tag, a counter in
/// it: 1 M events, 1 M names) made a row each: the CLI held 2.25 GB and
/// wrote a 483 MB summary (BENCHMARKS.md, "Distinct names").
pub(crate) const MAX_TABLE_ROWS: usize = 2000;

/// The rows a table keeps: the `MAX_TABLE_ROWS` first by `key`, largest
/// first (ties by symbol, so the cut is the same every run); the others'
/// count and their part of `total`.
pub(crate) fn listed_rows<K: PartialOrd + Copy>(
    mut rows: Vec<(crate::import::store::Sym, K, f64)>,
) -> (Vec<crate::import::store::Sym>, Option<(usize, f64)>) {
    if rows.len() <= MAX_TABLE_ROWS {
        return (rows.into_iter().map(|r| r.0).collect(), None);
    }
    rows.sort_by(|x, y| {
        y.1.partial_cmp(&x.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(x.0.cmp(&y.0))
    });
    let cut = rows.split_off(MAX_TABLE_ROWS);
    let left_out = (cut.len(), cut.iter().map(|r| r.2).sum());
    (rows.into_iter().map(|r| r.0).collect(), Some(left_out))
}

/// Everything the analysis derives once and the table builders share.
pub(crate) struct Context<'a> {
    pub t: &'a Tables,
    pub links: Links,
    pub steps: Vec<StepSpan>,
    /// Per GPU slice: index of the step its launch falls in, or [`links::NO`].
    pub gpu_step: links::RowIds,
    /// Total GPU-op time, ns.
    pub gpu_op_ns: i64,
    /// The time the op table ranks by ([`TimeBasis::of`]).
    pub basis: TimeBasis,
    /// The Python stacks above the ops and graph launches.
    pub stacks: python::Stacks,
    /// Per GPU slice: the graph replay context (an op, annotation or Python
    /// frame name) it is attributed to, or [`NO`](links::NO).
    pub replay: links::RowIds,
    /// The first marked step whose forward passes became the steps, and
    /// how many marked steps there were ([`passes_in_steps`]).
    pub passes_in: Option<(crate::import::store::Sym, usize)>,
}

impl Context<'_> {
    /// Calls per step, on a trace with steps.
    pub fn per_step(&self, calls: u64) -> Option<f64> {
        let n = self.steps.len();
        (n > 0).then(|| calls as f64 / n as f64)
    }
}

/// The op-table name of a graph replay context: a step's number folds
/// (`graph replay: ProfilerStep#*`), as torch folds the steps of its own
/// tables, so one graph replayed in every step is one row.
pub fn replay_row_name(context: &str) -> String {
    if steps::is_profiler_step(context) {
        return "graph replay: ProfilerStep#*".to_string();
    }
    format!("graph replay: {}", python::short_frame(context))
}

/// Everything an analysis produces: the summary, and the artifacts stored
/// beside it.
pub struct Analysis {
    /// The summary (tables, findings).
    pub summary: Summary,
    /// The timeline index.
    pub timeline: crate::timeline::TimelineIndex,
    /// Memory over time per device (empty without `[memory]` events).
    pub memory: MemoryReport,
    /// Counter tracks (empty without `ph: "C"` events).
    pub counters: CounterReport,
}

/// Analyzes a parsed trace: the summary only.
pub fn analyze(t: &Trace, opts: &AnalysisOptions) -> Summary {
    summarize(t, links::link(t), Early::find(t, opts), opts, |_| ()).summary
}

/// Analyzes a parsed trace: the summary and every artifact.
pub fn analyze_all(t: &Trace, opts: &AnalysisOptions) -> Analysis {
    let Summarized {
        summary,
        timeline,
        memory,
        counters,
    } = summarize(
        t,
        links::link(t),
        Early::find(t, opts),
        opts,
        crate::timeline::TimelineIndex::build,
    );
    Analysis {
        summary,
        timeline,
        memory,
        counters,
    }
}

/// What the analysis job stores: the summary, and every other artifact in
/// its stored form. The job stores whatever is in `artifacts`, so a new
/// analysis output is a new pass here and a new [`ArtifactName`], nothing
/// more.
pub struct StoredAnalysis {
    /// The summary (tables, findings), within its byte budget
    /// ([`budget`](crate::budget)).
    pub summary: Summary,
    /// The summary's JSON, as stored.
    pub summary_json: Vec<u8>,
    /// The artifacts beside the summary, each once.
    pub artifacts: Vec<StoredArtifact>,
}

/// One artifact of an analysis, ready to store in the blob store.
pub struct StoredArtifact {
    /// Which output it is.
    pub name: ArtifactName,
    /// Its bytes as stored (the timeline index as
    /// [`TimelineIndex::write`](crate::timeline::TimelineIndex::write)
    /// writes it).
    pub bytes: Vec<u8>,
}

impl StoredAnalysis {
    /// The stored bytes of one artifact, if the analysis made it.
    pub fn artifact(&self, name: ArtifactName) -> Option<&[u8]> {
        self.artifacts
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.bytes.as_slice())
    }
}

/// [`analyze_all`] for a trace the caller is done with (the analysis job),
/// the index written out as it is built: the columns each phase no longer
/// needs are freed before the next (the launch ids once launches are
/// found, `External id` once launches are linked to ops), and
/// the index's rows are compressed one by one rather than held. The same
/// summary, and the same index once read back.
pub fn analyze_stored(t: Trace, opts: &AnalysisOptions) -> std::io::Result<StoredAnalysis> {
    let Summarized {
        summary,
        timeline,
        memory,
        counters,
    } = summarize_owned(t, opts, crate::timeline::TimelineIndex::build_stored);
    let mut artifacts = vec![StoredArtifact {
        name: ArtifactName::Timeline,
        bytes: timeline?,
    }];
    // Each JSON artifact within its byte budget; the summary's notes say
    // what was cut.
    let mut notes = Vec::new();
    if !memory.devices.is_empty() {
        let m = budget::fit(memory, budget::MEMORY_BYTES, |_, _| {})?;
        notes.extend(
            m.cut
                .map(|c| c.words("memory artifact", budget::MEMORY_BYTES)),
        );
        artifacts.push(StoredArtifact {
            name: ArtifactName::Memory,
            bytes: m.json,
        });
    }
    if !counters.tracks.is_empty() {
        let c = budget::fit(counters, budget::COUNTERS_BYTES, |_, _| {})?;
        notes.extend(
            c.cut
                .map(|c| c.words("counters artifact", budget::COUNTERS_BYTES)),
        );
        artifacts.push(StoredArtifact {
            name: ArtifactName::Counters,
            bytes: c.json,
        });
    }
    let mut summary = summary;
    summary.trace.notes.extend(notes);
    let s = budget::fit(summary, budget::SUMMARY_BYTES, |v, c| {
        if let Some(Value::Array(notes)) = v.pointer_mut("/trace/notes") {
            notes.push(Value::String(c.words("summary", budget::SUMMARY_BYTES)));
        }
    })?;
    crate::phases::mark("artifacts' JSON within budgets");
    Ok(StoredAnalysis {
        summary: s.value,
        summary_json: s.json,
        artifacts,
    })
}

/// [`analyze`] for a trace the caller is done with (the CLI's `analyze`):
/// the job's schedule and its memory, each column freed once the passes
/// that read it are done, and no timeline index. The same summary.
pub fn analyze_owned(t: Trace, opts: &AnalysisOptions) -> Summary {
    summarize_owned(t, opts, |_| ()).summary
}

/// The job's schedule over a trace it owns: the launch ids apart, dropped
/// once the launches are found; then [`summarize`] with `timeline`.
fn summarize_owned<R>(
    t: Trace,
    opts: &AnalysisOptions,
    timeline: impl FnOnce(crate::timeline::Inputs) -> R,
) -> Summarized<R> {
    // The launch ids apart from the tables: only finding the launches reads
    // them, and once they are dropped no pass can (the compiler keeps it so).
    crate::phases::mark("parse (decompressed beside it)");
    let (t, ids) = t.into_parts();
    // The op tree needs only the CPU slices' times, the launches only the
    // ids, the steps, the Python frames' tree and the GPUs' busy time only
    // the trace: the tree on one core, the rest on the other (the op tree
    // takes longest).
    let (launches, early, tree) = std::thread::scope(|scope| {
        let tree = crate::cancel::spawn(scope, || links::OpTree::build(&t));
        let launches = links::Launches::find(&t, &ids);
        let early = Early::find(&t, opts);
        (launches, early, joined(tree))
    });
    // What nothing reads once launches are found: the ids that link them,
    // `External id` aside where it names ops (the links read it once more).
    let external_id = launches.needs_external_id().then(|| ids.into_external_id());
    let links = launches.link_tree(&t, external_id.as_ref(), tree);
    drop(external_id);
    crate::phases::mark("op tree, launches, steps");
    summarize(&t, links, early, opts, timeline)
}

/// What the analysis finds from the trace alone, before the op tree and
/// the launches are known (the job finds it beside the op tree, which
/// takes longer).
struct Early {
    /// The steps, and what they were found by.
    steps: steps::FoundSteps,
    /// The Python frames' tree.
    frames: python::Frames,
    /// How long the GPUs were busy.
    busy: gpu_time::Busy,
}

impl Early {
    fn find(t: &Tables, opts: &AnalysisOptions) -> Early {
        Early {
            steps: steps::find_steps(t, opts.step_marker.as_deref()),
            frames: python::Frames::new(t),
            busy: gpu_time::busy(t),
        }
    }
}

/// A trace without step marks: where it runs its forward pass several
/// times, the passes become its steps (found with the layers of its one
/// sequence, which are then found again, per pass; passes told by where
/// the first ops run again stand only where each holds two layers or
/// more). The layers found, and whether the steps are now the passes.
fn passes_as_steps(
    cx: &mut Context,
    opts: &AnalysisOptions,
    names: NamesStand,
    finders: Finders,
) -> (layers::Placed, bool) {
    use layers::PassesFrom::{Anchor, Compiled, Prologue, Restarts};
    let found = layers::find(cx, opts);
    if names == NamesStand::Yes && found.layers.told_by_names() {
        return (found, false);
    }
    // Told by their prologue, the passes stand; else where a name cuts the
    // sequence into alike pieces (the profile may have opened inside a
    // pass); else where the first ops run again (the passes of a long
    // generation need not be alike: its prefill runs other kernels); else
    // the calls of a compiled graph (a generation's prefill may call
    // another graph than its decodes, or none).
    let tries: [(layers::PassFinder, _); 4] = [
        (layers::prologue_passes, Prologue),
        (layers::anchored_passes, Anchor),
        (layers::restart_passes, Restarts),
        (layers::compiled_passes, Compiled),
    ];
    let tried = |from: &layers::PassesFrom| finders == Finders::All || *from == Compiled;
    for (passes, from) in tries.into_iter().filter(|(_, from)| tried(from)) {
        let Some(passes) = passes(cx, &found) else {
            continue;
        };
        let again = match from {
            Anchor => anchored_steps(cx, opts, &found, &passes),
            _ => with_passes(cx, opts, &passes, from),
        };
        if let Some(again) = again {
            return (again, true);
        }
    }
    (found, false)
}

/// The passes a name cuts ([`layers::anchored_passes`]) as steps, with the
/// layers found again. What runs before the first pass is one more (a
/// generation's prefill, other ops than its decodes:
/// [`layers::anchored_with_head`]) where its layers are every pass's and
/// no fewer than without it: a pass's tail taken for one made the passes
/// of windows of `unmarked/generate-moe-4l` 3 layers of 4.
fn anchored_steps(
    cx: &mut Context,
    opts: &AnalysisOptions,
    found: &layers::Placed,
    passes: &[layers::PassSpan],
) -> Option<layers::Placed> {
    use layers::PassesFrom::Anchor;
    let Some(headed) = layers::anchored_with_head(cx, found) else {
        return anchored_alone(cx, opts, found, passes);
    };
    let Some(more) = with_passes(cx, opts, &headed, Anchor) else {
        return anchored_alone(cx, opts, found, passes);
    };
    // A generation runs one prefill: where the pass after the head feeds
    // the prompt's tokens, the head ran before the prefill, and is no pass
    // (Qwen2.5-VL's vision tower, as many layers as the language model's
    // in `qwen25vl-6v6l`: 4 passes of 3, the first two prefills).
    let prefill_after = cx
        .steps
        .get(1)
        .is_some_and(|s| s.kind == Some(StepKind::Prefill));
    let rest = anchored_alone(cx, opts, found, passes);
    if rest
        .as_ref()
        .is_some_and(|r| prefill_after || layers::per_pass(&more) < layers::per_pass(r))
    {
        return rest;
    }
    // The steps back to the passes with the prefill (the layers found
    // with them are kept: no second search).
    set_steps(cx, &headed);
    Some(more)
}

/// [`anchored_steps`] without a pass before the first. The last may be a
/// pass the profile closed inside, which the name cuts as it cuts a whole
/// one: the layers found with it are then fewer (the story opened 60% into
/// its window, one whole pass and 61% of the next, said 3 layers a pass of
/// 78), or none. The passes but the last ([`layers::anchored_but_last`])
/// stand where their layers are more a pass; else all of them.
fn anchored_alone(
    cx: &mut Context,
    opts: &AnalysisOptions,
    found: &layers::Placed,
    passes: &[layers::PassSpan],
) -> Option<layers::Placed> {
    use layers::PassesFrom::Anchor;
    let Some(but_last) = layers::anchored_but_last(cx, found) else {
        return with_passes(cx, opts, passes, Anchor);
    };
    let fewer = with_passes(cx, opts, &but_last, Anchor).map(|p| layers::per_pass(&p));
    match with_passes(cx, opts, passes, Anchor) {
        Some(all) if fewer.is_none_or(|n| layers::per_pass(&all) >= n) => Some(all),
        _ if fewer.is_some() => with_passes(cx, opts, &but_last, Anchor),
        _ => None,
    }
}

/// A trace whose marked steps each run the forward pass several times
/// (`model.generate()` inside each `ProfilerStep`): where no layer
/// annotations or module frames tell the layers, the passes become the
/// steps, as in a trace without step marks (`passes_as_steps`). The H200
/// story's six decode passes in one step made its 78 layers 468, in two
/// steps 234. Every pass must start inside a marked step, and every
/// marked step hold two passes or more (a training step, or a step of one
/// pass, is no pass). The layers found with the passes (else `None`: the
/// marked steps stand, and their layers are found beside the tables).
fn passes_in_steps(cx: &mut Context, opts: &AnalysisOptions) -> Option<layers::Placed> {
    if cx.steps.iter().any(|s| s.pass.is_some()) {
        return None;
    }
    // One marked step is searched as a trace without step marks is: its
    // passes need not start it (a DiT's generation, `hf/dit-6l-marked`,
    // draws its noise and its timesteps first, and its 4 passes of 6
    // blocks were 28 layers), and the search costs one more layer search
    // of one step, within the noise on the shared one-step traces.
    let finders = if cx.steps.len() == 1 || layers::may_hold_passes(cx) {
        Finders::All
    } else if layers::compiled_calls_cover_steps(cx) {
        Finders::Compiled
    } else {
        return None;
    };
    let t = cx.t;
    let marked = std::mem::take(&mut cx.steps);
    (cx.gpu_step, cx.basis) = attribution::steps_of(t, &cx.links, &cx.steps, cx.gpu_op_ns);
    let (placed, passes) = passes_as_steps(cx, opts, NamesStand::Yes, finders);
    let step_of = |ts: i64| marked.iter().position(|s| s.ts <= ts && ts < s.end);
    let mut held = vec![0usize; marked.len()];
    let inside = cx.steps.iter().all(|p| match step_of(p.ts) {
        Some(i) => {
            held[i] += 1;
            true
        }
        None => false,
    });
    if passes && inside && held.iter().all(|&n| n >= 2) {
        cx.passes_in = Some((marked[0].name, marked.len()));
        return Some(placed);
    }
    cx.steps = marked;
    (cx.gpu_step, cx.basis) = attribution::steps_of(t, &cx.links, &cx.steps, cx.gpu_op_ns);
    None
}

/// Which pass finders [`passes_as_steps`] tries: all of them, or only the
/// calls of a compiled graph, where the marked steps' sequences show no
/// other sign of passes ([`layers::may_hold_passes`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finders {
    All,
    Compiled,
}

/// Whether layers that names told (annotations, module frames) stand
/// without looking for passes ([`passes_in_steps`]: the marked steps stand
/// then), or are found again per pass (a trace without step marks).
#[derive(Clone, Copy, PartialEq, Eq)]
enum NamesStand {
    Yes,
    No,
}

/// The layers found again with the passes as steps; `None`, and no steps,
/// where none are found (the CPU generation `unmarked/generate-dense-6l`
/// kept from 25% to 60% of its span: a pass's head before the first
/// prologue was taken for part of it, and its passes had no layers), or
/// where passes not told by their prologue hold fewer than two layers each
/// (the pieces were the layers).
fn with_passes(
    cx: &mut Context,
    opts: &AnalysisOptions,
    passes: &[layers::PassSpan],
    from: layers::PassesFrom,
) -> Option<layers::Placed> {
    set_steps(cx, passes);
    let t = cx.t;
    let again = layers::find(cx, opts);
    let none = !again.layers.any();
    if none || (from != layers::PassesFrom::Prologue && !layers::holds_passes(&again)) {
        cx.steps.clear();
        (cx.gpu_step, cx.basis) = attribution::steps_of(t, &cx.links, &cx.steps, cx.gpu_op_ns);
        return None;
    }
    Some(again)
}

/// The passes as the steps, each GPU op's step with them.
fn set_steps(cx: &mut Context, passes: &[layers::PassSpan]) {
    let t = cx.t;
    cx.steps = steps::from_passes(t, passes);
    (cx.gpu_step, cx.basis) = attribution::steps_of(t, &cx.links, &cx.steps, cx.gpu_op_ns);
}

/// The summary, what the timeline step made of the index's inputs, and
/// the memory artifact.
struct Summarized<R> {
    summary: Summary,
    timeline: R,
    memory: MemoryReport,
    counters: CounterReport,
}

/// A scoped thread's result; a panic in it goes on unwinding with its own
/// message (a failed run stores the message, not "Any { .. }").
fn joined<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The schedule: the passes in order, independent ones two at a time (see
/// the comments below). `timeline` makes what the caller wants of the
/// timeline index's inputs (the index itself, or its stored form; nothing
/// for the summary alone).
fn summarize<R>(
    t: &Tables,
    mut links: links::Links,
    early: Early,
    opts: &AnalysisOptions,
    timeline: impl FnOnce(crate::timeline::Inputs) -> R,
) -> Summarized<R> {
    let Early {
        mut steps,
        frames,
        busy,
    } = early;
    let steps_cut = steps.cut_note();
    crate::cancel::check();
    let stacks = python::Stacks::resolve(t, &links, &frames);
    drop(frames);
    let device = attribution::attribute(t, &mut links, &steps.spans, &stacks.replay_frame);
    let sums = device.sums;
    crate::phases::mark("Python stacks, attribution");
    let mut cx = Context {
        t,
        links,
        steps: steps.spans,
        gpu_step: device.gpu_step,
        gpu_op_ns: device.gpu_op_ns,
        basis: device.basis,
        stacks,
        replay: device.replay,
        passes_in: None,
    };
    let placed = if cx.steps.is_empty() {
        let (placed, passes) = passes_as_steps(&mut cx, opts, NamesStand::No, Finders::All);
        if passes {
            steps.source = Some(steps::FORWARD_PASSES.to_string());
        }
        Some(placed)
    } else if opts.step_marker.is_none() {
        let placed = passes_in_steps(&mut cx, opts);
        if placed.is_some() {
            steps.source = Some(steps::FORWARD_PASSES.to_string());
        }
        placed
    } else {
        None
    };

    // The trace's facts, the steps, the graphs and the layers (which ops are
    // in which layer) on a second core while the op and kernel tables are
    // made (they share the launch chains: a second core's own chains, 4
    // bytes per CPU slice beside the op table's sums, lifted the job's peak
    // past the index build's, 34.5 bytes per event at 300 steps); then the
    // layers' numbers (they need the kernel table) while the timeline index
    // is laid out.
    let (trace, step_table, graphs, found, memory, ops, kernels) = std::thread::scope(|scope| {
        let (cx, source) = (&cx, steps.source);
        let side = crate::cancel::spawn(scope, move || {
            (
                trace_info::trace_info(cx),
                steps::table(cx, source),
                graphs::stats(cx),
                placed.unwrap_or_else(|| layers::find(cx, opts)),
                memory::analyze(cx),
            )
        });
        let mut chains = chains::Chains::new(t.cpu.len());
        let (ops, ops_cut) = ops::table(cx, &sums, &mut chains);
        drop(sums);
        let mut kernels = kernels::table(cx, &mut chains);
        drop(chains);
        let (mut trace, step_table, graphs, found, mut memory) = joined(side);
        trace.notes.extend(steps_cut);
        trace.notes.extend(ops_cut);
        trace.notes.extend(kernels.note.take());
        trace.notes.append(&mut memory.notes);
        (trace, step_table, graphs, found, memory, ops, kernels)
    });
    crate::phases::mark("ops, kernels | facts, steps, layers");
    crate::cancel::check();
    let kernels::Table {
        rows: mut kernels,
        left_out_ns,
        left_out_kernel_calls,
        ..
    } = kernels;
    let counters = counters::apply(t, &mut kernels);
    let mut gpu_time = gpu_time::compute(busy, &kernels, left_out_ns / 1e3, trace.span_us);
    (
        gpu_time.left_out_kernel_calls,
        gpu_time.left_out_small_kernel_calls,
    ) = left_out_kernel_calls;
    let by_thread = std::mem::take(&mut cx.links.by_thread);
    let (layers, timeline) = std::thread::scope(|scope| {
        let (cx, kernels) = (&cx, &kernels);
        let numbers =
            crate::cancel::spawn(scope, move || layers::numbers(cx, kernels, found.layers));
        let timeline = timeline(crate::timeline::Inputs {
            trace: t,
            parent: &cx.links.parent,
            threads: by_thread,
            launch: &cx.links.launch,
            steps: cx.steps.iter().map(|s| (s.label(t), s.ts, s.end)).collect(),
            layers: found.spans,
            stacks: &cx.stacks.stacks,
            stack_of: &cx.stacks.stack_of,
        });
        (joined(numbers), timeline)
    });
    crate::phases::mark("timeline index | layer numbers");
    drop(cx);
    crate::cancel::check();
    let mut summary = Summary {
        analyzer_version: ANALYZER_VERSION,
        trace,
        ops,
        kernels,
        steps: step_table.rows,
        steps_stats: step_table.stats,
        gpu_time,
        layers,
        graphs,
        findings: Vec::new(),
        device: None,
        memory: memory.summary,
    };
    summary.device = roofline::device(&t.meta.devices, &summary.trace.active_devices, opts);
    roofline::apply(&mut summary);
    summary.findings = findings::find(&summary);
    crate::phases::mark("roofline, findings");
    Summarized {
        summary,
        timeline,
        memory: memory.report,
        counters,
    }
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
