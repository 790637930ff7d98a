//! Per-layer attribution of device time.
//!
//! Layers are found by the most trustworthy method the trace allows, and the
//! summary says which one was used and how sure it is:
//!
//! 1. **annotation**: record_function ranges (and `gpu_user_annotation`s)
//!    whose names carry a layer index — `layers.12`, `model.layers.12.mlp`,
//!    `layer_12`, `Layer 12`. A GPU op belongs to the layer of the innermost
//!    such range around its launch.
//! 2. **module**: `nn.Module: XxxDecoderLayer_N` Python frames (traces made
//!    with `with_stack`/`with_modules`); N is the layer. A GPU op belongs to
//!    the module frame around its launch on the launching thread.
//! 3. **repetition**: within each step, the GPU ops in device order form a
//!    sequence; a kernel, or a kernel with one launch geometry (grid, block:
//!    casts to BF16 share one name, not one grid), that runs the same number
//!    of times L in every step marks L layers when its spacing is constant
//!    after a short prefix: the first layers of a model may differ from the
//!    rest (dense layers before MoE ones) while the marker runs once in
//!    every layer. The largest such L wins. Each layer starts as many GPU
//!    ops before its marker as all layers have in common there (the ops
//!    before a marker are the same in every layer, and differ before the
//!    first one), so a layer begins where it truly begins, not at the marker.
//!    This needs neither L nor names in advance, and it works for CUDA graph
//!    replays too, since it reads the device side.
//!
//! A user can override with a marker (a kernel, op or annotation name that
//! starts each layer) and/or a period (GPU ops per layer).

use super::links::NO;
use super::{AnalysisOptions, Context};
use crate::import::store::{CpuKind, GpuKind, Sym};
use hashbrown::HashMap;
use kinetoscope_types::{KernelRow, LayerKind, LayerMethod, LayerRow, Layers, NameTime};
use std::collections::BTreeMap;

/// Entries kept in each layer's top lists.
const TOP: usize = 5;
/// Share of positions that must repeat for a period to count.
const MIN_PERIODICITY: f64 = 0.9;
/// Fewest layers and GPU ops per layer the repetition method accepts, and
/// the least share of the step's device time the layers must cover: below
/// these, a repeating pattern is more likely a loop than a model's layers.
const MIN_LAYERS: usize = 4;
const MIN_PERIOD: usize = 3;
const MIN_COVERAGE: f64 = 0.3;
/// Kernels tried as layer markers.
const MAX_CANDIDATES: usize = 64;

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

/// One GPU op as the layer logic sees it.
#[derive(Clone, Copy)]
struct GpuItem {
    /// Index into the GPU table.
    g: u32,
    /// Kernel name.
    name: Sym,
    /// Kernel name with launch geometry, interned.
    group: u32,
}

/// The GPU ops of each step in device order (one pseudo-step for traces
/// without steps).
fn step_sequences(cx: &Context) -> Vec<Vec<GpuItem>> {
    let gpu = &cx.t.gpu;
    let n_steps = cx.steps.len().max(1);
    let mut seqs: Vec<Vec<GpuItem>> = vec![Vec::new(); n_steps];
    let mut groups: HashMap<(Sym, [u32; 3], [u32; 3]), u32> = HashMap::new();
    for g in 0..gpu.len() {
        if !gpu.kind[g].is_gpu_op() {
            continue;
        }
        let s = if cx.steps.is_empty() {
            0
        } else if cx.gpu_step[g] == NO {
            continue;
        } else {
            cx.gpu_step[g] as usize
        };
        let next = groups.len() as u32;
        let group = *groups
            .entry((gpu.name[g], gpu.grid(g), gpu.block(g)))
            .or_insert(next);
        seqs[s].push(GpuItem {
            g: g as u32,
            name: gpu.name[g],
            group,
        });
    }
    for s in &mut seqs {
        s.sort_by_key(|it| (gpu.ts.get(it.g as usize), it.g));
    }
    seqs
}

/// Layer of each GPU op (-1: outside any layer), and how layers were found.
/// The layer of each GPU op (by index), where one was found: a vector, not a
/// map, since most GPU ops of a layered trace have one.
struct GpuLayers {
    of: Vec<i64>,
    set: usize,
}

