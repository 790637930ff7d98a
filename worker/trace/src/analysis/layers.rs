//! Per-layer attribution of device time.
//!
//! Layers are found by the most trustworthy method the trace allows, and the
//! summary says which one was used and how sure it is:
//!
//! 1. **annotation**: record_function ranges (and `gpu_user_annotation`s)
//!    whose names carry a layer index — `layers.12`, `model.layers.12.mlp`,
//!    `layer_12`, `Layer 12`. A GPU op belongs to the layer of the innermost
//!    such range around its launch; a CUDA-graph kernel, to the layer its
//!    own annotation names (`args.name`, from torch's `mark_kernels`, as
//!    torchtitan's module profiler writes `block::layers.3`).
//! 2. **module**: `nn.Module: XxxDecoderLayer_N` Python frames (traces made
//!    with `with_stack`/`with_modules`); N is the layer. A GPU op belongs to
//!    the module frame around its launch on the launching thread.
//! 3. **repetition**: within each step, the GPU ops in device order form a
//!    sequence; a kernel (or kernel geometry, or mixer block) whose
//!    occurrences cut every step into layers that are alike wins, the most
//!    layers first ([`repeats`](super::repeats) says how, and why that holds
//!    for dense prefixes, interleaved MoE, hybrids and local/global
//!    attention). It needs neither the layer count nor names in advance and
//!    works for CUDA graph replays too, since it reads the device side;
//!    where names tell attention, norms and MLPs apart, each layer starts at
//!    its input norm, and its kind (`dense`, `moe`, `linear`) is named.
//!
//! A trace without GPU ops (a CPU capture) goes through the same methods
//! with its top-level ops as the items: its layers' numbers are CPU time
//! (`Layers.basis` says so).
//!
//! A user can override with a marker (a kernel, op or annotation name that
//! starts each layer) and/or a period (GPU ops per layer).

use super::attribution::Owner;
use super::links::NO;
use super::names;
use super::repeats::{self, Item, Role};
use super::{AnalysisOptions, Context};
use crate::import::store::{CpuKind, GpuKind, IntColumn, Sym, Tables, TimeColumn};
use hashbrown::HashMap;
use kinetoscope_types::{KernelRow, LayerKind, LayerMethod, LayerRow, Layers, NameTime, TimeBasis};
use std::collections::BTreeMap;

/// Where the items' starts and times are: the GPU ops' columns, or (a
/// trace without GPU ops) the CPU slices'. Items do not copy them
/// ([`repeats::DurOf`] says why).
#[derive(Clone, Copy)]
struct Times<'a> {
    ts: &'a TimeColumn,
    dur: &'a IntColumn,
}

impl<'a> Times<'a> {
    fn of(t: &'a Tables, cpu: bool) -> Self {
        if cpu {
            Times {
                ts: t.cpu.ts(),
                dur: t.cpu.dur(),
            }
        } else {
            Times {
                ts: t.gpu.ts(),
                dur: t.gpu.dur(),
            }
        }
    }

    fn start(self, it: &Item) -> i64 {
        self.ts.get(it.at as usize)
    }

    fn dur(self, it: &Item) -> i64 {
        self.dur.get(it.at as usize)
    }
}

/// Entries kept in each layer's top lists.
const TOP: usize = 5;
/// The layer index in a name: `layers.12`, `layer_12`, `Layer 12`,
/// `decoder.layer.3.attention`.
pub fn layer_index(name: &str) -> Option<i64> {
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(k) = lower[from..].find("layer") {
        let at = from + k;
        from = at + 5;
        // A word start: not inside another identifier (e.g. "multilayer").
        if at > 0 && b[at - 1].is_ascii_alphabetic() {
            continue;
        }
        let mut j = at + 5;
        if j < b.len() && b[j] == b's' {
            j += 1;
        }
        if j < b.len() && matches!(b[j], b'.' | b'_' | b' ' | b'[' | b'/' | b'-' | b':') {
            j += 1;
        }
        let start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > start && (j == b.len() || !b[j].is_ascii_alphabetic()) {
            return lower[start..j].parse().ok();
        }
    }
    None
}

/// `nn.Module: Qwen2DecoderLayer_12` -> (`Qwen2DecoderLayer`, 12).
pub fn module_instance(name: &str) -> Option<(&str, i64)> {
    let rest = name.strip_prefix("nn.Module: ")?;
    let (class, n) = rest.rsplit_once('_')?;
    Some((class, n.parse().ok()?))
}

/// Whether a module class is a model's layer: its name ends in `Layer`
/// or `Block` (`Qwen2DecoderLayer`, `Owlv2EncoderLayer`, `GPT2Block`,
/// `JointTransformerBlock`, ResNet's `BasicBlock`). A name that only
/// holds the word is a part of a layer: `LayerNorm` ran 385 times over 76
/// instances in `tracelens-h100-owlv2-large-infer`, more instances than
/// its 36 `Owlv2EncoderLayer`s, so it was taken for the layer class, its
/// frames covered too little of the GPU time, and the layers fell back to
/// repetition: the step's five forward passes, called five layers.
fn is_layer_class(class: &str) -> bool {
    class.ends_with("Layer") || class.ends_with("Block")
}

/// The GPU ops of each step in device order (one pseudo-step for traces
/// without steps), with what their names say.
fn step_sequences(cx: &Context) -> Sequences {
    let t = cx.t;
    let gpu = &t.gpu;
    // Without steps, the one sequence starts at the first GPU op launched in
    // the profile: those before it are the end of a pass launched before it
    // opened (436 kernels of `tracelens-h100-qwen1.5-0.5b-chat-infer`, 10
    // layers, made 34 layers of its 24). A trace with no launch at all keeps
    // every GPU op.
    let first = if cx.steps.is_empty() {
        (0..gpu.len())
            .find(|&g| gpu.kind()[g].is_gpu_op() && cx.links.launch.get(g) != NO)
            .unwrap_or(0)
    } else {
        0
    };
    let step_of = |g: usize| {
        if !gpu.kind()[g].is_gpu_op() {
            None
        } else if cx.steps.is_empty() {
            (g >= first).then_some(0)
        } else {
            Some(cx.gpu_step.get(g) as usize).filter(|&s| s != NO as usize)
        }
    };
    let mut groups: HashMap<(Sym, [u32; 3], [u32; 3]), u32> = HashMap::new();
    // The kernel's name, else (only then: the walk up the launch chain
    // costs) the name of the op that launched it.
    let mut by_kernel: HashMap<Sym, Role> = HashMap::new();
    let mut by_op: HashMap<Sym, Role> = HashMap::new();
    let item = |g: usize| {
        let next = groups.len() as u32;
        let group = *groups
            .entry((gpu.name()[g], gpu.grid(g), gpu.block(g)))
            .or_insert(next);
        // A softmax kernel is attention's only where its op says so: a
        // loss's `aten::_log_softmax` runs the same kernels
        // (`softmax_warp_forward`; PARAM's ResNet, whose 30 iterations
        // were otherwise 30 layers), and a kernel whose op is not in the
        // trace may be one (PARAM's linear model: 40 iterations, 40 layers).
        let role = match *by_kernel
            .entry(gpu.name()[g])
            .or_insert_with(|| repeats::role_of(t.name(gpu.name()[g])))
        {
            Role::Other | Role::Scores => match cx.owner(g) {
                Some(Owner::Op(op)) => *by_op
                    .entry(op)
                    .or_insert_with(|| repeats::role_of(t.name(op))),
                _ => Role::Other,
            },
            r => r,
        };
        Item {
            at: g as u32,
            name: gpu.name()[g],
            group,
            role,
        }
    };
    Sequences::gather(
        cx.steps.len().max(1),
        gpu.len(),
        t.cpu.len() + gpu.len(),
        step_of,
        item,
        Times::of(t, false),
    )
}

/// The steps' sequences, each made at its size (a vector grown by pushes
/// holds up to twice its items), and the steps left out for their length
/// or their number.
pub(crate) struct Sequences {
    /// The first steps' sequences ([`MAX_STEPS`], [`MIN_ITEMS`]).
    pub items: Vec<Vec<Item>>,
    /// Steps of more than [`repeats::MAX_STEP_ITEMS`] items, left empty.
    pub past_bound: usize,
    /// Steps after those searched ([`MAX_STEPS`], [`MIN_ITEMS`]).
    pub past_steps: usize,
}

/// Most steps searched for layers: the first ones; the layers' figures are
/// theirs, and the layers' detail says how many more were not searched.
/// A model's layers show in any few of its steps; each further step only
/// costs its items' 16 bytes, and 40 more for its list, to the end of the
/// analysis. `shapes.py`'s `manysteps` (1.1 million CPU ops in 100,000
/// steps) held 15 MB of such lists, its CLI's peak 88 MB against its
/// budget of 84 (BENCHMARKS.md, issue 44). The most steps of any real
/// trace we have is 13 (`hta-mtia-inference-rank0`); of the generated
/// ones, 300 (the timeline's benchmark): 1,024 is three times that.
pub(crate) const MAX_STEPS: usize = 1 << 10;

/// Fewest items of the steps searched for layers, all steps together: the
/// first steps whose items add up to no more than the larger of this and
/// the trace's events over [`EVENTS_AN_ITEM`] are searched (the first one
/// always, within [`repeats::MAX_STEP_ITEMS`]); the layers' detail says
/// how many steps were not. An item costs about 19 bytes while the layers
/// are searched (13 held, the rest the search's), against the CLI's budget
/// of 32 an event (issue 44 item 3): `shapes.py`'s `steps` at 3 million CPU
/// ops (300 steps of 10,000 top-level ops) peaked at 148 MB against its 145
/// with every step's items, 106 MB with none (BENCHMARKS.md). 1,048,576
/// items is about 20 MB.
pub(crate) const MIN_ITEMS: usize = 1 << 20;

/// Events of the trace an item searched for layers, past [`MIN_ITEMS`]:
/// 19 bytes an item is then under 5 bytes an event. The generated 300-step
/// story, the most items of any trace we have, holds 1.8 million (6,000
/// GPU ops a step) in 14 million events (3.5 million items at 4 an item),
/// so every trace we have keeps all its steps' items.
pub(crate) const EVENTS_AN_ITEM: usize = 4;

/// How many of the first steps, of `counts` items each, are searched in a
/// trace of `events` events: at most [`MAX_STEPS`], and only while their
/// items (those of steps within [`repeats::MAX_STEP_ITEMS`]) add up to no
/// more than [`MIN_ITEMS`] or the events over [`EVENTS_AN_ITEM`]; the first
/// step always.
fn searched_steps(counts: &[usize], events: usize) -> usize {
    let most = MIN_ITEMS.max(events / EVENTS_AN_ITEM);
    let mut total = 0usize;
    let mut n = 0;
    for &c in counts.iter().take(MAX_STEPS) {
        if c <= repeats::MAX_STEP_ITEMS {
            total += c;
        }
        if n > 0 && total > most {
            break;
        }
        n += 1;
    }
    n
}

impl Sequences {
    /// The sequences of `steps` steps over `rows` rows of a trace of
    /// `events` CPU and GPU slices: each row's step (`None`: in none),
    /// counted first so that each sequence is made at its size, then its
    /// item, in time order.
    fn gather(
        steps: usize,
        rows: usize,
        events: usize,
        mut step_of: impl FnMut(usize) -> Option<usize>,
        mut item: impl FnMut(usize) -> Item,
        times: Times,
    ) -> Sequences {
        let mut counts = vec![0usize; steps.min(MAX_STEPS)];
        for i in 0..rows {
            if let Some(s) = step_of(i).filter(|&s| s < counts.len()) {
                counts[s] += 1;
            }
        }
        let searched = searched_steps(&counts, events);
        counts.truncate(searched);
        let mut seqs = Sequences::sized(counts);
        seqs.past_steps = steps - searched;
        for i in 0..rows {
            crate::cancel::point(i);
            if let Some(s) = step_of(i).filter(|&s| s < searched && seqs.searched(s)) {
                seqs.items[s].push(item(i));
            }
        }
        in_time_order(&mut seqs.items, times);
        seqs
    }

