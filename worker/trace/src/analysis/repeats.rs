//! Layers from repetition: which occurrences of a kernel (or op) split every
//! step into decoder blocks.
//!
//! Each step is a sequence of items (GPU ops in device order, or a CPU
//! trace's top-level ops). A key (a name, a name with one launch geometry,
//! or the start of each attention-or-linear mixer block) that occurs `c`
//! times in every step proposes `c` layers, cut where it occurs. The split
//! is kept when its layers are alike: the names found in *every* layer are a
//! large share of the names found in *any* (the core share). That one rule
//! tells the families apart:
//!
//! - a kernel that a dense layer runs twice (unfused gate and up GEMMs) cuts
//!   a dense layer in two, and one half lacks the attention: small share;
//! - norms or all-reduces (two per layer) cut attention halves from MLP
//!   halves, which share little: small share;
//! - a key once per layer gives layers that share attention, norms and
//!   projections, whatever their MLP (dense, MoE, interleaved) or mixer
//!   (a hybrid's linear layers still share the norms and the MLP);
//! - a key once per two layers passes too, so the most layers win.
//!
//! Where names tell attention, linear mixers, norms and MLPs apart, the cut
//! is then placed where a decoder block begins: at the first norm after the
//! previous block's MLP, before the next mixer (the input norm), so a
//! hybrid's layers begin at their own norm and not at a key's place in the
//! middle of a layer. Without names, each layer begins as many items before
//! its key as every layer has in common there.
//!
//! A training step runs every layer twice: forward, then backward in reverse
//! order, with other kernels (the attention's backward ones). Where the
//! step has twice as many mixer blocks as a key proposes layers, and one key
//! cuts the forward blocks while another cuts the backward ones, the two
//! runs are one model's layers ([`Split::backward`]).

use super::limits::{self, Limit};
use crate::import::store::Sym;
use hashbrown::{HashMap, HashSet};

pub(crate) use super::names::{role_of, Role};

/// One item of a step's sequence. Packed: 13 bytes, not 16 (its fields
/// are read by value; the steps' sequences hold an item per GPU op, or per
/// top-level op of a trace without GPU ops, through the whole analysis).
#[derive(Clone, Copy)]
#[repr(C, packed)]
pub(crate) struct Item {
    /// Index into its table (the GPU ops, or the CPU slices).
    pub at: u32,
    /// Name.
    pub name: Sym,
    /// Name with launch geometry, interned (the name's own id where there is none).
    pub group: u32,
    /// What the name says.
    pub role: Role,
}

/// An item's time, ns. Items do not hold their start and time: their
/// table does (`at`), and at 300 steps the steps' sequences are held beside
/// the op table, so 16 bytes an item rather than 32 is 40 MB of the peak.
pub(crate) type DurOf<'a> = &'a dyn Fn(&Item) -> i64;

/// What cuts the steps into layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    Name(Sym),
    Group(u32),
    /// The start of each mixer block (attention or linear).
    Mixer,
    /// Every other run of a norm: a decoder block runs two (before its
    /// mixer and before its MLP), and the model one more at the end, so
    /// the norms cut a model whose mixers and experts have no telling
    /// names (a graph-replayed hybrid of plain GEMMs and elementwise
    /// kernels) where no kernel runs once in every layer. Only an odd
    /// number of norms is a decoder's: an even one has a norm of another
    /// part (a classifier head's, after an encoder: the TraceLens BERT
    /// trace, whose last "layer" would be its head).
    NormPairs(Sym),
    /// Every n-th run of a name that runs n times a layer, where no name
    /// runs once a layer to cut a backward run: a training step's backward
    /// compiled as one graph, whose routed experts' gradients take four
    /// buffers a layer (`aten::zeros_like`: Qwen3-MoE trained under
    /// `torch.compile`, `hf/qwen3moe-4l-compiled-train`, where the one name
    /// a layer, the attention's backward, cuts each layer's attention from
    /// its experts; [`backward_key`]).
    Every(Sym, u32),
    /// The runs of either of two names, in a training step's backward run
    /// of a model with two kinds of layer, each kind's mixer gradient
    /// under its own name, in the order the forward run's kinds take in
    /// reverse ([`either_key`]): LFM2 trained under `torch.compile` runs
    /// `aten::convolution_backward` in its convolution layers and the
    /// attention's backward in the others, so no one name cuts its
    /// backward run (`hf/lfm2-6l-compiled-train`). The layers holding the
    /// first name are one kind, the others the other.
    Either(Sym, Sym),
}

/// The layers of every step.
pub(crate) struct Split {
    pub key: Key,
    /// Per step (empty steps included, with no layers, and steps that ran
    /// fewer layers than the model has, [`layer_drop`]): each layer's
    /// start, and the end of the last one.
    pub bounds: Vec<(Vec<usize>, usize)>,
    /// Names in every layer over names in any.
    pub share: f64,
    /// Placed at the blocks' input norms (names told the parts apart).
    pub at_norms: bool,
    /// A training step's backward run, per step as `bounds` (empty where
    /// there is none): its `i`-th layer is the model's layer `n - 1 - i`.
    pub backward: Vec<(Vec<usize>, usize)>,
}

impl Split {
    /// Layers per step.
    pub fn layers(&self) -> usize {
        self.bounds.iter().map(|b| b.0.len()).max().unwrap_or(0)
    }
}

/// Keys tried.
const MAX_CANDIDATES: usize = 96;
/// Most layers a step is split into: a name that runs more often than this
/// in a step is no layer's key. The deepest models run about 130 layers
/// (Llama 3 405B, 126; the story, 78; the most any trace we have splits
/// into is 78), so 1,024 leaves eight times that. Past it, a trace of a
/// million calls of one name (a name a call, folded: `robustness::
/// a_name_a_call_is_folded_past_the_bound`) held 16 MB of positions per key
/// tried, and its search went over the CLI's memory budget.
const MAX_LAYERS: usize = 1024;
/// Most items (GPU ops, or top-level CPU ops) in a step searched for
/// layers: a longer step is left out of the search, and the layers' detail
/// says so. Each item costs 16 bytes, and 4 more in the search, for the
/// whole analysis; a trace of five million CPU ops and no steps is one step
/// of five million items (`few5m` in BENCHMARKS.md: 100 MB, over the CLI's
/// budget of 32 bytes an event). The longest step of any trace we have is
/// 10,356 items (`param-linear-rtx2080ti`, one step), the story's 2,608
/// (78 layers of 33), so 262,144 is 25 times that, and [`MAX_LAYERS`]
/// layers of 256 items.
pub(crate) const MAX_STEP_ITEMS: usize = 1 << 18;
/// Splits checked on every step after passing on the first.
const MAX_CHECKED: usize = 8;
/// Fewest items in a layer.
const MIN_LAYER_ITEMS: usize = 2;

/// The mixer blocks of a step: (first item, last item, whether one of them
/// is attention).
/// A block runs each of its mixer kernels once: the same name again starts
/// the next block (a compiled CPU model's layers are GEMMs around one
/// attention op each, with no norm or MLP op between them to end a block).
fn mixer_blocks(seq: &[Item]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut broken = true;
    let scores = eager_scores(seq);
    for (k, it) in seq.iter().enumerate() {
        match it.role {
            r if r.is_mixer() || (scores && r == Role::Scores && !routes(seq, k)) => {
                // Eager scores with no norm or MLP item between are one
                // attention's windows ([`eager_scores`]), however many.
                let windows = |b: &(usize, usize)| r == Role::Scores && seq[b.0].role == r;
                match out.last_mut() {
                    Some(b)
                        if !broken
                            && (windows(b)
                                || k - b.1 <= limits::count(Limit::BlockGap)
                                    && !seq[b.0..k].iter().any(|m| m.name == it.name)) =>
                    {
                        b.1 = k
                    }
                    _ => {
                        out.push((k, k));
                        broken = false;
                    }
                }
            }
            r if r == Role::Norm || r.is_ffn() => broken = true,
            _ => {}
        }
    }
    cross_attention(seq, out)
}