impl GpuLayers {
    const NONE: i64 = i64::MIN;

    fn new(t: &crate::import::store::Trace) -> Self {
        GpuLayers {
            of: vec![Self::NONE; t.gpu.len()],
            set: 0,
        }
    }

    fn insert(&mut self, g: u32, layer: i64) {
        let slot = &mut self.of[g as usize];
        self.set += (*slot == Self::NONE) as usize;
        *slot = layer;
    }

    fn get(&self, g: &u32) -> Option<&i64> {
        self.of.get(*g as usize).filter(|&&l| l != Self::NONE)
    }

    fn is_empty(&self) -> bool {
        self.set == 0
    }

    fn values(&self) -> impl Iterator<Item = &i64> {
        self.of.iter().filter(|&&l| l != Self::NONE)
    }
}

struct Assignment {
    layer: GpuLayers,
    method: LayerMethod,
    confidence: f64,
    period: Option<u64>,
    marker: Option<String>,
    detail: String,
    /// Repetition: how many first layers differ from the rest.
    prefix: usize,
}

/// A layer's span in one step: (layer index, first start, last end), ns.
pub type LayerSpan = (i64, i64, i64);

/// The layers found in the GPU ops, before their numbers: the steps' GPU op
/// sequences and each op's layer. Needs no kernel table, so it is found
/// while the tables are made ([`find`], then [`numbers`]).
pub(crate) struct Found {
    seqs: Vec<Vec<GpuItem>>,
    assignment: Option<Assignment>,
}

/// Finds the layers; also returns where each layer lies in each step (for
/// the timeline's layers band).
pub(crate) fn find(cx: &Context, opts: &AnalysisOptions) -> (Found, Vec<LayerSpan>) {
    let seqs = step_sequences(cx);
    let assignment = if opts.layer_marker.is_some() || opts.layer_period.is_some() {
        by_override(cx, &seqs, opts)
    } else {
        by_annotation(cx)
            .or_else(|| by_module(cx))
            .or_else(|| by_repetition(cx, &seqs))
    };
    let spans = match &assignment {
        Some(a) => spans(cx, &seqs, a),
        None => Vec::new(),
    };
    (Found { seqs, assignment }, spans)
}

/// Attributes device time to the layers found.
pub(crate) fn numbers(cx: &Context, kernels: &[KernelRow], found: Found) -> Layers {
    let Found { seqs, assignment } = found;
    match assignment {
        Some(a) => summarize(cx, kernels, &seqs, a),
        None => Layers {
            method: LayerMethod::None,
            detail: if cx.t.gpu.is_empty() {
                "the trace has no GPU ops".into()
            } else {
                "no layer annotations, no nn.Module layer frames, and no kernel sequence that repeats at a constant period in every step".into()
            },
            ..Default::default()
        },
    }
}

/// Where each layer lies in each step: the first start and last end of its
/// GPU ops.
fn spans(cx: &Context, seqs: &[Vec<GpuItem>], a: &Assignment) -> Vec<LayerSpan> {
    let gpu = &cx.t.gpu;
    let mut out = Vec::new();
    for seq in seqs {
        let mut by_layer: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for it in seq {
            if let Some(&l) = a.layer.get(&it.g) {
                let g = it.g as usize;
                let e = by_layer.entry(l).or_insert((i64::MAX, i64::MIN));
                e.0 = e.0.min(gpu.ts.get(g));
                e.1 = e.1.max(gpu.ts.get(g) + gpu.dur.get(g));
            }
        }
        out.extend(by_layer.into_iter().map(|(l, (s, e))| (l, s, e)));
    }
    out.sort_by_key(|&(l, s, _)| (s, l));
    out
}