    /// Empty sequences for steps of `counts` items each.
    fn sized(counts: Vec<usize>) -> Sequences {
        let past_bound = counts
            .iter()
            .filter(|&&c| c > repeats::MAX_STEP_ITEMS)
            .count();
        let items = counts
            .into_iter()
            .map(|c| Vec::with_capacity(if c > repeats::MAX_STEP_ITEMS { 0 } else { c }))
            .collect();
        Sequences {
            items,
            past_bound,
            past_steps: 0,
        }
    }

    /// Whether step `s`'s items are kept.
    fn searched(&self, s: usize) -> bool {
        self.items[s].capacity() > 0
    }
}

/// Each step's items by start (ties by table order).
fn in_time_order(seqs: &mut [Vec<Item>], times: Times) {
    for s in seqs {
        // Unstable: `at` is unique, so the order is the same, without the
        // stable sort's buffer of half the items.
        s.sort_unstable_by_key(|it| (times.start(it), it.at));
    }
}

/// A trace without GPU ops: the top-level ops of each step (ops inside no
/// other op) on the thread whose top-level ops take the most time. A range
/// around compiled code (`torch.compile`'s `Torch-Compiled Region`) is no
/// op of the model: the ops inside it are top-level.
fn cpu_sequences(cx: &Context) -> Sequences {
    let t = cx.t;
    let cpu = &t.cpu;
    let regions: std::cell::RefCell<HashMap<Sym, bool>> = Default::default();
    let region = |i: usize| {
        *regions
            .borrow_mut()
            .entry(cpu.name()[i])
            .or_insert_with(|| super::steps::is_compiled_region(t.name(cpu.name()[i])))
    };
    let top_level = |i: usize| {
        let mut p = cx.links.parent.get(i);
        while p != NO {
            if cpu.kind()[p as usize] == CpuKind::Op && !region(p as usize) {
                return false;
            }
            p = cx.links.parent.get(p as usize);
        }
        true
    };
    // The top-level ops are walked again (for the main thread, then to
    // count and to list each step's) rather than listed: at a few million
    // CPU ops, their list and its growth were 33 MB of the CLI's peak
    // (`few3m` in BENCHMARKS.md).
    let is_top = |i: usize| cpu.kind()[i] == CpuKind::Op && top_level(i) && !region(i);
    let mut by_track: HashMap<u32, i64> = HashMap::new();
    for i in 0..cpu.len() {
        if is_top(i) {
            *by_track.entry(cpu.track().get(i)).or_default() += cpu.dur().get(i);
        }
    }
    let Some(main) = by_track
        .into_iter()
        .max_by_key(|&(track, ns)| (ns, std::cmp::Reverse(track)))
        .map(|(track, _)| track)
    else {
        // No op to list: every step's sequence empty, bounded as any.
        let none = |_: usize| -> Item { unreachable!("no row is listed") };
        return Sequences::gather(
            cx.steps.len().max(1),
            0,
            0,
            |_| None,
            none,
            Times::of(t, true),
        );
    };
    let mut at_step = super::steps::StepCursor::new(&cx.steps);
    let step_of = |i: usize| {
        if cpu.track().get(i) != main || !is_top(i) {
            None
        } else if cx.steps.is_empty() {
            Some(0)
        } else {
            at_step.at(cpu.ts().get(i))
        }
    };
    // Per name, its role, or that its inputs tell it (a convolution's):
    // then per name and `Input Dims`.
    let mut roles: HashMap<Sym, Option<Role>> = HashMap::new();
    let mut by_inputs: HashMap<(Sym, Sym), Role> = HashMap::new();
    let item = |i: usize| {
        let name = cpu.name()[i];
        let role = roles.entry(name).or_insert_with(|| {
            let text = t.name(name);
            (!names::role_needs_inputs(text)).then(|| repeats::role_of(text))
        });
        let role = match *role {
            Some(role) => role,
            None => *by_inputs
                .entry((name, cpu.shapes(i)))
                .or_insert_with(|| names::op_role(t.name(name), t.name(cpu.shapes(i)))),
        };
        Item {
            at: i as u32,
            name,
            group: u32::MAX,
            role,
        }
    };
    let mut seqs = Sequences::gather(
        cx.steps.len().max(1),
        cpu.len(),
        cpu.len() + t.gpu.len(),
        step_of,
        item,
        Times::of(t, true),
    );
    if cx.steps.is_empty() {
        if let [seq] = seqs.items.as_mut_slice() {
            let nested = |i: usize| {
                cpu.track().get(i) == main && cpu.kind()[i] == CpuKind::Op && !top_level(i)
            };
            without_cut_parents(cx, nested, seq);
        }
    }
    seqs
}

/// The one sequence of a trace without step marks, less the ops at either
/// end whose parent the profile cut: a profile opened inside an op
/// (`aten::linear`) records the ops it calls after (`aten::mm`), and one
/// closed inside an op records those it called before, each then a
/// top-level op of its own. Such an op is told by a name that runs at the
/// top level only near that end, but inside another op elsewhere on the
/// thread.
/// They made the ends of the CPU generations kept from 35% to 70% and 55%
/// to 85% of their span unlike any pass (`generate-dense-6l`: `reshape`,
/// `mm`, `_unsafe_view` first; `generate-moe-4l`: `empty_like` last), so
/// their one whole pass was not found: 11 and 6 layers of 6 and 4.
fn without_cut_parents(cx: &Context, nested: impl Fn(usize) -> bool, seq: &mut Vec<Item>) {
    let cpu = &cx.t.cpu;
    if seq.is_empty() {
        return;
    }
    // Names run inside another op on the main thread.
    let nested: hashbrown::HashSet<Sym> = (0..cpu.len())
        .filter(|&i| nested(i))
        .map(|i| cpu.name()[i])
        .collect();
    // Each name's first and last place in the sequence.
    let mut at: HashMap<Sym, (usize, usize)> = HashMap::new();
    for (i, it) in seq.iter().enumerate() {
        at.entry(it.name).or_insert((i, i)).1 = i;
    }
    // What runs before such an op ran inside the op the profile cut too
    // (`aten::reshape`, then the `aten::mm` of a cut `aten::matmul`): the
    // sequence starts after the last within the first few items, and ends
    // before the first within the last few: a prologue's bound of them
    // (borrowed, not chosen by a trace: a cut op's children were 1 to 4
    // in the generations' windows, and a layer's names run all along).
    let near = Passes::MAX_PROLOGUE.min(seq.len());
    let head = seq[..near]
        .iter()
        .rposition(|it| {
            let name = it.name;
            at[&name].1 < near && nested.contains(&name)
        })
        .map_or(0, |j| j + 1);
    let near = Passes::MAX_PROLOGUE.min(seq.len() - head);
    let from = seq.len() - near;
    let tail = seq[from..]
        .iter()
        .position(|it| {
            let name = it.name;
            at[&name].0 >= from && nested.contains(&name)
        })
        .map_or(0, |j| near - j);
    seq.truncate(seq.len() - tail);
    seq.drain(..head);
}

/// The layer of each GPU op (by index), where one was found: a vector, not a
/// map, since most GPU ops of a layered trace have one; 4 bytes a row, as
/// it is held beside the op table at the analysis's peak.
struct GpuLayers {
    of: Vec<i32>,
    set: usize,
}

impl GpuLayers {
    const NONE: i32 = i32::MIN;

    /// For the GPU ops, or (`cpu`) the CPU slices.
    fn new(t: &Tables, cpu: bool) -> Self {
        GpuLayers {
            of: vec![Self::NONE; if cpu { t.cpu.len() } else { t.gpu.len() }],
            set: 0,
        }
    }

    /// Sets the layer of row `g`; an index past `i32` (a name no model's
    /// layer has) sets none.
    fn insert(&mut self, g: u32, layer: i64) {
        let Some(layer) = i32::try_from(layer).ok().filter(|&l| l != Self::NONE) else {
            return;
        };
        let slot = &mut self.of[g as usize];
        self.set += (*slot == Self::NONE) as usize;
        *slot = layer;
    }

    fn get(&self, g: u32) -> Option<i64> {
        self.of
            .get(g as usize)
            .filter(|&&l| l != Self::NONE)
            .map(|&l| i64::from(l))
    }

    fn is_empty(&self) -> bool {
        self.set == 0
    }

    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.of
            .iter()
            .filter(|&&l| l != Self::NONE)
            .map(|&l| i64::from(l))
    }
}

struct Assignment {
    layer: GpuLayers,
    method: LayerMethod,
    confidence: f64,
    period: Option<u64>,
    marker: Option<String>,
    detail: String,
    /// Where each forward pass starts in the one sequence of a trace
    /// without step marks that runs it several times ([`Passes`]); empty
    /// otherwise. The layers' figures are per pass then.
    pass_starts: Vec<usize>,
    /// Steps that ran GPU ops and hold no layers: training steps LayerDrop
    /// cut short ([`repeats::find`]), in step order. The layers' figures leave them out.
    short: Vec<usize>,
}

/// A layer's span in one step: (layer index, first start, last end), ns.
pub type LayerSpan = (i64, i64, i64);

/// The layers found in the GPU ops, before their numbers: the steps' GPU op
/// sequences and each op's layer. Needs no kernel table, so it is found
/// while the tables are made ([`find`], then [`numbers`]).
pub(crate) struct Found {
    seqs: Vec<Vec<Item>>,
    /// Steps left out of the search for their length.
    past_bound: usize,
    /// Steps after those searched ([`MAX_STEPS`], [`MIN_ITEMS`]).
    past_steps: usize,
    assignment: Option<Assignment>,
    /// The items are CPU ops (a trace without GPU ops).
    cpu: bool,
}

/// The layers found, and where each lies in each step.
pub(crate) struct Placed {
    /// What [`numbers`] attributes time to.
    pub layers: Found,
    /// Each layer's span in each step (the timeline's layers band).
    pub spans: Vec<LayerSpan>,
}

/// The steps' sequences, and whether their items are CPU ops (a trace
/// without GPU ops).
fn sequences(cx: &Context) -> (Sequences, bool) {
    let cpu = cx.gpu_op_ns == 0 && !(0..cx.t.gpu.len()).any(|g| cx.t.gpu.kind()[g].is_gpu_op());
    let seqs = if cpu {
        cpu_sequences(cx)
    } else {
        step_sequences(cx)
    };
    (seqs, cpu)
}

/// Least share of each marked step's sequence that the pieces [`anchored`]
/// cuts must cover for [`may_hold_passes`] to search a trace of several
/// steps for passes: whole passes cover a step but for its prologue (the
/// H200 story's six passes in two steps: 7,822 of 7,824 items; the hybrid
/// graph's, three steps of two: 2,919 of 2,928), where a name run a few
/// times at a step's end cuts crumbs (`torch-h200-train-gpt6`'s optimizer:
/// 5 items of 562, and the search it set off cost 28% of the analysis).
/// With its first pass not told whole, a step of three passes covers 2/3.
const MIN_PASSES_SHARE: f64 = 0.5;