/// The blocks with a decoder's cross-attention joined to the self-attention
/// before it: where some gaps between blocks run an MLP item (or an
/// activation written out: [`Role::is_block_part`]) and others do not, an
/// attention block followed, past a norm and no MLP item, by another is
/// one layer's two (an encoder-decoder's decoder: self-attention, then
/// over the encoder's output, then the MLP; Hugging Face's BART and T5,
/// whose decoder layers were each two, eager attention's scores too; a
/// diffusion UNet's transformer blocks). Where no gap runs an MLP item (a
/// Mamba model: a norm and a mixer a layer), every block stays a layer.
/// The gap before the cross-attention may hold no norm, where other gaps
/// hold them: each layer starts at its input norm, so a gap without one
/// is inside a layer (PixArt's DiT blocks, with AdaLN-single, run their
/// cross-attention on the self-attention's output as it is:
/// `hf/pixart-5l-*`, 10 layers of 5 before). Where no gap holds a norm,
/// blocks stay apart: a compiled CPU model's norms and MLP activations are
/// fused into C++ the profiler does not record, and its layers are
/// attention blocks with GEMMs between them.
fn cross_attention(seq: &[Item], blocks: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let gap_has = |i: usize, f: &dyn Fn(Role) -> bool| {
        seq[blocks[i].1 + 1..blocks[i + 1].0]
            .iter()
            .any(|it| f(it.role))
    };
    let n = blocks.len();
    if !(0..n.saturating_sub(1)).any(|i| gap_has(i, &|r| r.is_block_part())) {
        return blocks;
    }
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(n);
    let attention = |b: (usize, usize)| matches!(seq[b.0].role, Role::Attention | Role::Scores);
    let normed = (0..n - 1).any(|i| gap_has(i, &|r| r == Role::Norm));
    let mut joined = false;
    for i in 0..n {
        let cross = i > 0
            && !joined
            && attention(blocks[i - 1])
            && attention(blocks[i])
            && !gap_has(i - 1, &|r| r.is_block_part())
            && normed;
        match out.last_mut() {
            Some(b) if cross => b.1 = blocks[i].1,
            _ => out.push(blocks[i]),
        }
        joined = cross;
    }
    out
}

/// Whether a step's softmaxes are eager attention's scores, its mixers:
/// no name says attention or a mixer, and a norm runs before each (a
/// decoder block's, before its attention, or after the previous one's),
/// or only other scores since the last norm (one attention's windows:
/// Qwen2.5-VL's vision tower, eager, runs a softmax a window, four in a
/// block, and its prefill had no blocks, so no layers).
/// A model's output softmax runs none between (PARAM's linear model, no
/// step marks: its 40 training iterations were otherwise 40 layers).
fn eager_scores(seq: &[Item]) -> bool {
    let mut normed = false;
    // A softmax seen, and no norm or MLP item since.
    let mut open = false;
    let mut any = false;
    for (k, it) in seq.iter().enumerate() {
        match it.role {
            r if r.is_mixer() => return false,
            Role::Norm => (normed, open) = (true, false),
            Role::Scores if !routes(seq, k) => {
                if !normed && !open {
                    return false;
                }
                (normed, open, any) = (false, true, true);
            }
            r if r.is_block_part() => open = false,
            _ => {}
        }
    }
    any
}

/// Whether the softmax at `k` is an MoE router's: a top-k follows it
/// before the next norm or MLP item (Mixtral's and Qwen2-MoE's routers in
/// Hugging Face's eager code: `softmax`, `topk`), within
/// [`Limit::RouterReach`] items.
fn routes(seq: &[Item], k: usize) -> bool {
    router(seq, k).is_some()
}

/// What selects the experts after the softmax at `k`, where it is an MoE
/// router's ([`routes`]): a top-k, or an argmax (a top-1 router: Switch
/// Transformers, whose eager attention's softmaxes beside it made its
/// decoder's 4 layers 6).
pub(crate) fn router(seq: &[Item], k: usize) -> Option<Role> {
    seq[k + 1..]
        .iter()
        .take(limits::count(Limit::RouterReach))
        .take_while(|it| it.role != Role::Norm && !it.role.is_block_part())
        .map(|it| it.role)
        .find(|&r| matches!(r, Role::TopK | Role::Top1))
}

/// The positions of a key in a step, and where the last layer ends when
/// the key says (the model's final norm).
fn positions(seq: &[Item], key: Key, blocks: &[(usize, usize)]) -> (Vec<usize>, Option<usize>) {
    match key {
        Key::Mixer => (blocks.iter().map(|b| b.0).collect(), None),
        Key::Name(s) => (runs_of(seq, s), None),
        Key::Group(g) => (
            (0..seq.len()).filter(|&k| seq[k].group == g).collect(),
            None,
        ),
        Key::NormPairs(s) => {
            let all = runs_of(seq, s);
            if all.len().is_multiple_of(2) {
                return (Vec::new(), None);
            }
            let (pairs, end) = (all.len() / 2, all[all.len() - 1]);
            (all.into_iter().step_by(2).take(pairs).collect(), Some(end))
        }
        Key::Either(a, b) => (
            (0..seq.len())
                .filter(|&k| seq[k].name == a || seq[k].name == b)
                .collect(),
            None,
        ),
        Key::Every(s, n) => {
            let all = runs_of(seq, s);
            if !all.len().is_multiple_of(n as usize) {
                return (Vec::new(), None);
            }
            (all.into_iter().step_by(n as usize).collect(), None)
        }
    }
}

/// Where a name runs in a step.
fn runs_of(seq: &[Item], s: Sym) -> Vec<usize> {
    (0..seq.len()).filter(|&k| seq[k].name == s).collect()
}

/// The input norm of a block that starts at `to`: the first norm after the
/// last MLP item in `seq[from..to]` (from the previous block's end). The
/// last, not the first: a Mamba mixer gates with a SiLU after its
/// convolution and before its own norms (Hugging Face's Jamba on the CPU),
/// which the first MLP item after the previous block would take for that
/// layer's MLP. Where no MLP item runs there, its last gate: an activation
/// written out (T5 v1.1's gated GELU, whose `tanh` is the MLP's one
/// telling name: Hugging Face's T5 of 6 and 6 such layers had no input
/// norms, and its training step only its forward layers). Not a gate
/// first: Gemma 2 caps its attention's scores with a `tanh` after the
/// input norm.
fn input_norm(seq: &[Item], from: usize, to: usize) -> Option<usize> {
    let last = |f: fn(Role) -> bool| (from..to).rev().find(|&k| f(seq[k].role));
    let last_ffn = last(Role::is_ffn).or_else(|| last(|r| r == Role::Gate))?;
    (last_ffn + 1..to).find(|&k| seq[k].role == Role::Norm)
}

/// The first norm in `seq[from..to]` after its first MLP item (after
/// `from` where `need_ffn` is false).
fn norm_after_ffn(seq: &[Item], from: usize, to: usize, need_ffn: bool) -> Option<usize> {
    let mut ffn_seen = !need_ffn;
    for (k, it) in seq.iter().enumerate().take(to).skip(from) {
        if it.role.is_ffn() {
            ffn_seen = true;
        } else if it.role == Role::Norm && ffn_seen {
            return Some(k);
        }
    }
    None
}

/// The model's final norm, where the last layer ends: as far after the
/// last block as the latest earlier layer with the same mixer ends after
/// its own, where a norm stands there (a Jamba whose last layer is a Mamba
/// layer: its gate's SiLU and its own norms come before the MLP); else the
/// first norm after the first MLP item after the block. Not the last MLP
/// item of the step: a training step's backward run follows.
fn final_norm(seq: &[Item], blocks: &[(usize, usize)], starts: &[usize]) -> Option<usize> {
    let n = blocks.len();
    let last = blocks[n - 1];
    let like = (0..n - 1)
        .rev()
        .find(|&j| seq[blocks[j].0].name == seq[last.0].name);
    if let Some(j) = like {
        // From the block's start, else from its end: a first layer's block
        // may run an item more (T5's first decoder layer, which computes
        // the position biases: T5 gated-GELU 2+2 trained had no layers).
        let from_start = last.0 + (starts[j + 1] - blocks[j].0);
        let from_end = last.1 + (starts[j + 1] - blocks[j].1);
        if let Some(e) = [from_start, from_end]
            .into_iter()
            .find(|&e| seq.get(e).is_some_and(|it| it.role == Role::Norm))
        {
            return Some(e);
        }
    }
    norm_after_ffn(seq, last.1 + 1, seq.len(), true)
}