/// Per-layer numbers (mean per step) from an assignment.
fn summarize(cx: &Context, kernels: &[KernelRow], seqs: &[Vec<GpuItem>], a: Assignment) -> Layers {
    let t = cx.t;
    let gpu = &t.gpu;
    let category: HashMap<&str, &str> = kernels
        .iter()
        .map(|k| (k.name.as_str(), k.category.as_str()))
        .collect();
    let steps = seqs.len().max(1) as f64;
    #[derive(Default)]
    struct Acc {
        ns: i64,
        by_cat: BTreeMap<String, i64>,
        ops: HashMap<(bool, Sym), i64>,
        kernels: HashMap<Sym, i64>,
    }
    let mut layers: BTreeMap<i64, Acc> = BTreeMap::new();
    let mut outside = Acc::default();
    for it in seqs.iter().flatten() {
        let g = it.g as usize;
        let idx = a.layer.get(&it.g).copied().unwrap_or(-1);
        let acc = if idx >= 0 {
            layers.entry(idx).or_default()
        } else {
            &mut outside
        };
        let d = gpu.dur.get(g);
        acc.ns += d;
        let cat = category
            .get(t.name(gpu.name[g]))
            .copied()
            .unwrap_or("other");
        *acc.by_cat.entry(cat.to_string()).or_default() += d;
        if let Some(owner) = cx.owner(g) {
            *acc.ops.entry(owner).or_default() += d;
        }
        *acc.kernels.entry(gpu.name[g]).or_default() += d;
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
    let kernels_of: Vec<hashbrown::HashSet<Sym>> = layers
        .values()
        .map(|acc| acc.kernels.keys().copied().collect())
        .collect();
    let mut detail = a.detail;
    if let Some(note) = label_kinds(t, &mut items, &kernels_of, a.prefix) {
        detail.push_str(&note);
    }
    let count = items.len() as u64;
    Layers {
        method: a.method,
        confidence: a.confidence,
        count,
        period: a.period,
        marker: a.marker,
        detail,
        steps: seqs.len() as u64,
        items,
        outside: row(-1, &outside),
    }
}

/// Method 1: annotations with a layer index around the launch.
fn by_annotation(cx: &Context) -> Option<Assignment> {
    let t = cx.t;
    let cpu = &t.cpu;
    let mut index_of_name: HashMap<Sym, Option<i64>> = HashMap::new();
    let mut index_of = |sym: Sym| {
        *index_of_name
            .entry(sym)
            .or_insert_with(|| layer_index(t.name(sym)))
    };
    let mut layer = GpuLayers::new(t);
    let mut marker: Option<Sym> = None;
    for g in 0..t.gpu.len() {
        if !t.gpu.kind[g].is_gpu_op() {
            continue;
        }
        let mut op = cx.links.op[g];
        while op != NO {
            let o = op as usize;
            if cpu.kind[o].is_op() {
                if let Some(i) = index_of(cpu.name[o]) {
                    layer.insert(g as u32, i);
                    marker.get_or_insert(cpu.name[o]);
                    break;
                }
            }
            op = cx.links.parent[o];
        }
    }
    if layer.is_empty() {
        // GPU-side annotations: a GPU op inside one on its stream.
        let gpu = &t.gpu;
        let mut spans: Vec<(i64, i64, u32, i64)> = Vec::new();
        for g in 0..gpu.len() {
            if gpu.kind[g] == GpuKind::Annotation {
                if let Some(i) = index_of(gpu.name[g]) {
                    spans.push((
                        gpu.ts.get(g),
                        gpu.ts.get(g) + gpu.dur.get(g),
                        gpu.track.get(g),
                        i,
                    ));
                    marker.get_or_insert(gpu.name[g]);
                }
            }
        }
        if spans.is_empty() {
            return None;
        }
        spans.sort();
        for g in 0..gpu.len() {
            if !gpu.kind[g].is_gpu_op() {
                continue;
            }
            let k = spans.partition_point(|s| s.0 <= gpu.ts.get(g));
            if let Some(s) = spans[..k]
                .iter()
                .rev()
                .take(64)
                .find(|s| s.2 == gpu.track.get(g) && gpu.ts.get(g) < s.1)
            {
                layer.insert(g as u32, s.3);
            }
        }
    }
    let distinct: std::collections::BTreeSet<i64> = layer.values().copied().collect();
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
        prefix: 0,
    })
}