/// Whether a trace's marked steps (several: one step is searched for
/// passes whole, `analysis::passes_in_steps`) may each run the forward
/// pass several times, without the layer search: where a name cuts every
/// step's sequence into alike pieces ([`anchored`]) that cover most of it
/// ([`MIN_PASSES_SHARE`]; a step of one decode pass has no such name, so
/// a marked trace of such steps pays for building its steps' sequences and
/// scanning the first, and no search: no change beyond noise on the
/// generated 30-step story, BENCHMARKS.md).
pub(crate) fn may_hold_passes(cx: &Context) -> bool {
    let (seqs, cpu) = sequences(cx);
    match seqs.items.as_slice() {
        [] => false,
        all => all.iter().all(|seq| {
            anchored(seq, |it| item_row(cx, cpu, it).is_some(), Anchoring::Marked).is_some_and(
                |(starts, end)| {
                    starts.len() >= 2
                        && (end - starts[0]) as f64 >= MIN_PASSES_SHARE * seq.len() as f64
                },
            )
        }),
    }
}

/// Whether every marked step calls one compiled graph twice or more
/// ([`compiled_calls`]), the calls covering [`MIN_PASSES_SHARE`] of its
/// CPU span or more, so that [`compiled_passes`] may tell its passes: the
/// four denoiser calls of `tracelens-mi300x-xdit-sd3.5-infer` cover 83%
/// of its one step. A graph that is a piece of a layer (a MoE layer's
/// graph breaks) is called in every step too, but covers less than half
/// of some step: 4% to 62% in the compiled CPU captures
/// (`tests/captures/*compile*`), under half in at least one step of each,
/// so no search is spent on them.
pub(crate) fn compiled_calls_cover_steps(cx: &Context) -> bool {
    let Some(calls) = compiled_calls(cx.t) else {
        return false;
    };
    !cx.steps.is_empty()
        && cx.steps.iter().all(|step| {
            let inside = calls
                .iter()
                .filter(|&&(_, ts, _)| step.ts <= ts && ts < step.end);
            let (n, ns) = inside.fold((0, 0), |(n, ns), &(_, ts, end)| (n + 1, ns + end - ts));
            n >= 2 && ns as f64 >= MIN_PASSES_SHARE * (step.end - step.ts) as f64
        })
}

/// Finds the layers, and where each lies in each step.
pub(crate) fn find(cx: &Context, opts: &AnalysisOptions) -> Placed {
    let (
        Sequences {
            items: seqs,
            past_bound,
            past_steps,
        },
        cpu,
    ) = sequences(cx);
    let assignment = if opts.layer_marker.is_some() || opts.layer_period.is_some() {
        by_override(cx, &seqs, opts, cpu)
    } else {
        by_annotation(cx, &seqs, cpu)
            .or_else(|| by_module(cx, &seqs, cpu))
            .or_else(|| by_repetition(cx, &seqs, cpu))
    };
    let spans = match &assignment {
        Some(a) => spans(&seqs, a, Times::of(cx.t, cpu)),
        None => Vec::new(),
    };
    Placed {
        layers: Found {
            seqs,
            past_bound,
            past_steps,
            assignment,
            cpu,
        },
        spans,
    }
}

/// How the forward passes of a trace without step marks were told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PassesFrom {
    /// By their prologue, cutting the layers of the one sequence
    /// ([`Passes`]): the layers are already a pass's.
    Prologue,
    /// Where the sequence's first ops run again ([`restarts`]), when its
    /// layers showed no passes (every layer key runs too often to be
    /// tried: 32 layers of 64 passes are 2,048 runs of each layer's names;
    /// or a key in only some layers cut it): they are passes only if the
    /// layers found in each, as steps, are two or more ([`holds_passes`]).
    Restarts,
    /// Where a name that runs once a pass runs again, the sequence from it
    /// on repeating whole ([`anchored`]): the profile opened inside a pass,
    /// so the sequence's first ops are a layer's tail, which runs again in
    /// every layer. What comes before the first such name is no pass.
    /// Passes only if each holds two layers or more, as [`Self::Restarts`].
    Anchor,
    /// By the calls of a graph `torch.compile` compiled, called twice or
    /// more ([`compiled_passes`]): passes only if each holds two layers or
    /// more, as [`Self::Restarts`].
    Compiled,
}

/// A pass's first op name and CPU span (start, end), ns.
pub(crate) type PassSpan = (Sym, i64, i64);

/// One way of telling a trace's forward passes ([`prologue_passes`],
/// [`anchored_passes`], [`restart_passes`]).
pub(crate) type PassFinder = fn(&Context, &Placed) -> Option<Vec<PassSpan>>;

/// The forward passes of a trace without step marks that runs its pass
/// several times, told by their prologue cutting the layers of its one
/// sequence ([`Passes`]): each pass's first op name and CPU span
/// ([`pass_spans`]). `None` where the layers show no passes.
pub(crate) fn prologue_passes(cx: &Context, placed: &Placed) -> Option<Vec<PassSpan>> {
    let (seq, cpu) = head_starts_a_pass(cx, placed)?;
    let a = placed.layers.assignment.as_ref()?;
    let starts = &a.pass_starts;
    (starts.len() >= 2).then_some(())?;
    // What runs after the last pass is no pass's ([`after_passes`]): a
    // diffusion pipeline's VAE, whose attention made the last pass's
    // layers one more (FLUX, `hf/flux-2d4s-*`).
    let end = after_passes(seq, starts);
    pass_spans(cx, &seq[..end], cpu, starts)
}

/// The forward passes of a trace without step marks where the first ops
/// of its one sequence run again ([`restarts`]): each pass's first op name
/// and CPU span.
pub(crate) fn restart_passes(cx: &Context, placed: &Placed) -> Option<Vec<PassSpan>> {
    let (seq, cpu) = head_starts_a_pass(cx, placed)?;
    pass_spans(cx, seq, cpu, &restarts(seq)?)
}

/// The forward passes of a trace that calls one graph `torch.compile`
/// compiled several times, each call a pass: the calls' CPU spans (see
/// [`compiled_calls`]). A diffusion pipeline runs its denoiser once a
/// denoising step, inside one marked step between its text encoders and
/// its VAE (`tracelens-mi300x-xdit-sd3.5-infer`: 4 calls of SD3.5's
/// transformer, 38 blocks each, after two CLIP towers; no name runs once a
/// call, so [`anchored`] finds no passes). Where a graph is a piece of a
/// layer (graph breaks in MoE layers, vLLM's piecewise graphs), its calls
/// hold fewer than two layers each, and are no passes ([`holds_passes`],
/// which the caller asks).
pub(crate) fn compiled_passes(cx: &Context, _placed: &Placed) -> Option<Vec<PassSpan>> {
    compiled_calls(cx.t)
}

/// The calls of the compiled graph (`## Call CompiledFxGraph <hash> ##`,
/// one hash a graph) called twice or more, one after another, whose calls
/// take the most CPU time together: each call's name and CPU span. `None`
/// where no graph is called twice, or the chosen graph's calls overlap.
pub(crate) fn compiled_calls(t: &Tables) -> Option<Vec<PassSpan>> {
    let graphs: hashbrown::HashSet<Sym> = (0..t.names.len() as Sym)
        .filter(|&s| t.name(s).starts_with(super::steps::COMPILED_GRAPH_CALL))
        .collect();
    if graphs.is_empty() {
        return None;
    }
    let cpu = &t.cpu;
    let mut calls: HashMap<Sym, Vec<(i64, i64)>> = HashMap::new();
    for (r, name) in cpu.name().iter().enumerate() {
        if graphs.contains(name) {
            let ts = cpu.ts().get(r);
            calls
                .entry(*name)
                .or_default()
                .push((ts, ts + cpu.dur().get(r)));
        }
    }
    let total = |spans: &[(i64, i64)]| spans.iter().map(|(a, b)| b - a).sum::<i64>();
    let (name, mut spans) = calls
        .into_iter()
        .filter(|(_, spans)| spans.len() >= 2)
        .max_by_key(|(name, spans)| (total(spans), std::cmp::Reverse(*name)))?;
    spans.sort_unstable();
    spans
        .windows(2)
        .all(|w| w[0].1 <= w[1].0)
        .then(|| spans.iter().map(|&(ts, end)| (name, ts, end)).collect())
}

/// The one sequence of a trace without step marks, and whether its items
/// are CPU ops, where its head may start a pass: [`prologue_passes`] and
/// [`restart_passes`] read it so. Where its first GPU op was launched
/// before the profile opened, the head is the end of a pass the profile
/// caught inside ([`anchored_passes`] then).
fn head_starts_a_pass<'a>(cx: &Context, placed: &'a Placed) -> Option<(&'a [Item], bool)> {
    let found = &placed.layers;
    let [seq] = found.seqs.as_slice() else {
        return None;
    };
    item_row(cx, found.cpu, seq.first()?)?;
    Some((seq, found.cpu))
}

/// Where the first ops of a sequence run again, in the same order: for a
/// name among its first [`Passes::MAX_PROLOGUE`] items, first at `j`, each
/// place it runs again, `j` items back, where the `j + 1` items from there
/// have the first `j + 1` items' names. The name that cuts the fewest
/// pieces (two or more) wins, the earliest of those: a pass's embedding
/// runs once a pass, where a layer's names, run in every layer, are never
/// preceded by the pass's first items. Each piece starts at the first;
/// none overlaps the next.
fn restarts(seq: &[Item]) -> Option<Vec<usize>> {
    let head = seq.len().min(Passes::MAX_PROLOGUE);
    let mut first_at: HashMap<Sym, usize> = HashMap::new();
    for (j, it) in seq[..head].iter().enumerate() {
        first_at.entry(it.name).or_insert(j);
    }
    let mut at: HashMap<Sym, Vec<usize>> = first_at.keys().map(|&k| (k, Vec::new())).collect();
    for (i, it) in seq.iter().enumerate() {
        let name = it.name;
        if let Some(v) = at.get_mut(&name) {
            v.push(i);
        }
    }
    let same = |s: usize, j: usize| {
        s + j < seq.len()
            && seq[s..=s + j]
                .iter()
                .zip(&seq[..=j])
                .all(|(x, y)| x.name == y.name)
    };
    let mut best: Option<(usize, usize, Vec<usize>)> = None;
    for (name, &j) in &first_at {
        let occ = &at[name];
        let better = |b: &(usize, usize, Vec<usize>)| (occ.len(), j) < (b.1, b.0);
        if occ.len() < 2 || best.as_ref().is_some_and(|b| !better(b)) {
            continue;
        }
        let starts: Vec<usize> = occ.iter().map(|&o| o - j).collect();
        if starts.windows(2).all(|w| w[1] > w[0] + j) && starts.iter().all(|&s| same(s, j)) {
            best = Some((j, occ.len(), starts));
        }
    }
    best.map(|b| b.2)
}

/// [`anchored_passes`] but the last, where it runs to the end of the
/// sequence and holds fewer items than the one before: the profile may
/// have closed inside it. A pass cut short by the end of the
/// profile has fewer layers than the others (`unmarked/generate-dense-6l`
/// kept from 50% to 95% of its span, one whole pass and then 70% of one,
/// made 15 layers of 6). One pass is left alone only where it starts the
/// sequence, or what comes before it is a pass's tail ([`tail_of`]).
pub(crate) fn anchored_but_last(cx: &Context, placed: &Placed) -> Option<Vec<PassSpan>> {
    let found = &placed.layers;
    let [seq] = found.seqs.as_slice() else {
        return None;
    };
    let (mut starts, end) = anchored(
        seq,
        |it| item_row(cx, found.cpu, it).is_some(),
        Anchoring::Unmarked,
    )?;
    // Only a last piece that runs to the end, shorter than the one before.
    let last = starts
        .pop()
        .filter(|_| end == seq.len() && !starts.is_empty())?;
    let before = starts[starts.len() - 1];
    let lone = starts.len() == 1 && starts[0] > 0;
    if end - last >= last - before || (lone && !tail_of(&seq[..starts[0]], &seq[starts[0]..last])) {
        return None;
    }
    pass_spans(cx, &seq[..last], found.cpu, &starts)
}

