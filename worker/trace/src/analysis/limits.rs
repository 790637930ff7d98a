//! The limits of the pattern rules (layers, steps, step kinds, compiling
//! steps), in one place: each with what it is, why it has its value, which
//! captures chose it, and the margin it keeps. The margin is tested: the
//! margin test (`tests/margins.rs`) moves each limit down and up by its
//! margin, one at a time, and the whole real-capture family (three seeds,
//! every architecture and execution mode) and the six H200 captures must
//! still come out right. A limit whose margin is small says so here.
//!
//! The rules read a limit with [`get`] (or [`count`] for a whole number);
//! only the margin test scales them ([`scale`]), in a test binary of its
//! own so that no other test sees a moved limit.

use std::sync::atomic::{AtomicU64, Ordering};

/// A limit of a pattern rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `repeats`: least core share of a split's layers.
    LayerShare,
    /// `repeats`: least core share across a hybrid's kinds of layer.
    MixedLayerShare,
    /// `repeats`: fewest layers for a split no mixer name places.
    UnnamedLayers,
    /// `repeats`: least core share for a split no mixer name places.
    UnnamedLayerShare,
    /// `repeats`: least share of the steps' time the layers cover.
    LayerCoverage,
    /// `repeats`: mixer items further apart than this start a new block.
    BlockGap,
    /// `repeats`: most items after a softmax before the top-k that makes
    /// it an MoE router's rather than eager attention's scores.
    RouterReach,
    /// `repeats`: items at each end of a step that a step LayerDrop cut
    /// short runs as the steps that ran every layer do.
    LayerDropEnds,
    /// `steps`: least share of its threads' time a repeating outermost
    /// annotation holds to mark steps.
    StepCoverage,
    /// `steps`: least ratio of the most to the fewest tokens for steps to
    /// be told apart as prefills and decodes.
    PrefillRatio,
    /// `steps`: fewest tokens of the largest step for a prefill.
    PrefillTokens,
    /// `steps`: fewest rows of an embedding's table for its indices to
    /// count as tokens.
    EmbeddingRows,
    /// `findings`: least share of a step's time spent compiling for the
    /// step to count as compiling.
    CompilingShare,
    /// `steps`: least share of a forward pass's GEMMs that read no more
    /// rows than its first telling op (one token a sequence) for passes
    /// that start so to be decodes.
    DecodeGemmShare,
}

/// A limit with its value and its evidence.
pub struct Evidence {
    /// Which limit.
    pub limit: Limit,
    /// Its value.
    pub value: f64,
    /// Why it has that value.
    pub why: &'static str,
    /// The captures or test that chose it.
    pub chosen_by: &'static str,
    /// How far (fractions of the value) it may move down and up with every
    /// capture still right: what the margin test checks.
    pub margin: [f64; 2],
}