/// Method 2: `nn.Module: XxxLayer_N` frames around the launch.
fn by_module(cx: &Context) -> Option<Assignment> {
    let t = cx.t;
    let cpu = &t.cpu;
    // Candidate classes: names with Layer or Block, by distinct instances.
    let mut instances: HashMap<&str, std::collections::BTreeSet<i64>> = HashMap::new();
    for i in 0..cpu.len() {
        if cpu.kind[i] == CpuKind::Module {
            if let Some((class, n)) = module_instance(t.name(cpu.name[i])) {
                if class.contains("Layer") || class.contains("Block") {
                    instances.entry(class).or_default().insert(n);
                }
            }
        }
    }
    let (class, insts) = instances
        .into_iter()
        .filter(|(_, s)| s.len() >= 2)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
    // Frames of that class per thread, by start.
    let mut frames: HashMap<u32, Vec<(i64, i64, i64)>> = HashMap::new();
    for i in 0..cpu.len() {
        if cpu.kind[i] == CpuKind::Module {
            if let Some((c, n)) = module_instance(t.name(cpu.name[i])) {
                if c == class {
                    frames.entry(cpu.track.get(i)).or_default().push((
                        cpu.ts.get(i),
                        cpu.ts.get(i) + cpu.dur.get(i),
                        n,
                    ));
                }
            }
        }
    }
    for f in frames.values_mut() {
        f.sort();
    }
    let mut layer = GpuLayers::new(t);
    let mut in_layers: i64 = 0;
    let mut all: i64 = 0;
    for g in 0..t.gpu.len() {
        if !t.gpu.kind[g].is_gpu_op() {
            continue;
        }
        all += t.gpu.dur.get(g);
        let r = cx.links.launch[g];
        if r == NO {
            continue;
        }
        let r = r as usize;
        let Some(f) = frames.get(&cpu.track.get(r)) else {
            continue;
        };
        let ts = cpu.ts.get(r);
        let k = f.partition_point(|x| x.0 <= ts);
        if let Some(x) = f[..k].iter().rev().take(8).find(|x| ts < x.1) {
            layer.insert(g as u32, x.2);
            in_layers += t.gpu.dur.get(g);
        }
    }
    let distinct: std::collections::BTreeSet<i64> = layer.values().copied().collect();
    // A graph replay launches every layer's kernels from one place: the
    // frames then cannot tell layers apart.
    if distinct.len() < 2 || (in_layers as f64) < 0.2 * all as f64 {
        return None;
    }
    Some(Assignment {
        method: LayerMethod::Module,
        confidence: 0.9,
        period: None,
        marker: Some(format!("nn.Module: {class}")),
        detail: format!(
            "{} instances of the module {class} (Python frames)",
            insts.len()
        ),
        layer,
        prefix: 0,
    })
}

/// A kernel, or a kernel with one launch geometry, that may mark layers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Name(Sym),
    Group(u32),
}

impl Key {
    fn of(self, it: &GpuItem) -> bool {
        match self {
            Key::Name(s) => it.name == s,
            Key::Group(g) => it.group == g,
        }
    }
}

/// Where the layers of one step lie.
struct Layout {
    /// Start of each layer in the step's sequence.
    starts: Vec<usize>,
    /// End of the last layer.
    end: usize,
    /// GPU ops per layer after the prefix.
    period: usize,
    /// First layers whose length differs from the period.
    prefix: usize,
    /// Share of positions in the later layers that repeat the layer before.
    score: f64,
}