/// The forward passes of a trace without step marks whose profile opened
/// inside a pass ([`PassesFrom::Anchor`]): each pass's first op name and
/// CPU span, from the first whole pass on. `None` where no name cuts the
/// sequence into alike pieces.
pub(crate) fn anchored_passes(cx: &Context, placed: &Placed) -> Option<Vec<PassSpan>> {
    let found = &placed.layers;
    let [seq] = found.seqs.as_slice() else {
        return None;
    };
    let (starts, end) = anchored(
        seq,
        |it| item_row(cx, found.cpu, it).is_some(),
        Anchoring::Unmarked,
    )?;
    pass_spans(cx, &seq[..end], found.cpu, &starts)
}

/// [`anchored_passes`] with what comes before the first as one more pass,
/// where that is no pass by [`anchored`]'s own rules (neither whole nor
/// whole but for a few stray items) and is as long as a pass or longer: a
/// generation's first pass, its prefill, which may run more ops than the
/// passes after it (Hugging Face's GPT-2, OPT and GPT-BigCode make their
/// cache's tensors in every layer of the prefill alone, and check their
/// inputs before it: 338 items before the first anchor, 276 a pass after
/// it). A pass's tail, where the profile opened inside one, is shorter
/// than a pass (as long as half one, the compiled H200 capture opened 15%
/// into its window holds every layer, the first cut short, and the MoE
/// CPU capture's windows as many; `real_captures::
/// traces_without_step_marks_have_their_passes_as_steps`,
/// `captures::windows_that_hold_a_whole_pass_mostly_have_the_models_layers`).
/// A pass only where its layers are those of every other pass
/// ([`holds_passes`], which the caller asks).
pub(crate) fn anchored_with_head(cx: &Context, placed: &Placed) -> Option<Vec<PassSpan>> {
    let found = &placed.layers;
    let [seq] = found.seqs.as_slice() else {
        return None;
    };
    let (mut starts, end) = anchored(
        seq,
        |it| item_row(cx, found.cpu, it).is_some(),
        Anchoring::Unmarked,
    )?;
    let (first, next) = (starts[0], *starts.get(1)?);
    if first == 0 || first < next - first {
        return None;
    }
    starts.insert(0, 0);
    pass_spans(cx, &seq[..end], found.cpu, &starts)
}

/// Most run counts [`anchored`] tries, fewest runs first: the names run once
/// a pass have the fewest runs but for a name run in only some passes (a
/// cache grown now and then), which rarely makes more than a few counts.
/// Each try is a scan of the sequence.
const ANCHOR_COUNTS: usize = 16;

/// Most names of one run count [`anchored`] tries, the earliest first: a
/// name may run as often as a pass's in a prefill alone (Qwen2.5-VL's
/// vision tower runs a `permute` four times before the first pass's
/// embedding, the second name of four runs; `hf/qwen25vl-3v4l-generate`
/// had no passes with one). Each try is a scan of the sequence.
const ANCHOR_NAMES: usize = 4;

/// Where [`anchored`] looks for passes: in the one sequence of a trace
/// without step marks (a generation), or in marked steps
/// ([`may_hold_passes`]), which look only as they did before the
/// generations' rules ([`ANCHOR_NAMES`]; in [`pieces_alike`], a prefill
/// first and a name run once): with them, a marked step's names cut alike pieces
/// that hold no passes, and the search that follows cost 24% more
/// instructions on the H200 story (`torch-h200-decode-fp8cast-78l-5xpool`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Anchoring {
    Unmarked,
    Marked,
}

impl Anchoring {
    /// Names of one run count tried.
    fn names(self) -> usize {
        match self {
            Anchoring::Unmarked => ANCHOR_NAMES,
            Anchoring::Marked => 1,
        }
    }
}

/// Where the passes of a sequence that starts inside a pass begin, and
/// where the last ends: at each run of the name with the fewest runs (two
/// or more) whose runs cut the sequence, from its first run on, into alike
/// pieces ([`pieces_alike`]). The sequence from there repeats, so each
/// piece is a pass; a model run once has its head (the final norm and the
/// logits) only after its last layer, so no piece of it is like the
/// others. Of the names run that often, the anchor is the first to run
/// whose runs cut alike pieces, of the first [`Anchoring::names`] (a kernel
/// Inductor made for the first layer alone, in
/// `torch-h200-decode-compiled-8l`, runs once a pass too, inside it). What
/// comes before the first run is a pass too where it is a whole one but
/// for the items from the anchor on ([`whole_before`]), or but for a few
/// items of the pass before it ([`stray_before`]); a last piece cut short
/// by the end of the profile, less than half the first, is no pass. One
/// pass is left where the profile also closed inside the next: where it
/// starts the sequence, or what comes before it is a pass's tail
/// ([`tail_of`]).
fn anchored(
    seq: &[Item],
    launched: impl Fn(&Item) -> bool,
    how: Anchoring,
) -> Option<(Vec<usize>, usize)> {
    let mut runs: HashMap<Sym, (usize, usize)> = HashMap::new();
    for (i, it) in seq.iter().enumerate() {
        runs.entry(it.name).or_insert((i, 0)).1 += 1;
    }
    let mut counts: Vec<usize> = runs.values().map(|&(_, n)| n).filter(|&n| n >= 2).collect();
    counts.sort_unstable();
    counts.dedup();
    // The names tried, fewest runs first, then the earliest first run.
    let mut tries: Vec<Sym> = Vec::new();
    for &c in counts.iter().take(ANCHOR_COUNTS) {
        let mut names: Vec<(usize, Sym)> = runs
            .iter()
            .filter(|(_, &(_, n))| n == c)
            .map(|(&name, &(first, _))| (first, name))
            .collect();
        names.sort_unstable();
        tries.extend(names.into_iter().take(how.names()).map(|(_, name)| name));
    }
    for anchor in tries {
        let mut starts: Vec<usize> = (0..seq.len()).filter(|&i| seq[i].name == anchor).collect();
        let generation = how == Anchoring::Unmarked;
        let mut end = match generation {
            true => after_passes(seq, &starts),
            false => seq.len(),
        };
        let Some(stable) = pieces_alike(&seq[..end], &starts, generation) else {
            continue;
        };
        let first = &seq[starts[0]..starts[1]];
        if let [.., from] = starts[..] {
            if (end - from) * 2 < first.len() {
                end = from;
                starts.pop();
            }
        }
        if whole_before(&seq[..starts[0]], first, &stable, &launched) {
            starts.insert(0, 0);
        } else if let Some(k) = stray_before(seq, starts[0], first, &stable, &launched) {
            starts.insert(0, k);
        }
        let lone = starts.len() == 1
            && end < seq.len()
            && (starts[0] == 0 || tail_of(&seq[..starts[0]], first));
        return (starts.len() >= 2 || lone).then_some((starts, end));
    }
    None
}

/// Where the last of the pieces of `seq` that start at `starts` ends in a
/// generation: where a name runs more often in it than in any other piece,
/// and twice or more (a name run once says nothing: BART forces its end
/// token in its last pass); else the sequence's end. A generation reads
/// its output over after its last pass (Hugging Face's Whisper: `unbind`,
/// then a `select`, an `eq` and an `is_nonzero` a token, then `pad` and
/// `stack`), which no pass runs; its passes were no passes with it, and
/// the generation had no steps. Only where what follows is shorter than
/// any pass: a name run twice early in the sequence cuts pieces of a
/// few items, whose last runs past them the rest of the sequence (Whisper's
/// two convolutions, before its encoder's layers).
fn after_passes(seq: &[Item], starts: &[usize]) -> usize {
    let Some((&last, before)) = starts.split_last().filter(|(_, b)| !b.is_empty()) else {
        return seq.len();
    };
    let mut most: HashMap<Sym, u32> = HashMap::new();
    for (k, &from) in before.iter().enumerate() {
        for (name, n) in name_counts(&seq[from..starts[k + 1]]) {
            let m = most.entry(name).or_default();
            *m = (*m).max(n);
        }
    }
    let mut runs: HashMap<Sym, u32> = HashMap::new();
    for (i, it) in seq.iter().enumerate().skip(last) {
        let n = runs.entry(it.name).or_default();
        *n += 1;
        if *n >= 2 && *n > most.get(&{ it.name }).copied().unwrap_or(0) {
            // Shorter than any pass: the output read over, not a pass.
            let shortest = before.iter().zip(&starts[1..]).map(|(a, b)| b - a).min();
            return match shortest.is_some_and(|p| seq.len() - i < p) {
                true => i,
                false => seq.len(),
            };
        }
    }
    seq.len()
}

/// Where a whole pass before `piece` (which starts at `at`) starts, where
/// a few items of the pass before it come first ([`whole_before`] of what
/// follows them): the part before `piece` is longer than `piece` less its
/// prologue (its first items, each run once in it). A profile opened at the
/// end of a pass caught its last items (`unmarked/generate-dense-6l` kept
/// from 45% to 90% of its span: a `select` and a `view`, then a whole
/// pass, 14 layers of 6 without this); at most a prologue's bound of them
/// ([`Passes::MAX_PROLOGUE`], borrowed, not chosen by a trace: this
/// window's were 2).
fn stray_before(
    seq: &[Item],
    at: usize,
    piece: &[Item],
    stable: &hashbrown::HashSet<Sym>,
    launched: impl Fn(&Item) -> bool,
) -> Option<usize> {
    let counts = name_counts(piece);
    let prologue = piece
        .iter()
        .take(Passes::MAX_PROLOGUE)
        .take_while(|it| counts[&{ it.name }] == 1)
        .count();
    let k = at.checked_sub(piece.len() - prologue)?;
    (k > 0 && k <= Passes::MAX_PROLOGUE && whole_before(&seq[k..at], piece, stable, launched))
        .then_some(k)
}

/// Whether `part`, before a lone whole pass `pass` (the profile opened
/// inside the pass before it and closed inside the one after), is the tail
/// of a pass: shorter than `pass`, and no name of its own (a model run
/// once runs its embedding before the piece a name that runs twice in it
/// cuts, and that is no pass). How often each name runs is not compared:
/// a MoE pass routes to other experts than the one before
/// (`unmarked/generate-moe-4l` kept from 10% to 60% of its span).
fn tail_of(part: &[Item], pass: &[Item]) -> bool {
    let want = name_counts(pass);
    !part.is_empty()
        && part.len() < pass.len()
        && part.iter().all(|it| want.contains_key(&{ it.name }))
}

/// How often each name runs in `items`.
fn name_counts(items: &[Item]) -> HashMap<Sym, u32> {
    let mut counts: HashMap<Sym, u32> = HashMap::new();
    for it in items {
        *counts.entry(it.name).or_default() += 1;
    }
    counts
}

/// Whether `part`, just before `piece`, is a whole pass but for the items
/// `piece` starts with: those run once a pass (the H200 story's `argmax`
/// and the copy after it end each pass, where the kernel of its embedding
/// also gathers the KV cache in every layer), at most
/// [`Passes::MAX_PROLOGUE`]; the rest like `piece`'s end (each of the
/// `stable` names, those run as often in every piece, as often, and no
/// name more often); every item of it `launched` in the profile (the GPU
/// ops of a pass the profile opened inside were launched before it). A
/// profile opened inside a pass cut its first ops, which run in every
/// layer (`torch-h200-decode-compiled-8l` opened 15% in: 4 of 178;
/// `torch-h200-decode-gathercast-78l-5xpool` 40% in: 8 of 2,452).
fn whole_before(
    part: &[Item],
    piece: &[Item],
    stable: &hashbrown::HashSet<Sym>,
    launched: impl Fn(&Item) -> bool,
) -> bool {
    let Some(short) = piece.len().checked_sub(part.len()) else {
        return false;
    };
    if part.is_empty() || short > Passes::MAX_PROLOGUE || !part.iter().all(launched) {
        return false;
    }
    let (have, want, all) = (
        name_counts(part),
        name_counts(&piece[short..]),
        name_counts(piece),
    );
    let n = |m: &HashMap<Sym, u32>, k: &Sym| m.get(k).copied().unwrap_or(0);
    piece[..short].iter().all(|it| n(&all, &{ it.name }) == 1)
        && have.keys().all(|k| n(&have, k) <= n(&want, k))
        && stable.iter().all(|k| n(&have, k) == n(&want, k))
}