/// Where the layers a key's positions imply lie in one step.
/// `before` is the block before the first (where a step runs more blocks
/// before its layers: `Steps::lead`).
fn place(
    seq: &[Item],
    pos: &[usize],
    blocks: &[(usize, usize)],
    before: Option<(usize, usize)>,
) -> Option<Placed> {
    if pos.len() < 2 {
        return None;
    }
    if blocks.len() == pos.len() && interleaved(pos, blocks) {
        // One mixer block a layer: the layers are cut around the blocks, so
        // each holds its own mixer and the MLP after it (and so its kind),
        // whichever key proposed the count.
        if let Some((starts, end)) = at_input_norms(seq, blocks, before) {
            return Some(Placed {
                starts,
                end,
                by_mixers: true,
                at_norms: true,
            });
        }
        let at: Vec<usize> = blocks.iter().map(|b| b.0).collect();
        let (starts, end) = before_keys(seq, &at, true)?;
        return Some(Placed {
            starts,
            end,
            by_mixers: true,
            at_norms: false,
        });
    }
    let (starts, end) = before_keys(seq, pos, false)?;
    // More mixer blocks than layers, each layer holding one: one run of a
    // training step (forward or backward); the other run's blocks lie
    // outside these layers.
    let one_each = !blocks.is_empty()
        && (0..starts.len()).all(|i| {
            let e = starts.get(i + 1).copied().unwrap_or(end);
            blocks
                .iter()
                .filter(|b| (starts[i]..e).contains(&b.0))
                .count()
                == 1
        });
    Some(Placed {
        starts,
        end,
        by_mixers: one_each,
        at_norms: false,
    })
}

/// Whether a key runs once before the first mixer block and then once
/// after each block, before the next: once in the model's head, then once
/// a layer. Cut there, the first layer is the head's tail and the first
/// layer, and the last is the model's output alone (PixArt's DiT projects
/// its caption with a GELU MLP before its blocks, and each block's MLP
/// runs a GELU: 6 layers of 5, `hf/pixart-5l-*`, where the blocks cut the
/// 5). Such a key is no layer's; the blocks, or another key, cut them.
fn in_head_then_each_block(pos: &[usize], blocks: &[(usize, usize)]) -> bool {
    pos.len() == blocks.len() + 1
        && blocks.len() >= 2
        && pos[0] < blocks[0].0
        && (1..pos.len())
            .all(|i| pos[i] > blocks[i - 1].1 && blocks.get(i).is_none_or(|b| pos[i] < b.0))
}

/// Whether each key position lies between the blocks before and after
/// its own: the key runs in the blocks' layers, not in another run of as
/// many (a training step's backward key, where the backward runs no block:
/// eager attention's softmax backward says no scores, `hf/gpt2-eager-4l-train`).
fn interleaved(pos: &[usize], blocks: &[(usize, usize)]) -> bool {
    (0..pos.len()).all(|i| {
        (i == 0 || pos[i] > blocks[i - 1].1) && blocks.get(i + 1).is_none_or(|b| pos[i] < b.0)
    })
}

/// Where one step's layers lie.
struct Placed {
    /// Each layer's start.
    starts: Vec<usize>,
    /// The last layer's end.
    end: usize,
    /// Cut around one mixer block each.
    by_mixers: bool,
    /// Each starting at its input norm.
    at_norms: bool,
}

/// Names: each layer from its input norm (the first norm after the
/// previous block's MLP), if every block has one, and the last layer up to
/// the final norm.
fn at_input_norms(
    seq: &[Item],
    blocks: &[(usize, usize)],
    before: Option<(usize, usize)>,
) -> Option<(Vec<usize>, usize)> {
    let n = blocks.len();
    // The block before each layer's: the previous layer's, or `before`.
    let prev: Vec<Option<(usize, usize)>> = std::iter::once(before)
        .chain(blocks[..n.saturating_sub(1)].iter().copied().map(Some))
        .collect();
    let mut starts = Vec::with_capacity(n);
    for (b, p) in blocks.iter().zip(&prev) {
        starts.push(match p {
            None => norm_after_ffn(seq, 0, b.0, false)?,
            Some(p) => input_norm(seq, p.1 + 1, b.0)?,
        });
    }
    let end = final_norm(seq, blocks, &starts)?;
    // Items before each start that every layer has in common (a cast
    // before the norm) belong to the layer, but not back past the previous
    // layer's MLP.
    let floor: Vec<usize> = prev
        .iter()
        .zip(&starts)
        .map(|(p, &start)| match p {
            None => 0,
            Some(p) => (p.1 + 1..start)
                .rev()
                .find(|&k| seq[k].role.is_ffn())
                .map_or(p.1 + 1, |k| k + 1),
        })
        .collect();
    let mut k = 0;
    while starts.iter().zip(&floor).all(|(&s, &f)| s > f + k)
        && end > starts[n - 1] + k
        && starts
            .iter()
            .all(|&s| seq[s - k - 1].name == seq[starts[0] - k - 1].name)
    {
        k += 1;
    }
    Some((starts.iter().map(|s| s - k).collect(), end - k))
}

/// Without names: each layer starts as many items before its key as every
/// key, the first included, has the same items before it; the last layer
/// is as long as the earlier layer it is most like (the one whose items it
/// repeats the furthest, the latest on a tie): an interleaved model's last
/// MoE layer as long as its MoE layers, not as the dense one before it
/// (`interleaved-compile-4l` of the family's seed 7). Before mixer blocks
/// (`own_items`), where that reaches further back in every layer, as many
/// of the items whose names run before every block ([`before_blocks`]).
fn before_keys(seq: &[Item], pos: &[usize], own_items: bool) -> Option<(Vec<usize>, usize)> {
    let n = pos.len();
    let gaps: Vec<usize> = pos.windows(2).map(|w| w[1] - w[0]).collect();
    let min_gap = gaps.iter().copied().min()?;
    let mut k = 0;
    while k + 1 < min_gap && k < pos[0] {
        let name = seq[pos[0] - k - 1].name;
        if pos.iter().all(|&m| seq[m - k - 1].name == name) {
            k += 1;
        } else {
            break;
        }
    }
    let starts: Vec<usize> = pos.iter().map(|&m| m - k).collect();
    if own_items {
        if let Some((further, alike)) = before_blocks(seq, pos, k) {
            if further.iter().zip(&starts).all(|(f, s)| f < s) {
                let end = last_alike(seq, &further, &alike);
                return Some((further, end));
            }
        }
    }
    let last = starts[n - 1];
    let like = |i: usize| {
        let len = starts[i + 1] - starts[i];
        (0..len)
            .take_while(|&j| last + j < seq.len() && seq[last + j].name == seq[starts[i] + j].name)
            .count()
    };
    let most_like = (0..n - 1).max_by_key(|&i| (like(i), i)).unwrap_or(n - 2);
    let end = (last + (starts[most_like + 1] - starts[most_like])).min(seq.len());
    Some((starts, end))
}

/// Each mixer block's layer from as many items before the block as every
/// layer has alike there, counting only the names that run before every
/// block (since the block before, or the step's start): a name that some
/// layers run there and others do not is those layers' own, and is passed
/// over. Llama 4 under `torch.compile` on the CPU runs no norm the
/// profiler sees (Inductor's C++ fuses them), and its NoPE layer (every
/// fourth) no rotary ops: each layer's query, key and value projections
/// (`mm`, each with its rotary ops in the others) then start it, where
/// the items alike before every block were one `mm` and each layer held
/// the next one's projections (`hf/llama4-4l-compiled`: no layers, its
/// layers 33% alike). The walk leaves each block before a layer's at
/// least one such item of its own.
fn before_blocks(seq: &[Item], pos: &[usize], k: usize) -> Option<(Vec<usize>, HashSet<Sym>)> {
    let from = |i: usize| if i == 0 { 0 } else { pos[i - 1] + 1 };
    let names_before =
        |i: usize| -> HashSet<Sym> { seq[from(i)..pos[i]].iter().map(|it| it.name).collect() };
    // The names before every block; before every block but the first (the
    // tail of the layer before: the first has none); before some later
    // block.
    let first = names_before(0);
    let mut common = first.clone();
    let mut tails: Option<HashSet<Sym>> = None;
    let mut later: HashSet<Sym> = HashSet::new();
    for i in 1..pos.len() {
        let here = names_before(i);
        common.retain(|s| here.contains(s));
        match &mut tails {
            None => {
                tails = Some(
                    here.iter()
                        .copied()
                        .filter(|s| !first.contains(s))
                        .collect(),
                )
            }
            Some(t) => t.retain(|s| here.contains(s)),
        }
        later.extend(here);
    }
    let tails = tails.unwrap_or_default();
    // Only where the items alike before every block stop at a layer's own
    // item: one that the first layer and some later ones run there, but
    // not all (a rotary op). Where they stop at the model's head (a name
    // only the first layer runs there: SD3's patch embedding, which
    // Inductor places after the first block's modulation), the layers
    // begin where they stop (`hf/sd3-6l-compiled`, whose first layer took
    // the convolution).
    let own = |s: Sym| first.contains(&s) && later.contains(&s) && !common.contains(&s);
    if common.is_empty()
        || pos.iter().any(|&m| m <= k)
        || !pos.iter().any(|&m| own(seq[m - k - 1].name))
    {
        return None;
    }
    let alike_before = |i: usize, at: usize| {
        (from(i)..at)
            .rev()
            .find(|&j| common.contains(&{ seq[j].name }))
    };
    let mut at = pos.to_vec();
    let mut walked = false;
    'walk: loop {
        let mut next = Vec::with_capacity(pos.len());
        for i in 0..pos.len() {
            let Some(p) = alike_before(i, at[i]) else {
                break 'walk;
            };
            let leaves_one = i == 0 || alike_before(i, p).is_some();
            let passes_tail = (p + 1..at[i]).any(|j| tails.contains(&{ seq[j].name }));
            let same = next
                .first()
                .is_none_or(|&q: &usize| seq[q].name == seq[p].name);
            if !leaves_one || passes_tail || !same {
                break 'walk;
            }
            next.push(p);
        }
        at = next;
        walked = true;
    }
    walked.then_some((at, common))
}