/// The layers a marker's positions imply in one step, if it marks layers:
/// a spacing constant after a prefix of at most a quarter of the layers
/// (or three, for small models).
fn layout(seq: &[GpuItem], pos: &[usize]) -> Option<Layout> {
    let n = pos.len();
    if n < 2 {
        return None;
    }
    let gaps: Vec<usize> = pos.windows(2).map(|w| w[1] - w[0]).collect();
    let p = *gaps.last()?;
    let prefix = gaps.iter().rposition(|&g| g != p).map_or(0, |k| k + 1);
    if p < MIN_PERIOD
        || prefix > (n / 4).max(3)
        || n - prefix < MIN_LAYERS
        || gaps.iter().any(|&g| g < MIN_PERIOD)
    {
        return None;
    }
    // Layers start `k` GPU ops before their markers: as many as every
    // marker, the first included, has the same ops before it.
    let min_gap = gaps.iter().copied().min().unwrap_or(p);
    let reference = pos[prefix.min(n - 1)];
    let mut k = 0;
    while k + 1 < min_gap && k < pos[0] {
        let j = k + 1;
        let name = seq[reference - j].name;
        if pos.iter().all(|&m| seq[m - j].name == name) {
            k = j;
        } else {
            break;
        }
    }
    let starts: Vec<usize> = pos.iter().map(|&m| m - k).collect();
    let end = (starts[n - 1] + p).min(seq.len());
    // How well the later layers repeat the one before them.
    let (mut same, mut all) = (0usize, 0usize);
    for i in prefix + 1..n {
        let (a, b) = (starts[i - 1], starts[i]);
        let len = if i + 1 < n {
            starts[i + 1] - b
        } else {
            end - b
        };
        for j in 0..len.min(b - a) {
            all += 1;
            same += (seq[a + j].name == seq[b + j].name) as usize;
        }
    }
    let score = if all == 0 {
        0.0
    } else {
        same as f64 / all as f64
    };
    Some(Layout {
        starts,
        end,
        period: p,
        prefix,
        score,
    })
}

/// Method 3: a kernel (or kernel geometry) that runs once per layer.
fn by_repetition(cx: &Context, seqs: &[Vec<GpuItem>]) -> Option<Assignment> {
    let t = cx.t;
    let first = seqs.iter().find(|s| !s.is_empty())?;
    // Candidates: kernels that run at least MIN_LAYERS times in a step.
    let mut counts: HashMap<Key, usize> = HashMap::new();
    for it in first {
        *counts.entry(Key::Name(it.name)).or_default() += 1;
        *counts.entry(Key::Group(it.group)).or_default() += 1;
    }
    let mut cands: Vec<(Key, usize)> = counts
        .into_iter()
        .filter(|(_, c)| *c >= MIN_LAYERS)
        .collect();
    cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // Each candidate costs a pass over every step: look at the most
    // frequent ones only, so a trace with many kernel names stays linear.
    cands.truncate(MAX_CANDIDATES);
    // (layers, score, marker, period, prefix)
    let mut best: Option<(usize, f64, Key, usize, usize)> = None;
    let steps: Vec<&Vec<GpuItem>> = seqs.iter().filter(|s| !s.is_empty()).collect();
    for (key, c) in cands {
        if best.is_some_and(|b| b.0 > c) {
            break;
        }
        let mut score = 0.0;
        let mut shape: Option<(usize, usize)> = None;
        let mut ok = true;
        let (mut covered, mut total) = (0i64, 0i64);
        for seq in &steps {
            let pos: Vec<usize> = seq
                .iter()
                .enumerate()
                .filter(|(_, it)| key.of(it))
                .map(|(k, _)| k)
                .collect();
            let Some(l) = (pos.len() == c).then(|| layout(seq, &pos)).flatten() else {
                ok = false;
                break;
            };
            if shape.is_some_and(|s| s != (l.period, l.prefix)) {
                ok = false;
                break;
            }
            shape = Some((l.period, l.prefix));
            score += l.score;
            let dur = |it: &GpuItem| t.gpu.dur.get(it.g as usize);
            covered += seq[l.starts[0]..l.end].iter().map(dur).sum::<i64>();
            total += seq.iter().map(dur).sum::<i64>();
        }
        let Some((period, prefix)) = shape.filter(|_| ok) else {
            continue;
        };
        if (covered as f64) < MIN_COVERAGE * total as f64 {
            continue;
        }
        let score = score / steps.len() as f64;
        // More layers first; then markers that need no prefix (a marker
        // placed differently in the first layer is no reason to split it
        // off); then the most regular.
        let rank = |l: usize, pre: usize, sc: f64| (l, std::cmp::Reverse(pre), (sc * 1e6) as u64);
        if score >= MIN_PERIODICITY
            && best.is_none_or(|b| rank(c, prefix, score) > rank(b.0, b.4, b.1))
        {
            best = Some((c, score, key, period, prefix));
        }
    }
    let (layers_n, score, marker, period, prefix) = best?;
    let mut layer = GpuLayers::new(t);
    for seq in &steps {
        let pos: Vec<usize> = seq
            .iter()
            .enumerate()
            .filter(|(_, it)| marker.of(it))
            .map(|(k, _)| k)
            .collect();
        if let Some(l) = layout(seq, &pos) {
            for (i, &s) in l.starts.iter().enumerate() {
                let e = l.starts.get(i + 1).copied().unwrap_or(l.end);
                for it in &seq[s..e] {
                    layer.insert(it.g, i as i64);
                }
            }
        }
    }
    let marker_item = first.iter().find(|it| marker.of(it))?;
    let marker_name = super::names::short_name(t.name(marker_item.name));
    let marker_text = match marker {
        Key::Name(_) => marker_name.clone(),
        Key::Group(_) => {
            let g = marker_item.g as usize;
            format!("{marker_name} grid {:?}", t.gpu.grid(g))
        }
    };
    let shape = if prefix > 0 {
        format!("{layers_n} layers ({prefix} first layers differ, then {period} GPU ops per layer)")
    } else {
        format!("a sequence of {period} GPU ops repeats {layers_n} times")
    };
    Some(Assignment {
        method: LayerMethod::Repetition,
        // Without steps the repeating unit may as well be an iteration.
        confidence: ((if cx.steps.is_empty() { 0.5 } else { 0.8 }) * score * 100.0).round() / 100.0,
        period: Some(period as u64),
        marker: Some(marker_text.clone()),
        detail: format!(
            "{shape} in every step ({:.0}% of positions repeat); each layer runs {marker_text} once",
            100.0 * score,
        ),
        layer,
        prefix,
    })
}