/// The pieces of `seq` that start at `starts` (two or more) are alike when
/// no name runs more often in the last piece (where the profile may have
/// closed inside a pass) than in any other, a name run once in them all
/// aside (a model run once runs its
/// final norm after its last layer, once more than in any piece of layers
/// before it), and the names that run as often in every piece but the last
/// make at least [`STABLE_SHARE`] of the first piece. Their order is not
/// compared: the experts a MoE pass routes to, in the CPU capture
/// `unmarked/generate-moe-4l`, move the same ops around from pass to pass.
/// Those names, where the pieces are alike.
fn pieces_alike(
    seq: &[Item],
    starts: &[usize],
    generation: bool,
) -> Option<hashbrown::HashSet<Sym>> {
    let last = starts.len().checked_sub(1).filter(|&l| l > 0)?;
    let pieces: Vec<&[Item]> = (0..=last)
        .map(|k| &seq[starts[k]..starts.get(k + 1).copied().unwrap_or(seq.len())])
        .collect();
    let mut counts: HashMap<Sym, Vec<u32>> = HashMap::new();
    for (k, p) in pieces.iter().enumerate() {
        for it in p.iter() {
            counts
                .entry(it.name)
                .or_insert_with(|| vec![0; pieces.len()])[k] += 1;
        }
    }
    for c in counts.values() {
        let most = c[..last].iter().copied().max().unwrap_or(0);
        // In a generation, a name run once in all the pieces says nothing
        // of their likeness, wherever it runs: Hugging Face's BART forces
        // the end token in its last step (`full_like`, `index_fill_`),
        // which kept its generation from its passes
        // (`hf/bart-2e3d-generate`).
        if c[last] > most && (!generation || c[last] + c[..last].iter().sum::<u32>() > 1) {
            return None;
        }
    }
    // The names run as often in every piece from `from` on, but the last,
    // where they make STABLE_SHARE of the piece at `from`.
    let stable_from = |from: usize| {
        let mut stable = hashbrown::HashSet::new();
        let mut items = 0;
        for (&name, c) in &counts {
            let most = c[from..last].iter().copied().max().unwrap_or(0);
            if c[from..last].iter().all(|&n| n == most) {
                stable.insert(name);
                items += c[from] as usize;
            }
        }
        (items as f64 >= STABLE_SHARE * pieces[from].len() as f64).then_some(stable)
    };
    // The first piece may be a generation's prefill that runs every name
    // of the others and more: an encoder-decoder's decoder makes its
    // cache and projects the encoder's output in every layer of its first
    // pass alone (Hugging Face's BART: 234 items, then 162 a pass, 95 of
    // the 234 run as often in every pass). Only in a generation
    // ([`Anchoring`]).
    // A name the first piece never runs and the others each run as often
    // is the cache they extend, which the first makes (T5's decoders, a
    // `cat` a layer from the second pass on: `t5-6e6d`'s passes, 47% alike
    // by the first, were no passes without it).
    let first_more = || {
        let more = counts.values().all(|c| {
            let most = c[1..last].iter().copied().max().unwrap_or(0);
            c[0] >= most || (c[0] == 0 && c[1..last].iter().all(|&n| n == most))
        });
        (generation && last >= 2 && more)
            .then(|| stable_from(1))
            .flatten()
    };
    stable_from(0).or_else(first_more)
}

/// Least share of a pass's items whose names run as often in every pass
/// ([`pieces_alike`]): the rest are the experts a MoE pass routes to. The
/// passes of the CPU captures (`unmarked/generate-*`, MoE too) have every
/// name as often (1.0); the pieces a name run in some layers cuts have
/// 0.18-0.39 (`generate-moe-4l` opened 10% and 25% into it).
const STABLE_SHARE: f64 = 0.5;

impl Found {
    /// Whether any method found layers.
    pub(crate) fn any(&self) -> bool {
        self.assignment.is_some()
    }

    /// Whether names told the layers (annotations, module frames, the
    /// user's marker) rather than a repeat of the GPU ops, or nothing did.
    pub(crate) fn told_by_names(&self) -> bool {
        self.assignment
            .as_ref()
            .is_some_and(|a| a.method != LayerMethod::Repetition)
    }
}

/// Whether the layers found in each of a trace's would-be passes, taken
/// as steps, say that they are passes: the same two or more layers in
/// every pass. Layers told by their module's name are numbered by it, not
/// by pass: a piece per layer of `tracelens-h100-qwen1.5-0.5b-chat-infer`
/// (Python frames kept, step mark taken out) still numbered 24 layers, one
/// a pass; cut where a layer's name runs, each piece held two layers, the
/// end of one and the start of the next (23 pieces, once the last one,
/// the last layer and the head, was dropped as cut short).
pub(crate) fn holds_passes(placed: &Placed) -> bool {
    let mut sets = pass_layers(placed);
    let Some(first) = sets.next() else {
        return placed.layers.any();
    };
    first.len() >= 2 && sets.all(|s| s == first)
}

/// Layers a pass, where the passes are the steps ([`holds_passes`]: the
/// same in every pass): those of the first pass searched.
pub(crate) fn per_pass(placed: &Placed) -> usize {
    pass_layers(placed).next().map_or(0, |s| s.len())
}

/// The layer numbers in each searched pass (the steps), in order; none
/// where no layers were found. Passes left out of the search for their
/// length are empty, and skipped.
fn pass_layers(placed: &Placed) -> impl Iterator<Item = Vec<i64>> + '_ {
    let found = &placed.layers;
    found.assignment.iter().flat_map(move |a| {
        found
            .seqs
            .iter()
            .filter(|seq| !seq.is_empty())
            .map(move |seq| {
                let mut seen: Vec<i64> = seq.iter().filter_map(|it| a.layer.get(it.at)).collect();
                seen.sort_unstable();
                seen.dedup();
                seen
            })
    })
}

/// An item's CPU row: the op itself, or its GPU op's launch (`None` where
/// the launch is not in the trace).
fn item_row(cx: &Context, cpu_items: bool, it: &Item) -> Option<usize> {
    let r = if cpu_items {
        it.at
    } else {
        cx.links.launch.get(it.at as usize)
    };
    (r != NO).then_some(r as usize)
}

/// The CPU spans of the passes of sequence `seq` that start at `starts`:
/// each pass's first op name and span, from its first op to the next
/// pass's, the last to its last op's end. A GPU op's op is the outermost op
/// around its launch that holds no other pass's launch (`aten::embedding`,
/// not the cudaLaunchKernel inside it, nor a range around the whole
/// generation).
fn pass_spans(
    cx: &Context,
    seq: &[Item],
    cpu_items: bool,
    starts: &[usize],
) -> Option<Vec<PassSpan>> {
    let cpu = &cx.t.cpu;
    let (ts, end) = (
        |r: usize| cpu.ts().get(r),
        |r: usize| cpu.ts().get(r) + cpu.dur().get(r),
    );
    let row = |it: &Item| item_row(cx, cpu_items, it);
    let mut cuts = starts.to_vec();
    cuts.push(seq.len());
    // Passes none of whose GPU ops was launched in the profile (run after
    // it opened, launched before) are no passes: they have no CPU span.
    let launched = |w: &[usize]| seq[w[0]..w[1]].iter().any(|it| row(it).is_some());
    let unlaunched = cuts.windows(2).take_while(|w| !launched(w)).count();
    cuts.drain(..unlaunched);
    // Two passes or more; one where the finder found one alone
    // ([`anchored`]'s lone pass between two cut short).
    if cuts.len() < 2 || (unlaunched > 0 && cuts.len() < 3) {
        return None;
    }
    let passes: Vec<&[Item]> = cuts.windows(2).map(|w| &seq[w[0]..w[1]]).collect();
    // Each pass's first and last rows.
    let firsts: Vec<usize> = passes
        .iter()
        .map(|p| p.iter().find_map(row))
        .collect::<Option<_>>()?;
    let lasts: Vec<usize> = passes
        .iter()
        .map(|p| p.iter().rev().find_map(row))
        .collect::<Option<_>>()?;
    // The last row before the first pass, where the profile opened inside
    // a pass ([`PassesFrom::Anchor`]).
    let before = seq[..cuts[0]].iter().rev().find_map(row);
    let last_before = |k: usize| if k > 0 { Some(lasts[k - 1]) } else { before };
    // Row `r` of pass `k`, lifted to the outermost op inside the pass.
    let lift = |k: usize, mut r: usize| loop {
        let p = cx.links.parent.get(r);
        if p == NO
            || last_before(k).is_some_and(|l| ts(p as usize) <= ts(l))
            || firsts.get(k + 1).is_some_and(|&n| end(p as usize) > ts(n))
        {
            return r;
        }
        r = p as usize;
    };
    let mut out: Vec<PassSpan> = firsts
        .iter()
        .enumerate()
        .map(|(k, &r)| {
            let op = lift(k, r);
            (cpu.name()[op], ts(op), 0)
        })
        .collect();
    for k in 1..out.len() {
        out[k - 1].2 = out[k].1;
    }
    let k = passes.len() - 1;
    out[k].2 = passes[k]
        .iter()
        .filter_map(row)
        .map(|r| end(lift(k, r)))
        .max()?;
    Some(out)
}

/// Attributes device time (CPU time, on a trace without GPU ops) to the
/// layers found.
pub(crate) fn numbers(cx: &Context, kernels: &[KernelRow], found: Found) -> Layers {
    let Found {
        seqs,
        past_bound,
        past_steps,
        assignment,
        cpu,
    } = found;
    let mut layers = match assignment {
        Some(a) => summarize(cx, kernels, &seqs, a, cpu),
        None => Layers {
            method: LayerMethod::None,
            basis: if cpu {
                TimeBasis::Cpu
            } else {
                TimeBasis::Device
            },
            detail: if cpu {
                "the trace has no GPU ops, and no layer annotations, nn.Module layer frames or op sequence that repeats in every step".into()
            } else {
                "no layer annotations, no nn.Module layer frames, and no kernel sequence that cuts every step into alike layers".into()
            },
            ..Default::default()
        },
    };
    let passes = cx.steps.iter().filter(|s| s.pass.is_some()).count();
    if passes > 0 && layers.method != LayerMethod::None {
        layers.passes = passes as u64;
        let held = match cx.passes_in {
            Some((step, 1)) => format!(
                "the trace's one step, {}, runs its forward pass {passes} times",
                cx.t.name(step)
            ),
            Some((step, n)) => format!(
                "the trace's {n} steps ({}, ...) run the forward pass {passes} times, several times each",
                cx.t.name(step)
            ),
            None if passes == 1 => {
                "the trace has no step marks and holds one whole forward pass, between two the profile opened and closed inside".to_string()
            }
            None => format!("the trace has no step marks and runs its forward pass {passes} times"),
        };
        let each = if passes == 1 { "the pass" } else { "each pass" };
        layers.detail = format!(
            "{held}: {each} is a step, figures per pass; {}",
            layers.detail
        );
    }
    if past_bound > 0 {
        layers.detail.push_str(&format!(
            "; {past_bound} step(s) of more than {} {} were not searched for layers",
            repeats::MAX_STEP_ITEMS,
            if cpu { "top-level ops" } else { "GPU ops" },
        ));
    }
    if past_steps > 0 {
        layers.detail.push_str(&format!(
            "; the layers were searched in the first {} steps: the {past_steps} after them were not",
            seqs.len()
        ));
    }
    layers
}