/// Where the last layer ends, its layers placed by [`before_blocks`]
/// (`alike`: the names before every block): after as many items of those
/// names as the earlier layer it is most like runs (the one whose items of
/// those names it repeats the furthest, the latest on a tie), and the
/// items after that an earlier layer runs too, up to the next of those
/// names (the LM head's `mm`). Llama 4's last layer is a NoPE layer with
/// experts, eleven items, where the dense layer before runs seventeen.
fn last_alike(seq: &[Item], starts: &[usize], alike: &HashSet<Sym>) -> usize {
    let n = starts.len();
    let last = starts[n - 1];
    let alike_in = |from: usize, to: usize| {
        (from..to)
            .filter(|&j| alike.contains(&{ seq[j].name }))
            .collect::<Vec<usize>>()
    };
    let tail = alike_in(last, seq.len());
    let like = |i: usize| {
        let own = alike_in(starts[i], starts[i + 1]);
        let same = own
            .iter()
            .zip(&tail)
            .take_while(|&(&a, &b)| seq[a].name == seq[b].name)
            .count();
        (same, own.len())
    };
    let most_like = (0..n - 1).max_by_key(|&i| (like(i).0, i)).unwrap_or(n - 2);
    let Some(&after) = tail.get(like(most_like).1.saturating_sub(1)) else {
        return seq.len();
    };
    let earlier: HashSet<Sym> = seq[starts[0]..last].iter().map(|it| it.name).collect();
    let mut end = after + 1;
    while end < seq.len()
        && !alike.contains(&{ seq[end].name })
        && earlier.contains(&{ seq[end].name })
    {
        end += 1;
    }
    end
}

/// A key's layers over some steps, scored.
struct Tried {
    bounds: Vec<(Vec<usize>, usize)>,
    share: f64,
    /// The least core share among the layers of one kind (with attention,
    /// or without), where layers of both kinds are cut by mixer blocks or
    /// by norm pairs (a hybrid); `share` otherwise.
    kind_share: f64,
    /// Cut by norm pairs ([`Key::NormPairs`]).
    norm_pairs: bool,
    /// Cut by either of two names ([`Key::Either`]), a kind each.
    two_names: bool,
    /// Every layer holds one mixer block.
    by_mixers: bool,
    /// Every layer starts at its input norm.
    at_norms: bool,
    /// Every layer runs a norm and an MLP, MoE or gate item ([`Role::is_block_part`]).
    blocks_like: bool,
    /// Every layer routes its tokens to experts ([`routed`]) and runs an
    /// expert item: a router names an MoE layer as a mixer block names a
    /// layer. Under `torch.compile` on the CPU, Inductor writes the norms
    /// and an eager attention's softmax as C++ the profiler does not
    /// record, and the router is what is left to tell the layers
    /// (`hf/mixtral-eager-4l-compiled`: no layers before). Such a split
    /// may be a training step's forward run, as one cut by mixer blocks
    /// may (`hf/mixtral-eager-4l-compiled-train`: no layers before).
    by_routers: bool,
    /// Time in the layers, and in the steps, ns.
    covered: i64,
    total: i64,
}

impl Tried {
    /// Whether these are a model's layers rather than a loop's iterations:
    /// one attention or mixer block each, or alike, many and each with a
    /// norm and an MLP (a decoder block whose attention has no telling name).
    fn holds(&self, layers: usize) -> bool {
        self.alike(layers)
            && self.covered as f64 >= limits::get(Limit::LayerCoverage) * self.total as f64
    }

    /// [`Tried::holds`] but for the time the layers cover (one run of a
    /// training step may cover less than [`Limit::LayerCoverage`]).
    fn alike(&self, layers: usize) -> bool {
        self.alike_as(layers, true)
    }

    /// [`Tried::alike`] for a training step's backward run, after a forward
    /// run that told the blocks and their number: its layers need not show
    /// a norm, since a norm written out op by op says itself by its
    /// `rsqrt`, and a backward run's `RsqrtBackward0` says nothing
    /// (Hugging Face's models trained on the CPU, `hf/gpt2-eager-4l-train`
    /// and beyond, and 16 of the family's 21 training captures: their
    /// forward layers alone before); nor be [`Limit::UnnamedLayers`] or
    /// more, which keeps a loop's few iterations from passing for layers,
    /// where the forward run already counted them (the margin test moves
    /// it to 5: the 4-layer training captures kept their backward runs).
    fn alike_backward(&self, layers: usize) -> bool {
        self.alike_as(layers, false)
    }

    /// [`Tried::alike`], where `unnamed` (as a layer split on its own) or
    /// not (as a backward run after a forward one): what a split whose
    /// layers no mixer cuts and no router names must show.
    fn alike_as(&self, layers: usize, unnamed: bool) -> bool {
        let hybrid =
            (self.by_mixers || self.norm_pairs || self.two_names) && self.kind_share > self.share;
        let alike = if hybrid {
            self.kind_share >= limits::get(Limit::LayerShare)
                && self.share >= limits::get(Limit::MixedLayerShare)
        } else {
            self.share >= limits::get(Limit::LayerShare)
        };
        // Norm pairs place each layer at its input norm: a hybrid's kinds
        // need only be alike among themselves, as mixer blocks' do.
        alike
            && (self.by_mixers
                || self.by_routers
                || ((layers >= limits::count(Limit::UnnamedLayers) || !unnamed)
                    && (self.share >= limits::get(Limit::UnnamedLayerShare)
                        || hybrid && (self.norm_pairs || self.two_names))
                    && (self.blocks_like || !unnamed)))
    }
}

/// The names of the items, as dense ids: per name (a [`Sym`], which the
/// text bound keeps to a few tens of thousands), not per item, so the
/// search holds no second array the size of the steps' sequences (4 bytes
/// an item: 12 MB of `steps3m`'s peak in BENCHMARKS.md).
struct Ids {
    of_name: Vec<u32>,
    count: usize,
}

impl Ids {
    /// The dense id of an item's name.
    #[inline]
    fn of(&self, it: &Item) -> usize {
        self.of_name[it.name as usize] as usize
    }
}

/// `family` names a kernel's family: one id for the kernels that differ only
/// by a compiler's numbering (Inductor's `triton_red_fused_rms_norm_add_12`
/// and `_14` are one fused norm at two sites), so layers that run the same
/// work under other numbers are alike.
fn ids(steps: &[&[Item]], family: &mut dyn FnMut(Sym) -> u32) -> Ids {
    let names = steps
        .iter()
        .flat_map(|s| s.iter())
        .map(|it| it.name as usize)
        .max();
    let mut of_name = vec![u32::MAX; names.map_or(0, |n| n + 1)];
    let mut map: HashMap<u32, u32> = HashMap::new();
    for it in steps.iter().flat_map(|s| s.iter()) {
        let slot = &mut of_name[it.name as usize];
        if *slot == u32::MAX {
            let f = family(it.name);
            let next = map.len() as u32;
            *slot = *map.entry(f).or_insert(next);
        }
    }
    Ids {
        of_name,
        count: map.len(),
    }
}