/// Whether a kernel name speaks of mixture-of-experts routing or experts.
fn is_moe_kernel(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.contains("moe") || l.contains("expert") || l.contains("topk_softmax") || l.contains("router")
}

/// Labels layers that differ from the rest: `moe` and `dense` where kernel
/// names tell the two apart, else `prefix` for a repetition's first layers.
/// Returns a note for the detail sentence.
fn label_kinds(
    t: &crate::import::store::Trace,
    items: &mut [LayerRow],
    kernels_of: &[hashbrown::HashSet<Sym>],
    prefix: usize,
) -> Option<String> {
    let moe: Vec<bool> = kernels_of
        .iter()
        .map(|ks| ks.iter().any(|&k| is_moe_kernel(t.name(k))))
        .collect();
    let n_moe = moe.iter().filter(|&&m| m).count();
    if n_moe > 0 && n_moe < items.len() {
        for (item, m) in items.iter_mut().zip(&moe) {
            item.kind = Some(if *m { LayerKind::Moe } else { LayerKind::Dense });
        }
        return Some(format!(
            "; {} dense and {n_moe} MoE layers",
            items.len() - n_moe
        ));
    }
    if prefix > 0 {
        for item in items.iter_mut().take(prefix) {
            item.kind = Some(LayerKind::Prefix);
        }
        return Some(format!(
            "; the first {prefix} layers run a different op sequence"
        ));
    }
    None
}

/// A user's marker and/or period.
fn by_override(cx: &Context, seqs: &[Vec<GpuItem>], opts: &AnalysisOptions) -> Option<Assignment> {
    let t = cx.t;
    let period = opts.layer_period.map(|p| p as usize).filter(|&p| p > 0);
    // The marker may name a kernel (full or short name) or an op anywhere
    // in the chain that launched it; the first GPU op of each occurrence
    // starts a layer.
    let marker = opts.layer_marker.as_deref();
    let is_marker = |it: &GpuItem| -> bool {
        let Some(m) = marker else { return false };
        let name = t.name(it.name);
        if name == m || super::names::short_name(name) == m {
            return true;
        }
        let mut op = cx.links.op[it.g as usize];
        while op != NO {
            if t.name(t.cpu.name[op as usize]) == m {
                return true;
            }
            op = cx.links.parent[op as usize];
        }
        false
    };
    let mut layer = GpuLayers::new(t);
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
                layer.insert(it.g, i as i64);
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
        prefix: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