/// Where each layer lies in each step (each pass, in a trace of passes
/// without step marks): the first start and last end of its GPU ops.
fn spans(seqs: &[Vec<Item>], a: &Assignment, times: Times) -> Vec<LayerSpan> {
    let mut out = Vec::new();
    let passes: Vec<&[Item]> = match seqs {
        [seq] if !a.pass_starts.is_empty() => {
            let mut cuts = a.pass_starts.clone();
            cuts.push(seq.len());
            cuts.windows(2).map(|w| &seq[w[0]..w[1]]).collect()
        }
        _ => seqs.iter().map(Vec::as_slice).collect(),
    };
    for seq in passes {
        let mut by_layer: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for it in seq {
            if let Some(l) = a.layer.get(it.at) {
                let e = by_layer.entry(l).or_insert((i64::MAX, i64::MIN));
                let ts = times.start(it);
                e.0 = e.0.min(ts);
                e.1 = e.1.max(ts + times.dur(it));
            }
        }
        out.extend(by_layer.into_iter().map(|(l, (s, e))| (l, s, e)));
    }
    out.sort_by_key(|&(l, s, _)| (s, l));
    out
}

/// Per-layer numbers (mean per step) from an assignment.
fn summarize(
    cx: &Context,
    kernels: &[KernelRow],
    seqs: &[Vec<Item>],
    a: Assignment,
    cpu: bool,
) -> Layers {
    let t = cx.t;
    let times = Times::of(t, cpu);
    let category: HashMap<&str, &str> = kernels
        .iter()
        .map(|k| (k.name.as_str(), k.category.as_str()))
        .collect();
    // Figures per step, or per pass where the trace runs passes unmarked.
    let held = seqs.len() - a.short.len();
    let steps = (held * a.pass_starts.len().max(1)).max(1) as f64;
    #[derive(Default)]
    struct Acc {
        ns: i64,
        by_cat: BTreeMap<String, i64>,
        ops: HashMap<Owner, i64>,
        kernels: HashMap<Sym, i64>,
        parts: Parts,
    }
    let mut layers: BTreeMap<i64, Acc> = BTreeMap::new();
    let mut outside = Acc::default();
    let mut backward = Backward::default();
    // `short` is in step order, so a binary search finds a step in it.
    let counted = (0..seqs.len()).filter(|s| a.short.binary_search(s).is_err());
    for (seq, k) in counted.flat_map(|s| (0..seqs[s].len()).map(move |k| (&seqs[s], k))) {
        let it = &seq[k];
        let idx = a.layer.get(it.at).unwrap_or(-1);
        let acc = if idx >= 0 {
            layers.entry(idx).or_default()
        } else {
            &mut outside
        };
        let d = times.dur(it);
        acc.ns += d;
        let name = t.name(it.name);
        // A layer's kind is told by its forward items: a training step's
        // backward run is cut where its layers' backward items are alike,
        // which need not be where each layer's starts (Llama 4 trained:
        // cut at attention's backward, each dense layer held the experts'
        // backward of the MoE layer below and was called MoE,
        // hf/llama4-4l-train).
        let role = if backward.is_backward(it.name, name) {
            Role::Other
        } else {
            it.role
        };
        match role {
            Role::Attention => acc.parts.attention = true,
            // A top-1 router's softmax (Switch Transformers: no top-k, no
            // expert named).
            Role::Scores if repeats::router(seq, k) == Some(Role::Top1) => acc.parts.moe = true,
            Role::Scores => acc.parts.scores = true,
            Role::Linear => acc.parts.linear = true,
            Role::Moe => acc.parts.moe = true,
            Role::TopK => acc.parts.topk = true,
            Role::Combine => acc.parts.combine = true,
            _ => {}
        }
        if cpu {
            // A top-level op: its CPU time, its category by the kernel rule.
            let cat = super::names::category(kinetoscope_types::GpuOpKind::Kernel, name);
            *acc.by_cat.entry(cat.as_str().to_string()).or_default() += d;
            *acc.ops.entry(Owner::Op(it.name)).or_default() += d;
            continue;
        }
        let cat = category.get(name).copied().unwrap_or("other");
        *acc.by_cat.entry(cat.to_string()).or_default() += d;
        if let Some(owner) = cx.owner(it.at as usize) {
            *acc.ops.entry(owner).or_default() += d;
        }
        *acc.kernels.entry(it.name).or_default() += d;
    }
    fn top<K: Ord + Copy + std::hash::Hash>(
        m: &HashMap<K, i64>,
        steps: f64,
        name: impl Fn(K) -> String,
    ) -> Vec<NameTime> {
        let mut v: Vec<(&K, &i64)> = m.iter().collect();
        v.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
        v.into_iter()
            .take(TOP)
            .map(|(k, ns)| NameTime {
                name: name(*k),
                us: *ns as f64 / 1e3 / steps,
            })
            .collect()
    }
    let row = |index: i64, acc: &Acc| LayerRow {
        index,
        kind: None,
        device_us: acc.ns as f64 / 1e3 / steps,
        by_category: acc
            .by_cat
            .iter()
            .map(|(c, ns)| (c.clone(), *ns as f64 / 1e3 / steps))
            .collect(),
        top_ops: top(&acc.ops, steps, |o| cx.owner_name(o)),
        top_kernels: top(&acc.kernels, steps, |k| super::names::short_name(t.name(k))),
    };
    let mut items: Vec<LayerRow> = layers.iter().map(|(i, acc)| row(*i, acc)).collect();
    let parts: Vec<Parts> = layers.values().map(|acc| acc.parts).collect();
    let mut detail = a.detail;
    if let Some(note) = label_kinds(&mut items, &parts) {
        detail.push_str(&note);
    }
    let count = items.len() as u64;
    Layers {
        method: a.method,
        basis: if cpu {
            TimeBasis::Cpu
        } else {
            TimeBasis::Device
        },
        confidence: a.confidence,
        count,
        period: a.period,
        marker: a.marker,
        detail,
        steps: held as u64,
        passes: a.pass_starts.len() as u64,
        items,
        outside: row(-1, &outside),
    }
}

/// Method 1: annotations with a layer index around the launch.
fn by_annotation(cx: &Context, seqs: &[Vec<Item>], cpu_items: bool) -> Option<Assignment> {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut index_of_name: HashMap<Sym, Option<i64>> = HashMap::new();
    let mut index_of = |sym: Sym| {
        *index_of_name
            .entry(sym)
            .or_insert_with(|| layer_index(t.name(sym)))
    };
    let mut layer = GpuLayers::new(t, cpu_items);
    let mut marker: Option<Sym> = None;
    for it in seqs.iter().flatten() {
        // The op itself (a CPU trace's top-level op) or the op that
        // launched the GPU op, and the ops and annotations around it.
        let mut op = if cpu_items {
            it.at
        } else {
            cx.links.op.get(it.at as usize)
        };
        while op != NO {
            let o = op as usize;
            if cpu.kind()[o].is_op() {
                if let Some(i) = index_of(cpu.name()[o]) {
                    layer.insert(it.at, i);
                    marker.get_or_insert(cpu.name()[o]);
                    break;
                }
            }
            op = cx.links.parent.get(o);
        }
    }
    if layer.is_empty() && !cpu_items {
        // CUDA-graph kernel annotations (torch's `mark_kernels`, spliced
        // into a replayed kernel's args): the kernel's own layer, where no
        // launch leads back to the code that captured it.
        for &(g, name) in t.gpu.annotations() {
            if let Some(i) = index_of(name) {
                layer.insert(g, i);
                marker.get_or_insert(name);
            }
        }
    }
    if layer.is_empty() && !cpu_items {
        // GPU-side annotations: a GPU op inside one on its stream.
        let gpu = &t.gpu;
        let mut spans: Vec<(i64, i64, u32, i64)> = Vec::new();
        for g in 0..gpu.len() {
            crate::cancel::point(g);
            if gpu.kind()[g] == GpuKind::Annotation {
                if let Some(i) = index_of(gpu.name()[g]) {
                    spans.push((
                        gpu.ts().get(g),
                        gpu.ts().get(g) + gpu.dur().get(g),
                        gpu.track().get(g),
                        i,
                    ));
                    marker.get_or_insert(gpu.name()[g]);
                }
            }
        }
        if spans.is_empty() {
            return None;
        }
        spans.sort();
        for g in 0..gpu.len() {
            crate::cancel::point(g);
            if !gpu.kind()[g].is_gpu_op() {
                continue;
            }
            let k = spans.partition_point(|s| s.0 <= gpu.ts().get(g));
            if let Some(s) = spans[..k]
                .iter()
                .rev()
                .take(64)
                .find(|s| s.2 == gpu.track().get(g) && gpu.ts().get(g) < s.1)
            {
                layer.insert(g as u32, s.3);
            }
        }
    }
    let distinct: std::collections::BTreeSet<i64> = layer.values().collect();
    if distinct.len() < 2 {
        return None;
    }
    Some(Assignment {
        method: LayerMethod::Annotation,
        confidence: 0.95,
        period: None,
        marker: marker.map(|m| t.name(m).to_string()),
        detail: format!(
            "layer indices read from annotation names such as {:?}",
            marker.map(|m| t.name(m)).unwrap_or("")
        ),
        layer,
        pass_starts: Vec::new(),
        short: Vec::new(),
    })
}

/// Method 2: `nn.Module: XxxLayer_N` frames around the launch.
fn by_module(cx: &Context, seqs: &[Vec<Item>], cpu_items: bool) -> Option<Assignment> {
    let t = cx.t;
    let times = Times::of(t, cpu_items);
    let cpu = &t.cpu;
    // Candidate classes: names with Layer or Block, by distinct instances.
    // Past this many, a name is no model's layers (and the sets stay small).
    const MAX_INSTANCES: usize = 4096;
    let mut instances: HashMap<&str, std::collections::BTreeSet<i64>> = HashMap::new();
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i] == CpuKind::Module {
            if let Some((class, n)) = module_instance(t.name(cpu.name()[i])) {
                if is_layer_class(class) {
                    let set = instances.entry(class).or_default();
                    if set.len() <= MAX_INSTANCES {
                        set.insert(n);
                    }
                }
            }
        }
    }
    let (class, insts) = instances
        .into_iter()
        .filter(|(_, s)| s.len() >= 2 && s.len() <= MAX_INSTANCES)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
    // Frames of that class per thread, by start.
    let mut frames: HashMap<u32, Vec<(i64, i64, i64)>> = HashMap::new();
    for i in 0..cpu.len() {
        crate::cancel::point(i);
        if cpu.kind()[i] == CpuKind::Module {
            if let Some((c, n)) = module_instance(t.name(cpu.name()[i])) {
                if c == class {
                    frames.entry(cpu.track().get(i)).or_default().push((
                        cpu.ts().get(i),
                        cpu.ts().get(i) + cpu.dur().get(i),
                        n,
                    ));
                }
            }
        }
    }
    for f in frames.values_mut() {
        f.sort();
    }
    let mut layer = GpuLayers::new(t, cpu_items);
    let mut in_layers: i64 = 0;
    let mut all: i64 = 0;
    for it in seqs.iter().flatten() {
        all += times.dur(it);
        // Where the work was issued: the op itself, or the GPU op's launch.
        let r = if cpu_items {
            it.at
        } else {
            cx.links.launch.get(it.at as usize)
        };
        if r == NO {
            continue;
        }
        let r = r as usize;
        let Some(f) = frames.get(&cpu.track().get(r)) else {
            continue;
        };
        let ts = cpu.ts().get(r);
        let k = f.partition_point(|x| x.0 <= ts);
        if let Some(x) = f[..k].iter().rev().take(8).find(|x| ts < x.1) {
            layer.insert(it.at, x.2);
            in_layers += times.dur(it);
        }
    }
    let distinct: std::collections::BTreeSet<i64> = layer.values().collect();
    // A graph replay launches every layer's kernels from one place: the
    // frames then cannot tell layers apart.
    if distinct.len() < 2 || (in_layers as f64) < 0.2 * all as f64 {
        return None;
    }
    let numbers: Vec<i64> = distinct.into_iter().collect();
    let backward = if backward_of_modules(cx, seqs, cpu_items, &mut layer, &numbers) {
        "; a training step: each layer runs forward, then backward in reverse order"
    } else {
        ""
    };
    Some(Assignment {
        method: LayerMethod::Module,
        confidence: 0.9,
        period: None,
        marker: Some(format!("nn.Module: {class}")),
        detail: format!(
            "{} instances of the module {class} (Python frames){backward}",
            insts.len()
        ),
        layer,
        pass_starts: Vec::new(),
        short: Vec::new(),
    })
}