/// The layers `key` makes in `steps` (indices into `all`), if it makes
/// layers in every one of them.
fn try_key(st: &Steps, steps: &[usize], key: Key, count: usize) -> Option<Tried> {
    let (all, blocks, ids, dur) = (st.all, st.blocks, st.ids, st.dur);
    let mut led = 0;
    let mut bounds = Vec::with_capacity(steps.len());
    let (mut by_mixers, mut at_norms) = (true, true);
    let (mut covered, mut total) = (0i64, 0i64);
    // Per name: the last layer it was seen in, and in how many layers.
    let mut last = vec![u32::MAX; ids.count];
    let mut seen = vec![0u32; ids.count];
    let mut layers = 0u32;
    // The same, per kind of mixer block (attention, linear), where the
    // layers are cut by blocks.
    // Kinds: with attention or not, with a top-k (routed experts) or not,
    // with a cross-attention or not.
    let mut kinds: [KindSeen; 8] = std::array::from_fn(|_| KindSeen::new(ids.count));
    let mut blocks_like = true;
    let mut by_routers = true;
    for &s in steps {
        let seq = all[s];
        let (pos, final_norm) = positions(seq, key, &blocks[s]);
        if in_head_then_each_block(&pos, &blocks[s]) {
            return None;
        }
        // Runs before the step's layers (`Steps::lead`): their blocks are
        // no layer's.
        let extra = pos.len().checked_sub(count)?;
        if extra > 0 && !(st.lead && s != st.first) {
            return None;
        }
        led += usize::from(extra > 0);
        let skip = match extra {
            0 => 0,
            _ => blocks[s]
                .iter()
                .take_while(|b| b.0 <= pos[extra - 1])
                .count(),
        };
        let before = skip.checked_sub(1).map(|k| blocks[s][k]);
        let Placed {
            starts,
            mut end,
            by_mixers: mixers,
            at_norms: norms,
        } = place(seq, &pos[extra..], &blocks[s][skip..], before)?;
        if let Some(e) = final_norm.filter(|&e| e > starts[starts.len() - 1]) {
            end = e;
        }
        by_mixers &= mixers;
        at_norms &= norms;
        let cross = crossing(seq, &blocks[s], &starts, end);
        let layer_end = |i: usize| starts.get(i + 1).copied().unwrap_or(end);
        let routing: Vec<bool> = (0..starts.len())
            .map(|i| routed(seq, starts[i], layer_end(i)))
            .collect();
        let topk_everywhere = routing.iter().all(|&r| r);
        for i in 0..starts.len() {
            let e = layer_end(i);
            if e < starts[i] + MIN_LAYER_ITEMS {
                return None;
            }
            let has = Holds::of(&seq[starts[i]..e]);
            blocks_like &= has.norm && has.block_part;
            let routes = routing[i];
            by_routers &= routes && has.experts;
            // A step that runs more before its layers (`Steps::lead`) is
            // a prefill, whose layers run more than the decodes' (BART's
            // make their cache and project the encoder's output: 45% of
            // their names in every layer with them, at a limit of 40%):
            // the decodes say how alike the layers are.
            if extra > 0 {
                continue;
            }
            // A layer of its kind by [`is_moe`]: a sparse-attention
            // indexer's top-k runs in a dense layer too (GLM-5's DSA under
            // `torch.compile` on the CPU: its dense first layer, alike to
            // no MoE layer, kept the split from holding,
            // hf/glmdsa-4l-compiled).
            let moe = is_moe(has.experts, routes, has.combine, topk_everywhere);
            // Cut by either of two names: a layer's kind is which it runs.
            let mixer = match key {
                Key::Either(a, _) => seq[starts[i]..e].iter().any(|it| it.name == a),
                _ => has.attention,
            };
            let kind =
                &mut kinds[usize::from(mixer) + 2 * usize::from(moe) + 4 * usize::from(cross[i])];
            for k in starts[i]..e {
                let id = ids.of(&seq[k]);
                if last[id] != layers {
                    last[id] = layers;
                    seen[id] += 1;
                    kind.seen[id] += 1;
                }
            }
            kind.layers += 1;
            layers += 1;
        }
        covered += seq[starts[0]..end].iter().map(dur).sum::<i64>();
        total += seq.iter().map(dur).sum::<i64>();
        bounds.push((starts, end));
    }
    if led > 0 && led * 2 >= steps.len() {
        return None;
    }
    let share = core_share(&seen, layers);
    let norm_pairs = matches!(key, Key::NormPairs(_));
    let two_names = matches!(key, Key::Either(..));
    let kind_share = if (by_mixers || norm_pairs || two_names)
        && kinds.iter().filter(|k| k.layers > 0).count() >= 2
    {
        kinds
            .iter()
            .filter(|k| k.layers > 0)
            .map(|k| core_share(&k.seen, k.layers))
            .fold(f64::INFINITY, f64::min)
    } else {
        share
    };
    Some(Tried {
        bounds,
        share,
        kind_share,
        norm_pairs,
        two_names,
        by_mixers,
        at_norms,
        blocks_like,
        by_routers,
        covered,
        total,
    })
}

/// The roles a layer's items hold that its split reads, found in one pass.
#[derive(Default)]
struct Holds {
    norm: bool,
    /// An MLP, MoE or gate item ([`Role::is_block_part`]).
    block_part: bool,
    attention: bool,
    experts: bool,
    combine: bool,
}

impl Holds {
    fn of(layer: &[Item]) -> Holds {
        let mut h = Holds::default();
        for it in layer {
            h.norm |= it.role == Role::Norm;
            h.block_part |= it.role.is_block_part();
            h.attention |= it.role == Role::Attention;
            h.experts |= it.role == Role::Moe;
            h.combine |= it.role == Role::Combine;
        }
        h
    }
}

/// Whether a layer routes tokens to experts, from what runs in it: items
/// that name experts, or a top-k (a router) whose rows come back by index
/// (`combine`), or a top-k that only some layers of the step run (a dense
/// prefix before MoE layers). A top-k in every layer and no expert items is
/// a sparse-attention indexer's (GLM-5's DSA: its dense layers were called
/// MoE; the family's `dsa-*` captures). One rule for a layer's kind
/// (`layers::label_kinds`) and for the kinds a split's layers are alike
/// within ([`try_key`]).
pub(crate) fn is_moe(experts: bool, topk: bool, combine: bool, topk_everywhere: bool) -> bool {
    experts || (topk && (combine || !topk_everywhere))
}

/// Whether `seq[from..to]` routes tokens to experts: a top-k, or a top-1
/// router's softmax ([`router`]).
fn routed(seq: &[Item], from: usize, to: usize) -> bool {
    (from..to).any(|k| match seq[k].role {
        Role::TopK => true,
        Role::Scores => router(seq, k) == Some(Role::Top1),
        _ => false,
    })
}

/// Per layer, whether it holds a block with a norm inside: a self- and a
/// cross-attention joined ([`cross_attention`]), a decoder's layer beside
/// an encoder's.
fn crossing(seq: &[Item], blocks: &[(usize, usize)], starts: &[usize], end: usize) -> Vec<bool> {
    (0..starts.len())
        .map(|i| {
            let e = starts.get(i + 1).copied().unwrap_or(end);
            blocks.iter().any(|b| {
                (starts[i]..e).contains(&b.0)
                    && seq[b.0..=b.1].iter().any(|it| it.role == Role::Norm)
            })
        })
        .collect()
}

/// Per name, in how many layers of one kind it was seen.
struct KindSeen {
    seen: Vec<u32>,
    layers: u32,
}

impl KindSeen {
    fn new(names: usize) -> KindSeen {
        KindSeen {
            seen: vec![0; names],
            layers: 0,
        }
    }
}

/// Names seen in every one of `layers` layers over names seen in any.
fn core_share(seen: &[u32], layers: u32) -> f64 {
    let any = seen.iter().filter(|&&c| c > 0).count();
    let every = seen.iter().filter(|&&c| c == layers).count();
    every as f64 / any.max(1) as f64
}