/// Every limit, in [`Limit`]'s order. "Wrong at" is what the margin
/// test's exploration (`how_far_each_limit_goes`, 2026-12-05) found when
/// the limit alone was moved to 0.1x-3x: the nearest values on each side
/// at which some capture came out wrong, or changed on a third-party trace.
pub const LIMITS: [Evidence; 14] = [
    Evidence {
        limit: Limit::LayerShare,
        value: 0.4,
        why: "A model's layers run the same names (norms, projections, attention, MLP): \
              the family's layers share all their names within a kind, the H200 \
              captures' 83-100%, the third-party traces' 70% and more. Hugging Face's \
              models pin it from both sides: Gemma 2 under generate() shares 52% (its \
              prefill's layers run `contiguous`, its decodes' do not), and a wrong split \
              of Qwen3-Next's generate() (a 400-token prefill, whose Gated DeltaNet runs \
              a loop over chunks) 32%. Wrong at 0.32 (hf/qwen3next-8l-generate: 10 \
              layers of 8) and at 0.64 (hf/gemma2-6l-generate: none); also at 0.1 (a \
              diffusion model's 152 \"layers\" in tracelens-mi300x-xdit-sd3.5-infer). \
              Right from 0.384 to 0.48 (2026-12-06); since each call of that model's \
              denoiser is a pass (2026-12-07), its 38 blocks share 45% (its last block \
              runs no context MLP, and the final norm follows it): 37 layers at 0.48. \
              So right from 0.384 to 0.45, and the upper margin is 10%: the share of \
              names alone tells these apart by that little.",
        chosen_by: "tests/captures (seeds 41, 7, 23; hf/gemma2-6l-generate, hf/qwen3next-8l-generate), torch-h200-*, tracelens-* (tracelens-mi300x-xdit-sd3.5-infer above)",
        margin: [0.15, 0.1],
    },
    Evidence {
        limit: Limit::MixedLayerShare,
        value: 0.12,
        why: "Across a hybrid's kinds (attention blocks, linear-mixer blocks), each kind \
              alike within itself: both kinds run the norms, projections and MLP. The \
              family's hybrids share 29-63% across kinds, the H200 hybrid graph 24%, \
              Hugging Face's Jamba (Mamba and attention layers, experts in every other) \
              less: wrong at 0.225 (hf/jamba-4l-marked: no layers) and at 0.25 (the H200 \
              hybrid's 48 layers become 47). Nothing went wrong down to 0.015; 0.12 sits \
              between (it was 0.15, whose margin Jamba broke; before that 0.2).",
        chosen_by: "torch-h200-decode-hybrid-graph-48l, tests/captures/*hybrid-*, hf/jamba-4l-marked",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::UnnamedLayers,
        value: 4.0,
        why: "A split that no mixer name places must repeat often enough to be a model's \
              layers rather than a step's phases. It was chosen on \
              tracelens-h100-owlv2-large-infer, whose five forward passes in one step were \
              taken for five layers (wrong at 6). Since its layers come from its \
              Owlv2EncoderLayer frames (36), no trace we have decides it: nothing goes \
              wrong from 0.4 to 12. A training step's backward run, whose layers its \
              forward run counted, need not repeat as often (at 5 the family's 4-layer \
              training captures lost theirs).",
        chosen_by: "tracelens-h100-owlv2-large-infer (before its layers came from module frames)",
        margin: [0.25, 0.25],
    },
    Evidence {
        limit: Limit::UnnamedLayerShare,
        value: 0.45,
        why: "Layers that no mixer name places must be more alike than a hybrid's kinds \
              (which share about half their names) for a cut of every layer in two (a \
              fifth) to fail. Two traces pin it now: Hugging Face's Gemma 2 runs its \
              attention eagerly (`matmul`, `softmax`: no name says attention), and its \
              layers under generate() fail from 0.57 (hf/gemma2-6l-generate: no \
              layers); at 0.38 a training loop's ResNet stages pass as 7 layers once \
              the layers' coverage is at its lower margin (param-resnet-rtx2080ti). \
              Alone it goes down to 0.03 without harm. It was chosen on \
              tracelens-h100-owlv2-large-infer before that trace's layers came from its \
              module frames; the upper margin is that narrow (2026-12-06).",
        chosen_by: "hf/gemma2-6l-generate, param-resnet-rtx2080ti; tracelens-h100-owlv2-large-infer (before its layers came from module frames)",
        margin: [0.5, 0.15],
    },
    Evidence {
        limit: Limit::LayerCoverage,
        value: 0.3,
        why: "The layers are most of a step's work: a repeat inside one phase is not. \
              Wrong at 0.03 (ResNet blocks as layers in \
              hta-v100-resnet-ns-resolution-rank0), at 0.15 (param-resnet-rtx2080ti, a \
              training loop without step marks: its 28 whole iterations, cut by \
              layers::anchored, become passes of 4 'layers', ResNet's stages) and at \
              0.45 (seed7/hybrid-train-12l loses its layers: a training step's forward \
              run covers as little as 26% of it in the family, 28% in \
              torch-h200-train-gpt6, and its backward run the rest); right from 0.2 to \
              0.375.",
        chosen_by: "tests/captures/seed7/hybrid-train-12l, torch-h200-train-gpt6, hta-v100-*, \
                    param-resnet-rtx2080ti",
        margin: [0.33, 0.25],
    },
    Evidence {
        limit: Limit::BlockGap,
        value: 3.0,
        why: "A mixer block's kernels (a cache write, the attention, its output copy) \
              come a few items apart, two layers' mixers a whole MLP apart. Every trace \
              we have runs a block's mixer items back to back (gap 1). Under \
              `torch.compile` on the CPU no norm or MLP item stands between two layers' \
              mixers, only GEMMs: LFM2's short convolution and the next layer's \
              attention come 6 items apart (its output projection, the MLP's three \
              GEMMs, the next query and key), Qwen3.5's 8 (a Gated DeltaNet's). At 16 \
              both were joined (LFM2's 6 layers were 5, Qwen3.5's 8 were 6), and at 6 \
              LFM2's still are. Nothing else went wrong from 1.6 to 48.",
        chosen_by: "hf/lfm2-6l-compiled; the generator's split attention kernels (issue 26)",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::RouterReach,
        value: 8.0,
        why: "An MoE router's softmax is followed by its top-k at once (Hugging Face's \
              Mixtral and Qwen3-MoE in eager mode: `softmax`, then `topk`, \
              1 item apart in every capture we have); eager attention's scores by a \
              `to`, dropout and a matmul, with no top-k before the next norm. Any bound \
              from 1 tells them apart; 8 leaves room for a cast or two between, and \
              keeps a step of softmaxes and no norms linear to scan.",
        chosen_by: "hf/mixtral-eager-4l-marked; uncommitted eager Qwen3-MoE captures \
                    (BENCHMARKS.md, thirteenth session)",
        margin: [0.75, 0.5],
    },
    Evidence {
        limit: Limit::LayerDropEnds,
        value: 4.0,
        why: "Training with LayerDrop skips layers at random: a step that ran fewer \
              still starts and ends as the steps that ran them all (the input's ops; \
              the loss, its backward's head and the optimizer), where a pass the \
              profile's window cut starts or ends inside the pass with the same names \
              (unmarked/generate-dense-6l from 25% to 60% of its span, a cut pass \
              beside a whole one, was taken for a LayerDrop step without this check). \
              Four items are the few ops of an input or an optimizer, more than a cut \
              pass's ends match by chance.",
        chosen_by: "tests/captures/hf/m2m100-3e3d-train, tests/captures/hf/wav2vec2-6l-train, \
                    tests/captures/unmarked/generate-dense-6l (captures::a_window_of_whole_\
                    passes_between_cut_ones_has_them_as_steps)",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::StepCoverage,
        value: 0.5,
        why: "A step holds the work: an engine loop's `execute_model` holds all of its \
              threads' outermost time (and, in a trace with GPU work, launches some: a \
              data loader's wait, 64% of param-resnet-rtx2080ti's thread, launches none \
              and is no step). Wrong at 0.05 (torch's `Optimizer.step#SGD.step`, \
              0.2-12%, made steps in hta-gp100-gpu-user-annotation) and at 1.0 \
              (hta-mtia-inference-rank0's steps change); right from 0.125 to 0.75.",
        chosen_by: "tests/captures/*engine-*, hta-gp100-gpu-user-annotation, hta-mtia-inference-rank0",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::PrefillRatio,
        value: 8.0,
        why: "Prefills hold many more tokens than a decode's batch: the family's engine \
              loops prefill 384-768 tokens beside decodes of 1. Wrong at 0.8 (steps of \
              equal tokens called prefills in hta-a100-80g-cudagraph-rank0of16); \
              right from 2 to 24.",
        chosen_by: "tests/captures/*engine-*, hta-a100-80g-cudagraph-rank0of16",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::PrefillTokens,
        value: 256.0,
        why: "A prefill's tokens run to the hundreds: the family's engine loops prefill \
              8 x the context, 384-768 tokens. Wrong at 512 (their 384-token prefills \
              lost); nothing went wrong down to 26. The forward passes of a trace \
              without step marks need none: the prompt runs in a pass of its own \
              (steps::from_passes).",
        chosen_by: "tests/captures/*engine-*",
        margin: [0.5, 0.25],
    },
    Evidence {
        limit: Limit::EmbeddingRows,
        value: 256.0,
        why: "A token embedding's table has a row a token of the vocabulary: 256 and \
              more (byte-level vocabularies; the Hugging Face captures' tiny configurations \
              have 512, real models 30,000 and more). T5's relative position biases are an \
              embedding too, of 32 buckets, looked up with a [queries, keys] index that grows \
              with each pass of a generation: read as tokens, T5's decodes had no kind. \
              It keeps its margin (128 and 384 hold).",
        chosen_by: "tests/captures/hf/t5-6e6d-generate, tests/captures/hf/t5gated-3e3d-generate",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::CompilingShare,
        value: 0.1,
        why: "A recompiling `torch.compile` step spends seconds compiling against \
              milliseconds of work (99.7% of the step in tests/captures/compiling, \
              4-7 s for 21 ms in issue 41); the family's compiled captures compile before \
              their profile (0%). Nothing went wrong from 0.01 to 0.3.",
        chosen_by: "tests/captures/compiling/recompile, the family's compiled captures",
        margin: [0.5, 0.5],
    },
    Evidence {
        limit: Limit::DecodeGemmShare,
        value: 0.5,
        why: "A decode's GEMMs read one token a sequence: the encoder-decoders' generations \
              (BART, Blenderbot, T5, Whisper) read their first op's rows in 80-82% of a \
              pass's GEMMs (the rest, in their first pass, project the encoder's tokens for \
              the cross-attention), decoder-only generations in all. FLUX's denoising passes \
              start with the timestep's projection (one row) and then read every image token: \
              17-22%, so at 0.25 they are still no decodes; called decodes before this limit.",
        chosen_by: "tests/captures/hf/*-generate (encoder-decoders), tests/captures/hf/flux-*",
        margin: [0.5, 0.5],
    },
];