/// A training step's backward run where its layers came from module frames
/// ([`by_module`]): autograd runs it in a thread of its own, in no module's
/// frame, so the frames tell the forward layers alone (the family's five
/// training captures made `with_stack`). Where the repetition method cuts
/// the steps into as many layers and a backward run, that run's items not
/// in a frame take the layer numbers `numbers` (sorted), the last first.
/// Searched only where autograd ran (a name says `Backward`). Whether it did.
fn backward_of_modules(
    cx: &Context,
    seqs: &[Vec<Item>],
    cpu: bool,
    layer: &mut GpuLayers,
    numbers: &[i64],
) -> bool {
    let t = cx.t;
    let mut names: hashbrown::HashSet<Sym> = hashbrown::HashSet::new();
    let autograd = seqs
        .iter()
        .flatten()
        .any(|it| names.insert(it.name) && t.name(it.name).contains("Backward"));
    if !autograd {
        return false;
    }
    let Some(split) = repetition_split(t, seqs, cpu) else {
        return false;
    };
    let n = numbers.len();
    if split.layers() != n || split.backward.iter().all(|b| b.0.is_empty()) {
        return false;
    }
    for (seq, (starts, end)) in seqs.iter().zip(&split.backward) {
        for (i, &s) in starts.iter().enumerate() {
            let e = starts.get(i + 1).copied().unwrap_or(*end);
            for it in &seq[s..e] {
                if layer.get(it.at).is_none() {
                    layer.insert(it.at, numbers[n - 1 - i]);
                }
            }
        }
    }
    true
}

/// The repetition method's split of the steps ([`repeats::find`]), kernel
/// names counted by their family.
fn repetition_split(t: &Tables, seqs: &[Vec<Item>], cpu: bool) -> Option<repeats::Split> {
    let times = Times::of(t, cpu);
    let mut families: HashMap<&str, u32> = HashMap::new();
    repeats::find(seqs, &|it| times.dur(it), &mut |name| {
        let next = families.len() as u32;
        *families
            .entry(super::names::kernel_family(t.name(name)))
            .or_insert(next)
    })
}

/// Method 3: a kernel (or kernel geometry, or mixer block) that cuts every
/// step into alike layers ([`repeats`](super::repeats)).
fn by_repetition(cx: &Context, seqs: &[Vec<Item>], cpu: bool) -> Option<Assignment> {
    let t = cx.t;
    let split = repetition_split(t, seqs, cpu)?;
    let mut layer = GpuLayers::new(t, cpu);
    let unit = if cpu { "ops" } else { "GPU ops" };
    // A trace without step marks is one sequence: where it runs its forward
    // pass several times, a pass's layers are the model's.
    let passes = match (cx.steps.is_empty(), seqs, split.bounds.as_slice()) {
        (true, [seq], [bounds]) => Passes::find(seq, bounds),
        _ => None,
    };
    let layers_n = passes.as_ref().map_or(split.layers(), |p| p.per_pass);
    let short: Vec<usize> = (0..seqs.len())
        .filter(|&s| !seqs[s].is_empty() && split.bounds[s].0.is_empty())
        .collect();
    for (seq, (starts, end)) in seqs.iter().zip(&split.bounds) {
        let cut: Vec<(usize, usize)> = match &passes {
            Some(p) => p.layers.clone(),
            None => (0..starts.len())
                .map(|i| (starts[i], starts.get(i + 1).copied().unwrap_or(*end)))
                .collect(),
        };
        for (i, &(s, e)) in cut.iter().enumerate() {
            for it in &seq[s..e] {
                layer.insert(it.at, (i % layers_n.max(1)) as i64);
            }
        }
    }
    // A training step's backward run: its first layer is the model's last.
    for (seq, (starts, end)) in seqs.iter().zip(&split.backward) {
        for (i, &s) in starts.iter().enumerate() {
            let e = starts.get(i + 1).copied().unwrap_or(*end);
            for it in &seq[s..e] {
                layer.insert(it.at, (layers_n - 1 - i) as i64);
            }
        }
    }
    let backward = split.backward.iter().any(|b| !b.0.is_empty());
    let first = seqs
        .iter()
        .zip(&split.bounds)
        .find(|(_, b)| !b.0.is_empty())?;
    let lengths: Vec<usize> = match &passes {
        Some(p) => p.layers[..p.per_pass].iter().map(|&(s, e)| e - s).collect(),
        None => {
            let (starts, end) = first.1;
            (0..starts.len())
                .map(|i| starts.get(i + 1).copied().unwrap_or(*end) - starts[i])
                .collect()
        }
    };
    let same = lengths.iter().all(|&l| l == lengths[0]);
    // The length most layers have (the MoE ones after a dense prefix).
    let period = {
        let mut by_len: BTreeMap<usize, usize> = BTreeMap::new();
        for &l in &lengths {
            *by_len.entry(l).or_default() += 1;
        }
        by_len
            .into_iter()
            .max_by_key(|&(l, n)| (n, std::cmp::Reverse(l)))
            .map(|(l, _)| l)
    };
    let marker_text = match split.key {
        repeats::Key::Mixer => "an attention or mixer block".to_string(),
        repeats::Key::NormPairs(s) | repeats::Key::Every(s, _) => {
            super::names::short_name(t.name(s))
        }
        key => {
            let it = first.0.iter().find(|it| match key {
                repeats::Key::Name(s) => it.name == s,
                repeats::Key::Group(g) => it.group == g,
                repeats::Key::Mixer
                | repeats::Key::NormPairs(_)
                | repeats::Key::Every(..)
                | repeats::Key::Either(..) => false,
            })?;
            let name = super::names::short_name(t.name(it.name));
            match key {
                repeats::Key::Group(_) if !cpu => {
                    format!("{name} grid {:?}", t.gpu.grid(it.at as usize))
                }
                _ => name,
            }
        }
    };
    let shape = match period {
        Some(p) if same => format!("a sequence of {p} {unit} repeats {layers_n} times"),
        _ => format!(
            "{layers_n} layers of {} to {} {unit}",
            lengths.iter().min().unwrap_or(&0),
            lengths.iter().max().unwrap_or(&0)
        ),
    };
    let times = match split.key {
        repeats::Key::NormPairs(_) => "twice, before its mixer and before its MLP".to_string(),
        repeats::Key::Every(_, n) => format!("{n} times"),
        _ => "once".to_string(),
    };
    let placed = match (split.at_norms, backward) {
        (_, true) => "; a training step: each layer runs forward, then backward in reverse order",
        (true, false) => "; each layer starts at its input norm",
        (false, false) => "",
    };
    let (shape, in_every) = match &passes {
        Some(p) => (
            format!(
                "the trace has no step marks and runs its forward pass {} times (each starts with the same ops): {layers_n} layers a pass, figures per pass; {shape}",
                p.starts.len()
            ),
            "in every pass".to_string(),
        ),
        None if short.is_empty() => (shape, "in every step".to_string()),
        None => {
            let ran = seqs.iter().filter(|s| !s.is_empty()).count();
            let text = format!(
                "in {} of {ran} steps (the others ran fewer layers, as training with LayerDrop does; they are left out of the figures)",
                ran - short.len(),
            );
            (shape, text)
        }
    };
    Some(Assignment {
        method: LayerMethod::Repetition,
        // Without steps the repeating unit may as well be an iteration.
        confidence: ((if cx.steps.is_empty() { 0.5 } else { 0.8 }) * (0.5 + split.share / 2.0) * 100.0).round() / 100.0,
        period: period.map(|p| p as u64),
        marker: Some(marker_text.clone()),
        detail: format!(
            "{shape} {in_every} ({:.0}% of {} names run in every layer); each layer runs {marker_text} {times}{placed}",
            100.0 * split.share,
            if cpu { "op" } else { "kernel" },
        ),
        layer,
        pass_starts: passes.map(|p| p.starts).unwrap_or_default(),
        short,
    })
}

/// A trace without step marks that runs its forward pass several times
/// (`model.generate()` profiled without a schedule, say) is one sequence
/// whose repeating unit is a layer: 5 passes of a 6-layer model were 30
/// layers. A pass shows by its prologue, the ops before the first layer
/// (the input, the embedding): where the prologue runs again, a pass
/// starts. Each pass's layers are the split's, cut at the passes; what a
/// pass runs after its last layer (the final norm and head, cut off by the
/// next prologue) is outside the layers. The last pass, which no prologue
/// cuts, says how many layers a pass has; every other pass must have as
/// many, or one more piece that the next prologue cuts short, and each
/// layer of a pass must start as the same layer of the first pass does. A
/// prologue must run a name that nothing else in the sequence runs, and a
/// pass must have two layers or more: where the profile opened inside a
/// pass, what comes before the first layer is a layer's tail, which runs
/// again after every layer (`architectures::
/// layers_hold_over_random_architectures_without_step_marks`). A model run
/// once never runs its prologue again, so no single pass is cut
/// (`captures::a_forward_pass_run_again_without_step_marks_is_one_pass`).
struct Passes {
    /// Layers a pass.
    per_pass: usize,
    /// Each pass's layers in turn, `per_pass` a pass: (start, end) in the
    /// sequence.
    layers: Vec<(usize, usize)>,
    /// Where each pass starts in the sequence (its prologue); the first at 0.
    starts: Vec<usize>,
}

impl Passes {
    /// Most items of a prologue compared: the generated story's is 6 (the
    /// input and the embedding), the CPU captures' 2; a bound keeps the
    /// scan for it linear in practice.
    const MAX_PROLOGUE: usize = 64;

    fn find(seq: &[Item], bounds: &(Vec<usize>, usize)) -> Option<Passes> {
        let (n, first) = (bounds.0.len(), *bounds.0.first()?);
        if n < 2 || first == 0 {
            return None;
        }
        if first <= Self::MAX_PROLOGUE {
            if let Some(p) = Self::from_prologue(seq, bounds, 0) {
                return Some(p);
            }
        }
        // What a generation runs before its first pass (checks of its
        // inputs, its cache) runs once: the prologue the passes after it
        // repeat is its end, from a rare name on (the embedding). Its
        // names are tried rarest first (a check of the inputs may run
        // again once, where a pass's embedding runs in every pass; Hugging
        // Face's OPT and GPT-2 under generate()), at most
        // [`ANCHOR_COUNTS`] of them, each a scan of the sequence.
        let from = first.saturating_sub(Self::MAX_PROLOGUE);
        let runs = name_counts(seq);
        let mut heads: Vec<(u32, usize)> = (from..first)
            .map(|k| (runs[&{ seq[k].name }], k))
            .filter(|&(r, _)| r >= 2)
            .collect();
        heads.sort_unstable();
        let mut tried: hashbrown::HashSet<Sym> = hashbrown::HashSet::new();
        heads
            .into_iter()
            .filter(|&(_, k)| tried.insert(seq[k].name))
            .take(ANCHOR_COUNTS)
            .find_map(|(_, head)| Self::from_prologue(seq, bounds, head))
    }