/// The split of the steps into layers, if one holds.
/// `dur` is each item's time (what the layers must cover).
/// `family` as [`ids`] takes it.
pub(crate) fn find(
    steps: &[Vec<Item>],
    dur: DurOf,
    family: &mut dyn FnMut(Sym) -> u32,
) -> Option<Split> {
    let all: Vec<&[Item]> = steps.iter().map(Vec::as_slice).collect();
    let nonempty: Vec<usize> = (0..all.len()).filter(|&s| !all[s].is_empty()).collect();
    let &first = nonempty.first()?;
    let blocks: Vec<Vec<(usize, usize)>> = all.iter().map(|s| mixer_blocks(s)).collect();
    let ids = ids(&all, family);
    let st = Steps {
        all: &all,
        blocks: &blocks,
        ids: &ids,
        nonempty: &nonempty,
        first,
        dur,
        lead: false,
    };
    search(&st)
        .or_else(|| {
            // Where no key cuts every step alike: the keys of the shortest
            // step, which the others may run more often before its layers (a
            // prefill that runs an encoder, or a vision tower, before the
            // decoder's layers, named as them: Hugging Face's BART, T5,
            // Whisper and Qwen2.5-VL, steps marked, had no layers). Steps that
            // do are fewer than half: two passes, one cut short by the end of
            // the profile, are no prefill and a decode (`unmarked/
            // generate-dense-6l` kept from 25% to 60% of its span said 5
            // layers of 6 at half). Only where the first step runs more mixer
            // blocks than the shortest, as such a prefill does: a search costs
            // as much again (+29% instructions on `hta-a100-train-rank3of8`,
            // whose six like steps no key cuts).
            let &least = nonempty.iter().min_by_key(|&&s| (all[s].len(), s))?;
            let more = blocks[first].len() > blocks[least].len() && blocks[least].len() >= 2;
            let st = Steps {
                first: least,
                lead: true,
                ..st
            };
            more.then(|| search(&st)).flatten()
        })
        .or_else(|| layer_drop(&st))
}

/// Where no key cuts every step alike: a split of the steps that run the
/// most mixer blocks, where every other step runs fewer items, all of
/// names the full steps run (the same model, fewer of its layers).
/// Training with LayerDrop skips each layer at random in each step
/// (Hugging Face's Wav2Vec2 and HuBERT by default at 0.1, M2M100 and NLLB
/// at 0.05): a 6-layer Wav2Vec2's four training steps ran 6, 4, 6 and 5
/// layers, and `hf/m2m100-3e3d-train`'s (3 + 3 layers at 0.1) 7, 5 and 9
/// of 9 attention blocks, where a split every step must hold found none.
/// A skipped layer still draws its chance (`aten::rand`), so a key may
/// still run in every layer of a short step, around no layer's work. A
/// step runs every layer with odds (1 - p)^layers (8% for 24 layers at
/// 0.1), so one full step is enough. The other steps hold no layers
/// ([`Split::bounds`] empty): which layers they skipped is not in the
/// trace, and the layers' figures leave them out. Costs a search only
/// where the steps run different numbers of blocks.
fn layer_drop(st: &Steps) -> Option<Split> {
    let most = st.nonempty.iter().map(|&s| st.blocks[s].len()).max()?;
    let (full, short): (Vec<usize>, Vec<usize>) = st
        .nonempty
        .iter()
        .copied()
        .partition(|&s| st.blocks[s].len() == most);
    (!short.is_empty() && most >= 2).then_some(())?;
    let mut known = vec![false; st.ids.count];
    for it in full.iter().flat_map(|&s| st.all[s]) {
        known[st.ids.of(it)] = true;
    }
    let least = full.iter().map(|&s| st.all[s].len()).min()?;
    let model = st.all[full[0]];
    let name = |it: &Item| st.ids.of(it);
    // A step the profile cut (a window opened or closed inside a pass)
    // runs fewer items of the same names too, but starts or ends inside
    // the pass (`unmarked/generate-dense-6l` from 25% to 60% of its span:
    // a pass cut at its start beside a whole one). A step that skipped
    // layers starts and ends as the full ones do (the input, the loss,
    // its backward's head and the optimizer: [`Limit::LayerDropEnds`]
    // items at each end).
    let ends = |seq: &[Item]| {
        let k = limits::count(Limit::LayerDropEnds).min(seq.len());
        seq[..k].iter().map(name).eq(model[..k].iter().map(name))
            && seq[seq.len() - k..]
                .iter()
                .map(name)
                .eq(model[model.len() - k..].iter().map(name))
    };
    let fewer = |s: usize| {
        let seq = st.all[s];
        seq.len() < least && seq.iter().all(|it| known[name(it)]) && ends(seq)
    };
    short.iter().all(|&s| fewer(s)).then_some(())?;
    search(&Steps {
        nonempty: &full,
        first: full[0],
        lead: false,
        ..*st
    })
}

/// [`find`] with the keys of `st.first`.
fn search(st: &Steps) -> Option<Split> {
    let (all, blocks, first) = (st.all, st.blocks, st.first);
    // Candidates: keys that occur at least twice in the first step.
    let mut counts: HashMap<Key, usize> = HashMap::new();
    for it in all[first] {
        *counts.entry(Key::Name(it.name)).or_default() += 1;
        if it.role == Role::Norm {
            *counts.entry(Key::NormPairs(it.name)).or_default() += 1;
        }
        if it.group != u32::MAX {
            *counts.entry(Key::Group(it.group)).or_default() += 1;
        }
    }
    let mut cands: Vec<(Key, usize)> = counts
        .into_iter()
        .filter(|(k, c)| !matches!(k, Key::NormPairs(_)) || c % 2 == 1)
        .map(|(k, c)| match k {
            Key::NormPairs(_) => (k, c / 2),
            _ => (k, c),
        })
        .filter(|(_, c)| (2..=MAX_LAYERS).contains(c))
        .collect();
    if (2..=MAX_LAYERS).contains(&blocks[first].len()) {
        cands.push((Key::Mixer, blocks[first].len()));
    }
    // Most occurrences first; a key's name before its geometry.
    cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // The structural keys (mixer blocks, norm pairs) are always tried: a
    // training step's hundreds of backward names run more often than its
    // layers, and would push them past the cut.
    type Cands = Vec<(Key, usize)>;
    let (structural, mut named): (Cands, Cands) = cands
        .into_iter()
        .partition(|(k, _)| matches!(k, Key::Mixer | Key::NormPairs(_)));
    named.truncate(MAX_CANDIDATES);
    let mut cands = named;
    cands.extend(structural);
    cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // Score each on the first step (cheap), then check the best on all.
    let mut passed: Vec<(usize, f64, usize, Key)> = Vec::new();
    // Keys whose layers are alike and hold one mixer block each, or each
    // route to experts (`Tried::by_routers`; a training step's backward
    // blocks, named or not, come after): a forward run. Blocks before its
    // first layer hold no attention: a front end of convolutions, which pass for a Mamba mixer's (Wav2Vec2
    // over raw audio: two, and one positional; `hf/wav2vec2-6l-train` had
    // its forward layers alone).
    let mut runs: Vec<Run> = Vec::new();
    for &(key, c) in &cands {
        if let Some(t) = try_key(st, &[first], key, c) {
            if t.holds(c) {
                passed.push((c, t.share, t.bounds[0].0[0], key));
            }
            let (start, end) = (t.bounds[0].0[0], t.bounds[0].1);
            let seq = all[first];
            let inside = blocks[first]
                .iter()
                .filter(|b| (start..end).contains(&b.0))
                .count();
            let front = blocks[first]
                .iter()
                .take_while(|b| b.0 < start)
                .all(|b| seq[b.0..=b.1].iter().all(|it| it.role != Role::Attention));
            if (t.by_mixers && inside == c || t.by_routers) && front && t.alike(c) {
                runs.push(Run {
                    count: c,
                    share: t.share,
                    start: t.bounds[0].0[0],
                    end: t.bounds[0].1,
                    key,
                });
            }
        }
    }
    let most = passed.iter().map(|p| p.0).max().unwrap_or(0);
    if let Some(split) = training(st, &runs, most) {
        return Some(split);
    }
    // The most layers; then the most alike; then the earliest first layer
    // (a cut in the middle of every layer starts the first one late).
    passed.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    for &(c, _, _, key) in passed.iter().take(MAX_CHECKED) {
        let Some(t) = try_key(st, st.nonempty, key, c) else {
            continue;
        };
        // A forward run whose layers cover too little of the steps: a
        // training step's forward layers, still the model's (as in
        // `forward_alone`), before a split with fewer layers.
        let run = runs.iter().any(|r| r.key == key && r.count == c);
        if t.holds(c) || (run && t.alike(c) && t.by_mixers) {
            return Some(split_of(st, key, t, None));
        }
    }
    forward_alone(st, &runs)
}

/// The steps as [`find`] reads them.
struct Steps<'a> {
    all: &'a [&'a [Item]],
    blocks: &'a [Vec<(usize, usize)>],
    ids: &'a Ids,
    nonempty: &'a [usize],
    first: usize,
    dur: DurOf<'a>,
    /// Whether a step may run a key more often than the first step, its
    /// layers then being the last runs (fewer than half the steps may).
    lead: bool,
}