const ONE: u64 = 0x3FF0_0000_0000_0000; // 1.0f64.to_bits()

/// Each limit's scale: 1 but in the margin test.
static SCALE: [AtomicU64; LIMITS.len()] = [const { AtomicU64::new(ONE) }; LIMITS.len()];

/// A limit's value.
pub fn get(l: Limit) -> f64 {
    LIMITS[l as usize].value * f64::from_bits(SCALE[l as usize].load(Ordering::Relaxed))
}

/// A whole-number limit's value, rounded.
pub fn count(l: Limit) -> usize {
    get(l).round().max(0.0) as usize
}

/// Scales a limit for the whole process (the margin test's knob; `1.0`
/// puts it back). Every analysis running meanwhile reads the moved limit:
/// only a test binary of its own may call this.
#[doc(hidden)]
pub fn scale(l: Limit, factor: f64) {
    SCALE[l as usize].store(factor.to_bits(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enum_order_and_says_why() {
        for (k, e) in LIMITS.iter().enumerate() {
            assert_eq!(e.limit as usize, k);
            assert!(e.why.len() > 40 && !e.chosen_by.is_empty());
            assert!(e.margin.iter().all(|m| *m > 0.0 && *m < 1.0));
            assert_eq!(get(e.limit), e.value);
        }
        assert_eq!(f64::from_bits(ONE), 1.0);
    }
}