    /// [`Passes::find`] where the first pass's prologue starts at `head`:
    /// `seq[head..first]`, run again where each later pass starts.
    fn from_prologue(
        seq: &[Item],
        (starts, end): &(Vec<usize>, usize),
        head: usize,
    ) -> Option<Passes> {
        let (n, first, end) = (starts.len(), *starts.first()?, *end);
        let len = first - head;
        let is_prologue = |q: usize| {
            q + len <= end
                && seq[q..q + len]
                    .iter()
                    .zip(&seq[head..first])
                    .all(|(x, y)| x.name == y.name)
        };
        let mut again = Vec::new();
        let mut q = first;
        while q + len <= end {
            if is_prologue(q) {
                again.push(q);
                q += len;
            } else {
                q += 1;
            }
        }
        if again.is_empty() {
            return None;
        }
        // Each pass's pieces of the split's layers: (start, end, cut short).
        let split_end = |i: usize| starts.get(i + 1).copied().unwrap_or(end);
        let pieces = |(a, b): (usize, usize)| -> Vec<(usize, usize, bool)> {
            let mut i = starts.partition_point(|&s| s <= a).saturating_sub(1);
            let mut out = Vec::new();
            while i < n && starts[i] < b {
                let (s, e) = (starts[i].max(a), split_end(i).min(b));
                if s < e {
                    out.push((s, e, e < split_end(i)));
                }
                i += 1;
            }
            out
        };
        let ranges: Vec<(usize, usize)> = std::iter::once(first)
            .chain(again.iter().map(|&q| q + len))
            .zip(again.iter().copied().chain(std::iter::once(end)))
            .collect();
        let passes: Vec<Vec<(usize, usize, bool)>> = ranges.into_iter().map(pieces).collect();
        let per_pass = passes.last()?.len();
        // A prologue runs what no layer runs (the input, the embedding), and
        // a pass has layers: the tail of a layer, where the profile opened
        // inside a pass, runs again after every layer and is no prologue
        // (the story cut 5-30% into its first pass made 1 layer a pass).
        let mut elsewhere: hashbrown::HashSet<Sym> = hashbrown::HashSet::new();
        let mut from = first;
        for &q in again.iter().chain(std::iter::once(&end)) {
            elsewhere.extend(seq[from..q].iter().map(|it| it.name));
            from = q + len;
        }
        if per_pass < 2
            || seq[head..first]
                .iter()
                .all(|it| elsewhere.contains(&{ it.name }))
        {
            return None;
        }
        let mut layers = Vec::with_capacity(per_pass * passes.len());
        for p in &passes {
            let fits = p.len() == per_pass || (p.len() == per_pass + 1 && p[per_pass].2);
            if per_pass == 0 || !fits {
                return None;
            }
            for (j, &(s, e, _)) in p.iter().take(per_pass).enumerate() {
                if seq[s].name != seq[passes[0][j].0].name {
                    return None;
                }
                layers.push((s, e));
            }
        }
        // What runs before the first prologue is the first pass's (a
        // generation's checks of its inputs, and its cache made: 2.6 ms of
        // `hf/gemma2-6l-generate`'s 70 ms prefill), unless it is longer than
        // any prologue and runs a mixer: a model of its own, run once
        // before the passes (a diffusion pipeline's text encoders:
        // `hf/flux-2d4s-*` had them in its first pass, which
        // their tokens made a prefill).
        let other_model =
            head > Self::MAX_PROLOGUE && seq[..head].iter().any(|it| it.role.is_mixer());
        let first_at = if other_model { head } else { 0 };
        Some(Passes {
            per_pass,
            layers,
            starts: std::iter::once(first_at).chain(again).collect(),
        })
    }
}

/// Labels each layer's kind where names tell: `linear` for a layer
/// without attention (where other layers have it, or a linear mixer runs),
/// else `moe` where routing or experts run, else `dense`. Returns a note for
/// the detail sentence.
fn label_kinds(items: &mut [LayerRow], parts: &[Parts]) -> Option<String> {
    // Eager attention (`matmul`, `softmax`, `matmul`) names none: where no
    // layer names attention, a softmax in a layer without a linear mixer
    // is its attention (Hugging Face's GPT-2 and BART in eager mode had
    // no kinds).
    let eager = !parts.iter().any(|p| p.attention);
    let parts: Vec<Parts> = parts
        .iter()
        .map(|&p| Parts {
            attention: p.attention || (eager && p.scores && !p.linear),
            ..p
        })
        .collect();
    let parts = parts.as_slice();
    let any_attention = parts.iter().any(|p| p.attention);
    let topk_everywhere = parts.iter().all(|p| p.topk);
    let named = any_attention || parts.iter().any(|p| p.is_moe(topk_everywhere) || p.linear);
    if !named || items.len() < 2 {
        return None;
    }
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (item, p) in items.iter_mut().zip(parts) {
        let kind = if !p.attention && (any_attention || p.linear) {
            LayerKind::Linear
        } else if p.is_moe(topk_everywhere) {
            LayerKind::Moe
        } else {
            LayerKind::Dense
        };
        item.kind = Some(kind);
        *counts.entry(kind.as_str()).or_default() += 1;
    }
    if counts.len() < 2 {
        return None;
    }
    let words: Vec<String> = counts
        .iter()
        .map(|(k, n)| match *k {
            "moe" => format!("{n} MoE"),
            k => format!("{n} {k}"),
        })
        .collect();
    Some(format!("; {} layers", words.join(", ")))
}

/// Which names say they run a backward pass ([`names::is_backward`]),
/// each name read once.
#[derive(Default)]
struct Backward(HashMap<Sym, bool>);

impl Backward {
    fn is_backward(&mut self, s: Sym, name: &str) -> bool {
        *self.0.entry(s).or_insert_with(|| names::is_backward(name))
    }
}

/// What names say a layer runs.
#[derive(Clone, Copy, Default)]
struct Parts {
    attention: bool,
    /// A softmax: eager attention's scores where no layer names attention
    /// ([`label_kinds`]).
    scores: bool,
    linear: bool,
    moe: bool,
    /// A top-k, and rows added back by index: routed experts, when both.
    topk: bool,
    combine: bool,
}

impl Parts {
    /// Whether the layer routes to experts ([`repeats::is_moe`]).
    fn is_moe(&self, topk_everywhere: bool) -> bool {
        repeats::is_moe(self.moe, self.topk, self.combine, topk_everywhere)
    }
}

/// A user's marker and/or period.
fn by_override(
    cx: &Context,
    seqs: &[Vec<Item>],
    opts: &AnalysisOptions,
    cpu: bool,
) -> Option<Assignment> {
    let t = cx.t;
    let period = opts.layer_period.map(|p| p as usize).filter(|&p| p > 0);
    // The marker may name a kernel (full or short name) or an op anywhere
    // in the chain that launched it; the first GPU op of each occurrence
    // starts a layer.
    let marker = opts.layer_marker.as_deref();
    let is_marker = |it: &Item| -> bool {
        let Some(m) = marker else { return false };
        let name = t.name(it.name);
        if name == m || super::names::short_name(name) == m {
            return true;
        }
        let mut op = if cpu {
            NO
        } else {
            cx.links.op.get(it.at as usize)
        };
        while op != NO {
            if t.name(t.cpu.name()[op as usize]) == m {
                return true;
            }
            op = cx.links.parent.get(op as usize);
        }
        false
    };
    let mut layer = GpuLayers::new(t, cpu);
    for seq in seqs.iter().filter(|s| !s.is_empty()) {
        let starts: Vec<usize> = if marker.is_some() {
            let mut v: Vec<usize> = Vec::new();
            for (k, it) in seq.iter().enumerate() {
                // Consecutive GPU ops of one marker call start one layer.
                if is_marker(it) && !(k > 0 && v.last() == Some(&(k - 1)) && is_marker(&seq[k - 1]))
                {
                    v.push(k);
                }
            }
            v
        } else {
            // Period only: the repetition starts where the sequence first
            // repeats a period later for at least two layers.
            let p = period?;
            let start = (0..seq.len().saturating_sub(2 * p))
                .find(|&s| (s..s + p).all(|k| seq[k].name == seq[k + p].name))
                .unwrap_or(0);
            (start..seq.len())
                .step_by(p)
                .filter(|&s| s + p <= seq.len())
                .collect()
        };
        if starts.is_empty() {
            continue;
        }
        for (i, &s) in starts.iter().enumerate() {
            let end = match (period, starts.get(i + 1)) {
                (Some(p), _) => (s + p).min(seq.len()),
                (None, Some(&next)) => next,
                (None, None) => {
                    // The last layer is as long as the one before it.
                    let prev = if i > 0 {
                        s - starts[i - 1]
                    } else {
                        seq.len() - s
                    };
                    (s + prev).min(seq.len())
                }
            };
            for it in &seq[s..end] {
                layer.insert(it.at, i as i64);
            }
        }
    }
    if layer.is_empty() {
        return None;
    }
    Some(Assignment {
        method: LayerMethod::Override,
        confidence: 1.0,
        period: period.map(|p| p as u64),
        marker: marker.map(str::to_string),
        detail: format!(
            "set by the user: {}{}",
            marker.map(|m| format!("marker {m:?}")).unwrap_or_default(),
            period
                .map(|p| format!(" period {p} GPU ops per layer"))
                .unwrap_or_default()
        ),
        layer,
        pass_starts: Vec::new(),
        short: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first steps are searched while their items add up to the bound:
    /// [`MIN_ITEMS`], or a quarter of the events where that is more; the
    /// first step always, and steps too long to search count for nothing.
    #[test]
    fn steps_are_searched_while_their_items_fit() {
        let quarter = MIN_ITEMS / 4;
        let counts = vec![quarter; 10];
        assert_eq!(searched_steps(&counts, 0), 4);
        assert_eq!(searched_steps(&counts, 4 * MIN_ITEMS), 4);
        assert_eq!(searched_steps(&counts, 6 * MIN_ITEMS), 6);
        assert_eq!(searched_steps(&counts, usize::MAX), 10);
        assert_eq!(searched_steps(&[repeats::MAX_STEP_ITEMS; 5], 0), 4);
        let long = repeats::MAX_STEP_ITEMS + 1;
        assert_eq!(
            searched_steps(&[quarter, long, long, quarter, quarter, quarter, 1], 0),
            6
        );
        assert_eq!(searched_steps(&vec![1; 2 * MAX_STEPS], 0), MAX_STEPS);
    }

    #[test]
    fn layer_indices_from_names() {
        assert_eq!(layer_index("model.layers.12.self_attn"), Some(12));
        assert_eq!(layer_index("layers.3"), Some(3));
        assert_eq!(layer_index("layer_7"), Some(7));
        assert_eq!(layer_index("Layer 2 forward"), Some(2));
        assert_eq!(layer_index("transformer.h.layer.11.mlp"), Some(11));
        assert_eq!(layer_index("multilayer_perceptron"), None);
        assert_eq!(layer_index("layernorm"), None);
        assert_eq!(layer_index("aten::mm"), None);
    }

    #[test]
    fn module_instances() {
        assert_eq!(
            module_instance("nn.Module: Qwen2DecoderLayer_12"),
            Some(("Qwen2DecoderLayer", 12))
        );
        assert_eq!(module_instance("nn.Module: Linear"), None);
    }

    #[test]
    fn layer_classes_end_in_layer_or_block() {
        for class in [
            "Qwen2DecoderLayer",
            "Owlv2EncoderLayer",
            "GPT2Block",
            "BasicBlock",
        ] {
            assert!(is_layer_class(class), "{class}");
        }
        for class in [
            "LayerNorm",
            "FusedLayerNorm",
            "LayerScale",
            "Linear",
            "BlockSparseAttn",
        ] {
            assert!(!is_layer_class(class), "{class}");
        }
    }
}