/// A key whose layers could be a training step's forward run, on the first
/// step.
struct Run {
    count: usize,
    share: f64,
    start: usize,
    end: usize,
    key: Key,
}

/// A split from a key's layers over every non-empty step, and a backward
/// run's.
fn split_of(st: &Steps, key: Key, f: Tried, b: Option<Tried>) -> Split {
    let mut bounds: Vec<(Vec<usize>, usize)> = vec![(Vec::new(), 0); st.all.len()];
    let mut backward = bounds.clone();
    let share = b.as_ref().map_or(f.share, |b| f.share.min(b.share));
    for (&s, fb) in st.nonempty.iter().zip(f.bounds) {
        bounds[s] = fb;
    }
    if let Some(b) = b {
        for (&s, bb) in st.nonempty.iter().zip(b.bounds) {
            backward[s] = bb;
        }
    }
    Split {
        key,
        bounds,
        share,
        at_norms: f.at_norms,
        backward,
    }
}

/// The forward run best at `count` layers: the most alike, then the earliest.
fn best_run(runs: &[Run], count: usize) -> Option<&Run> {
    runs.iter().filter(|r| r.count == count).max_by(|a, b| {
        a.share
            .total_cmp(&b.share)
            .then(b.start.cmp(&a.start))
            .then(b.key.cmp(&a.key))
    })
}

/// A training step's layers: a forward run and a backward run of the same
/// number of layers, the backward run after the forward one in every step,
/// together covering [`Limit::LayerCoverage`] of the steps' time. The backward run
/// is cut by a name that runs that many times, all after the forward run
/// (an autograd node such as `SiluBackward0`), and holds one mixer block a
/// layer where the step has twice the forward's blocks; where only some of
/// the backward is named (a hybrid's attention backward, not its linear
/// mixer's) or none is (attention decomposed), it need not. Taken over a
/// single key's layers only where it has at least as many (`most`).
fn training(st: &Steps, runs: &[Run], most: usize) -> Option<Split> {
    let mut counts: Vec<usize> = runs
        .iter()
        .map(|r| r.count)
        .filter(|&c| c >= most.max(2))
        .collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    counts.dedup();
    for c in counts {
        let Some(fwd) = best_run(runs, c) else {
            continue;
        };
        let Some(bwd) = backward_key(st, fwd, c) else {
            continue;
        };
        let (Some(f), Some(b)) = (
            try_key(st, st.nonempty, fwd.key, c),
            try_key(st, st.nonempty, bwd, c),
        ) else {
            continue;
        };
        let after = f.bounds.iter().zip(&b.bounds).all(|(f, b)| f.1 <= b.0[0]);
        let mixers = b.by_mixers || st.blocks[st.first].len() != 2 * c;
        if !(f.alike(c) && b.alike_backward(c) && (f.by_mixers || f.by_routers) && mixers && after)
        {
            continue;
        }
        if ((f.covered + b.covered) as f64) < limits::get(Limit::LayerCoverage) * f.total as f64 {
            continue;
        }
        return Some(split_of(st, fwd.key, f, Some(b)));
    }
    None
}

/// Keys tried for a backward run: the names that run exactly as often as
/// the forward layers, all after them, earliest first. A backward pass
/// runs a few dozen autograd nodes a layer (`MmBackward0`,
/// `SiluBackward0`, …), so 32 reaches past the first layer's; each try is
/// one pass over the first step. Where none cuts alike layers, as many of
/// the names that run a whole number of times a layer, each taken every
/// that many runs ([`Key::Every`]).
const MAX_BACKWARD_KEYS: usize = 32;

/// The key that cuts a backward run of `c` layers after `fwd` in the first
/// step, if one does: among the names that run exactly `c` times, all after
/// the forward run, the one whose layers are the most alike (then the
/// earliest); else the same among the names that run `n * c` times (`n`
/// from 2), every `n`-th run.
fn backward_key(st: &Steps, fwd: &Run, c: usize) -> Option<Key> {
    let seq = st.all[st.first];
    let mut counts: HashMap<Sym, (usize, usize)> = HashMap::new();
    for (k, it) in seq.iter().enumerate() {
        let e = counts.entry(it.name).or_insert((0, k));
        e.0 += 1;
    }
    let twice = st.blocks[st.first].len() == 2 * c;
    let best = |once: bool| {
        let mut keys: Vec<(usize, Key)> = counts
            .iter()
            .filter(|&(_, &(n, at))| at >= fwd.end && (n == c) == once && n.is_multiple_of(c))
            .map(|(&name, &(n, at))| match n / c {
                1 => (at, Key::Name(name)),
                n => (at, Key::Every(name, n as u32)),
            })
            .collect();
        keys.sort_unstable();
        keys.into_iter()
            .take(MAX_BACKWARD_KEYS)
            .filter_map(|(_, key)| {
                let t = try_key(st, &[st.first], key, c)?;
                (t.alike_backward(c) && (t.by_mixers || !twice)).then_some((
                    t.share,
                    t.bounds[0].0[0],
                    key,
                ))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, _, key)| key)
    };
    best(true)
        .or_else(|| best(false))
        .or_else(|| either_key(st, fwd, c))
}

/// Most pairs of names [`either_key`] tries.
const MAX_EITHER_KEYS: usize = 32;

/// Where no one name cuts the backward run of `c` layers after `fwd`: two
/// names that run, all after the forward run, `c` times between them, in
/// the order of the forward layers' two kinds in reverse (the layers with
/// attention or not, with experts or not), the first name in the kind of
/// the last layer; of those that cut alike layers (each kind alike within
/// itself), the most alike, then the earliest ([`Key::Either`]).
fn either_key(st: &Steps, fwd: &Run, c: usize) -> Option<Key> {
    let seq = st.all[st.first];
    let f = try_key(st, &[st.first], fwd.key, c)?;
    let (starts, end) = &f.bounds[0];
    let layer_end = |i: usize| starts.get(i + 1).copied().unwrap_or(*end);
    let routing: Vec<bool> = (0..c)
        .map(|i| routed(seq, starts[i], layer_end(i)))
        .collect();
    let everywhere = routing.iter().all(|&r| r);
    let kinds: Vec<(bool, bool)> = (0..c)
        .rev()
        .map(|i| {
            let has = Holds::of(&seq[starts[i]..layer_end(i)]);
            let moe = is_moe(has.experts, routing[i], has.combine, everywhere);
            (has.attention, moe)
        })
        .collect();
    if kinds.iter().all(|&k| k == kinds[0]) {
        return None;
    }
    let mut runs: HashMap<Sym, Vec<usize>> = HashMap::new();
    for (k, it) in seq.iter().enumerate() {
        runs.entry(it.name).or_default().push(k);
    }
    let mut names: Vec<(usize, Sym)> = runs
        .iter()
        .filter(|(_, at)| at[0] >= fwd.end && at.len() < c)
        .map(|(&s, at)| (at[0], s))
        .collect();
    names.sort_unstable();
    // In the order of the kinds: the first name where the first kind
    // runs, the other where the other does.
    let fits = |a: Sym, b: Sym| {
        let (ra, rb) = (&runs[&a], &runs[&b]);
        let (mut i, mut j) = (0, 0);
        kinds.iter().all(|&k| {
            let take_a = j == rb.len() || (i < ra.len() && ra[i] < rb[j]);
            let ok = take_a == (k == kinds[0]);
            if take_a {
                i += 1;
            } else {
                j += 1;
            }
            ok
        })
    };
    let mut tried = 0;
    let mut best: Option<(f64, usize, Key)> = None;
    'pairs: for (x, &(at_a, a)) in names.iter().enumerate() {
        for &(_, b) in &names[x + 1..] {
            if tried == MAX_EITHER_KEYS {
                break 'pairs;
            }
            if runs[&a].len() + runs[&b].len() != c {
                continue;
            }
            // The first run is the first kind's (the names ordered by
            // their first run).
            if !fits(a, b) {
                continue;
            }
            tried += 1;
            let key = Key::Either(a, b);
            if let Some(t) = try_key(st, &[st.first], key, c) {
                if t.alike_backward(c)
                    && best.is_none_or(|(share, at, _)| {
                        t.share > share || t.share == share && at_a < at
                    })
                {
                    best = Some((t.share, at_a, key));
                }
            }
        }
    }
    best.map(|(_, _, key)| key)
}

/// Where no split holds: a forward run, the most layers first: its layers
/// hold one mixer block each (or each routes to experts: a router names
/// layers as a mixer block does, [`Tried::by_routers`]; gpt-oss trained
/// under `torch.compile` on the CPU, whose eager attention with sinks
/// leaves only GEMMs, had no layers, `hf/gptoss-4l-compiled-train`),
/// alike, and every block before its end, however little of the step's
/// time they cover. A training step
/// whose backward no key cuts into alike layers (attention decomposed, or
/// a hybrid's backward cut in pairs of layers by its named attention) is
/// the model's forward layers, not its backward's pairs.
fn forward_alone(st: &Steps, runs: &[Run]) -> Option<Split> {
    let mut counts: Vec<usize> = runs.iter().map(|r| r.count).collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    counts.dedup();
    counts.into_iter().find_map(|c| {
        let fwd = best_run(runs, c)?;
        let f = try_key(st, st.nonempty, fwd.key, c)?;
        (f.alike(c) && (f.by_mixers || f.by_routers)).then(|| split_of(st, fwd.key, f, None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name run n times a layer cuts at its every n-th run, and only
    /// where its runs are a whole number of such groups.
    #[test]
    fn a_name_run_n_times_a_layer_cuts_at_every_nth_run() {
        // Three layers, each running name 9 twice: 9 2 9 3.
        let seq = items(&[9, 2, 9, 3, 9, 2, 9, 3, 9, 2, 9, 3]);
        assert_eq!(positions(&seq, Key::Every(9, 2), &[]).0, vec![0, 4, 8]);
        assert_eq!(positions(&seq, Key::Every(9, 3), &[]).0, vec![0, 6]);
        assert!(positions(&seq, Key::Every(9, 4), &[]).0.is_empty());
        assert!(positions(&seq, Key::Every(9, 5), &[]).0.is_empty());
    }

    #[test]
    fn roles_from_names() {
        assert_eq!(
            role_of("void flash_fwd_splitkv_kernel<...>"),
            Role::Attention
        );
        assert_eq!(role_of("kernel_unified_attention_2d"), Role::Attention);
        assert_eq!(
            role_of("fused_recurrent_gated_delta_rule_fwd_kernel"),
            Role::Linear
        );
        assert_eq!(
            role_of("void causal_conv1d_update_kernel<...>"),
            Role::Linear
        );
        assert_eq!(role_of("aten::rms_norm"), Role::Norm);
        assert_eq!(role_of("aten::normal_"), Role::Other);
        assert_eq!(role_of("aten::topk"), Role::TopK);
        assert_eq!(role_of("aten::index_add_"), Role::Combine);
        assert_eq!(role_of("aten::histc"), Role::Moe);
        assert_eq!(role_of("topk_softmax"), Role::TopK);
        assert_eq!(role_of("void vllm::act_and_mul_kernel<...>"), Role::Ffn);
        assert_eq!(role_of("aten::mm"), Role::Other);
    }

    fn items(names: &[u32]) -> Vec<Item> {
        names
            .iter()
            .enumerate()
            .map(|(k, &n)| Item {
                at: k as u32,
                name: n,
                group: n,
                // Name 1 is a norm; 5 and 6 are MLP items.
                role: match n {
                    1 => Role::Norm,
                    5 | 6 => Role::Ffn,
                    _ => Role::Other,
                },
            })
            .collect()
    }

    /// Items of eager attention: name 1 a norm, 5 an MLP item, 11 a
    /// softmax, 12 an argmax, the rest other ops.
    fn eager_items(names: &[u32]) -> Vec<Item> {
        let mut seq = items(names);
        for it in &mut seq {
            it.role = match it.name {
                11 => Role::Scores,
                12 => Role::Top1,
                _ => it.role,
            };
        }
        seq
    }

    /// Eager attention's softmaxes are its mixer blocks, but for a top-1
    /// router's (a softmax, then an argmax: Switch Transformers), and an
    /// attention's windows (softmaxes with no norm between: Qwen2.5-VL's
    /// tower) are one block.
    #[test]
    fn eager_blocks_leave_routers_out_and_join_windows() {
        let dense = [1, 2, 11, 3, 1, 5, 4];
        let routed = [1, 2, 11, 3, 1, 11, 12, 6, 5, 4];
        let windows = [1, 2, 11, 3, 11, 3, 11, 3, 1, 5, 4];
        let mut seq = vec![0];
        for layer in [&dense[..], &routed, &dense, &routed, &windows, &windows] {
            seq.extend(layer);
        }
        seq.extend([1, 9]);
        // The router's softmax stands just before its argmax.
        let router_in = |blocks: &[(usize, usize)]| {
            blocks
                .iter()
                .any(|b| (b.0..=b.1).any(|k| seq[k] == 11 && seq[k + 1] == 12))
        };
        let blocks = mixer_blocks(&eager_items(&seq));
        assert_eq!(blocks.len(), 6);
        assert!(!router_in(&blocks));
        // Without the argmax's role, the router's softmax is attention's
        // (joined to the block before it, as a cross-attention).
        let unrouted: Vec<Item> = eager_items(&seq)
            .into_iter()
            .map(|mut it| {
                if it.role == Role::Top1 {
                    it.role = Role::Other;
                }
                it
            })
            .collect();
        assert!(router_in(&mixer_blocks(&unrouted)));
    }

    /// A DiT (PixArt's): a block runs self-attention, then cross-attention
    /// on its output with no norm between, then a norm and the MLP; the
    /// model's head runs an MLP item (its caption projection's GELU) before
    /// the first block. The blocks are the layers: neither each attention
    /// alone (10) nor cut at the MLP item (6, the head's taken for one).
    #[test]
    fn a_dit_block_with_cross_attention_and_a_head_mlp_is_one_layer() {
        let block = [1, 2, 13, 3, 2, 13, 3, 1, 2, 5, 2];
        let mut seq = vec![0, 7, 5, 7];
        for _ in 0..5 {
            seq.extend(block);
        }
        seq.extend([1, 9]);
        let dit = |names: &[u32]| -> Vec<Item> {
            let mut seq = items(names);
            for it in &mut seq {
                if it.name == 13 {
                    it.role = Role::Attention;
                }
            }
            seq
        };
        assert_eq!(mixer_blocks(&dit(&seq)).len(), 5);
        let split = find(&[dit(&seq), dit(&seq)], &|_| 1, &mut |s| s).unwrap();
        assert_eq!(split.layers(), 5);
        assert_eq!(split.bounds[0].0[0], 4);
    }

    /// Interleaved layers (dense, MoE, dense, MoE): the key that runs in
    /// every layer wins over the one that runs in every second.
    #[test]
    fn interleaved_layers_are_each_a_layer() {
        let dense = [1, 2, 3, 4, 5, 8, 10];
        let moe = [1, 2, 3, 4, 5, 8, 20, 21];
        let mut seq = vec![0];
        for l in 0..8 {
            seq.extend(if l % 2 == 0 { &dense[..] } else { &moe[..] });
        }
        seq.push(9);
        let split = find(&[items(&seq), items(&seq)], &|_| 1, &mut |s| s).unwrap();
        assert_eq!(split.layers(), 8);
        assert_eq!(split.bounds[0].0[0], 1);
    }

    /// A key a layer runs twice (one of them in its MLP) cuts the layer in
    /// two halves that are not alike: the once-per-layer key wins.
    #[test]
    fn a_key_run_twice_in_some_layers_does_not_split_them() {
        let dense = [1, 2, 3, 4, 7, 8, 7, 5];
        let moe = [1, 2, 3, 4, 7, 6, 6, 6];
        let mut seq = vec![0];
        for l in 0..10 {
            seq.extend(if l < 3 { &dense[..] } else { &moe[..] });
        }
        let split = find(&[items(&seq)], &|_| 1, &mut |s| s).unwrap();
        assert_eq!(split.layers(), 10);
    }

    /// A hybrid whose kernels have no telling names (a CPU capture's ops):
    /// attention layers and linear layers share half their names, and
    /// are still layers.
    #[test]
    fn two_kinds_sharing_half_their_names_are_layers() {
        let attention = [1, 2, 3, 4, 5, 30, 31, 32];
        let linear = [1, 2, 3, 4, 5, 40, 41];
        let mut seq = vec![0];
        for l in 0..8 {
            seq.extend(if l % 4 == 3 {
                &attention[..]
            } else {
                &linear[..]
            });
        }
        seq.push(9);
        let split = find(&[items(&seq)], &|_| 1, &mut |s| s).unwrap();
        assert_eq!(split.layers(), 8);
        assert!((split.share - 0.5).abs() < 1e-9, "{}", split.share);
    }
}
