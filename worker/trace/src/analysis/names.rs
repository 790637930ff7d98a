//! Readable kernel names, normalized names for matching across runs, and
//! kernel categories.

use kinetoscope_types::{GpuOpKind, KernelCategory};

pub use kinetoscope_types::names::short_name;

/// A name for matching the same kernel across two runs: the short name with
/// hex addresses, hashes and long digit runs replaced by `#`.
pub fn normalized_name(name: &str) -> String {
    let short = short_name(name);
    let mut out = String::with_capacity(short.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if !token.is_empty() {
            let is_hex_addr = token.starts_with("0x");
            let digits = token.chars().filter(|c| c.is_ascii_digit()).count();
            let hexish =
                token.len() >= 8 && token.chars().all(|c| c.is_ascii_hexdigit()) && digits > 0;
            if is_hex_addr || hexish || (digits > 0 && digits == token.len()) {
                out.push('#');
            } else {
                out.push_str(token);
            }
            token.clear();
        }
    };
    for c in short.chars() {
        if c.is_ascii_alphanumeric() {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// A kernel's name without a compiler's numbering of its fusion sites:
/// Inductor names its Triton kernels `triton_{poi,red,per}_fused_<ops>_<N>`,
/// one `N` per place in the graph, so one fused RMS norm runs as `…_12`,
/// `…_14` and `…_16` in three layers (`torch-h200-decode-compiled-8l`).
/// Other names are their own family.
pub fn kernel_family(name: &str) -> &str {
    if !name.starts_with("triton_") {
        return name;
    }
    let body = name.trim_end_matches(|c: char| c.is_ascii_digit());
    match body.strip_suffix('_') {
        Some(stem) if body.len() < name.len() => stem,
        _ => name,
    }
}

/// Most words a short name gains to tell it from another.
const MAX_TELLING_WORDS: usize = 3;

/// The short names of a table's kernels ([`short_name`]), made unique
/// within it: where several full names share a short name, each gains the
/// words of its full name that not all of them have (its dtypes, functor,
/// tile: `elementwise_kernel (direct_copy_kernel_cuda) [Float8_e4m3fn,
/// BFloat16]`), at most [`MAX_TELLING_WORDS`], and a number where even
/// those agree. The tables, the diff, the timeline and the findings then
/// name a kernel alike, and two rows never read the same.
pub fn distinct_short_names(full: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = full.iter().map(|n| short_name(n)).collect();
    let mut by_short: hashbrown::HashMap<String, Vec<usize>> = hashbrown::HashMap::new();
    for (i, s) in out.iter().enumerate() {
        by_short.entry(s.clone()).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = by_short.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    for g in groups {
        let words: Vec<Vec<&str>> = g.iter().map(|&i| name_words(full[i])).collect();
        let everywhere = |w: &str| words.iter().all(|ws| ws.contains(&w));
        let base = out[g[0]].clone();
        for (k, &i) in g.iter().enumerate() {
            let mut telling: Vec<&str> = Vec::new();
            for &w in &words[k] {
                if !everywhere(w) && !base.contains(w) && !telling.contains(&w) {
                    telling.push(w);
                }
            }
            if !telling.is_empty() {
                // Words first, then numbers (template sizes, lambda indices).
                telling.sort_by_key(|w| w.bytes().all(|b| b.is_ascii_digit()));
                telling.truncate(MAX_TELLING_WORDS);
                out[i] = format!("{base} [{}]", telling.join(", "));
            }
        }
        // Names whose telling words agree (or that have none) are numbered.
        let mut seen: hashbrown::HashMap<String, usize> = hashbrown::HashMap::new();
        for &i in &g {
            let n = seen.entry(out[i].clone()).or_default();
            *n += 1;
            if *n > 1 {
                out[i] = format!("{} #{n}", out[i]);
            }
        }
    }
    out
}

/// The words of a full kernel name, in order: identifiers and numbers,
/// each without its namespace (`c10::BFloat16` -> `BFloat16`), less the
/// C++ words that tell nothing (`void`, `const`, `lambda`, ...).
fn name_words(full: &str) -> Vec<&str> {
    // Dtypes (`float`, `int`) stay: a lambda's argument type is what tells
    // a cast's kernel from a copy's.
    const NOISE: &[&str] = &[
        "void",
        "const",
        "true",
        "false",
        "anonymous",
        "namespace",
        "lambda",
        "operator",
        "at",
        "native",
        "c10",
        "std",
        "detail",
        "array",
        "Array",
        "TensorIteratorBase",
        "TensorIterator",
    ];
    let mut out: Vec<&str> = Vec::new();
    for w in full.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if w.is_empty() || NOISE.contains(&w) || out.contains(&w) {
            continue;
        }
        out.push(w);
    }
    out
}

/// Kernel categories, in the order their rules are tried (the first that
/// a name's keywords speak of wins).
pub const CATEGORIES: [&str; 8] = [
    "communication",
    "memory",
    "attention",
    "gemm",
    "norm",
    "reduction",
    "elementwise",
    "other",
];

/// What a name says of its part in a decoder block (the layer rules'
/// [`repeats`](super::repeats)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Role {
    /// A mixer without a KV cache: linear attention, Mamba, short
    /// convolutions. First: "linear_attn" would read as attention.
    Linear,
    /// Attention over a KV cache (and writing it); not its backward.
    Attention,
    /// A norm.
    Norm,
    /// MoE routing and experts.
    Moe,
    /// A top-k selection: an MoE router's, or a sparse-attention indexer's
    /// (DeepSeek's DSA, GLM-5): no MoE on its own.
    TopK,
    /// An argmax: greedy sampling's, or a top-1 router's after its softmax
    /// (Switch Transformers: `softmax`, `argmax`, `one_hot`); no MoE on its
    /// own ([`repeats`](super::repeats)' routers).
    Top1,
    /// Adding rows back by index (`index_add_`, `scatter_add`): how experts'
    /// outputs are combined, after a top-k (other models add rows by index
    /// too). Counting each expert's rows (`histc`) is [`Role::Moe`].
    Combine,
    /// The MLP's activation.
    Ffn,
    /// A sigmoid: an MLP's activation written out (CLIP's and OWL-ViT's
    /// `quick_gelu`, `x * sigmoid(1.702 x)`; a hand-written swish) or a
    /// gate (an attention output's, a router's). Enough to tell a block
    /// ([`Role::is_block_part`]), but it ends no mixer block: a gated
    /// mixer runs one between its kernels.
    Gate,
    /// A softmax: eager attention's scores (`matmul`, `softmax`, `matmul`:
    /// Hugging Face's `eager` attention, GPT-2's, Gemma 2's), or an MoE
    /// router's before its top-k. A mixer only where nothing else names
    /// one ([`repeats`](super::repeats)' mixer blocks), and never a
    /// router's; not a loss's `log_softmax` ([`NOT_SAID_BY`]).
    Scores,
    /// Anything else.
    Other,
}

impl Role {
    pub(crate) fn is_mixer(self) -> bool {
        matches!(self, Role::Attention | Role::Linear)
    }
    pub(crate) fn is_ffn(self) -> bool {
        matches!(self, Role::Ffn | Role::Moe)
    }
    /// The MLP side of a block, an activation written out included: with a
    /// norm, what makes a repeat without a mixer name a decoder block.
    pub(crate) fn is_block_part(self) -> bool {
        self.is_ffn() || self == Role::Gate
    }
}

use KernelCategory as C;
use Role as R;

/// The one keyword table of kernel and op names: what each keyword says of
/// the work's category (the kernel table, the findings) and of its part in
/// a decoder block (the layer rules). A keyword may speak of one and not the
/// other (`None`). Matched on the lower-cased name; where several keywords
/// match, the category first in [`CATEGORIES`] and the role first in
/// [`Role`]'s order win, so the table's own order does not matter.
///
/// Some keywords speak of both, differently: `reshape_and_cache` moves data
/// (category `memory`) and is attention's KV write (role `attention`);
/// `topk` reduces (`reduction`) and selects (`TopK`, an MoE router's or a
/// sparse-attention indexer's).
const WORDS: &[(&str, Option<KernelCategory>, Option<Role>)] = &[
    // Collectives (vLLM's custom all-reduce: `cross_device_reduce`).
    ("nccl", Some(C::Communication), None),
    ("rccl", Some(C::Communication), None),
    ("allreduce", Some(C::Communication), None),
    ("all_reduce", Some(C::Communication), None),
    ("allgather", Some(C::Communication), None),
    ("all_gather", Some(C::Communication), None),
    ("reducescatter", Some(C::Communication), None),
    ("reduce_scatter", Some(C::Communication), None),
    ("alltoall", Some(C::Communication), None),
    ("all_to_all", Some(C::Communication), None),
    ("cross_device_reduce", Some(C::Communication), None),
    ("sendrecv", Some(C::Communication), None),
    // Moving data without arithmetic; KV-cache writes are attention's.
    ("copy", Some(C::Memory), None),
    ("memcpy", Some(C::Memory), None),
    ("memset", Some(C::Memory), None),
    ("fill", Some(C::Memory), None),
    ("catarraybatched", Some(C::Memory), None),
    ("gather", Some(C::Memory), None),
    ("scatter", Some(C::Memory), None),
    ("index_select", Some(C::Memory), None),
    ("indexselect", Some(C::Memory), None),
    ("reshape_and_cache", Some(C::Memory), Some(R::Attention)),
    ("kv_cache", Some(C::Memory), Some(R::Attention)),
    ("store_kvcache", Some(C::Memory), Some(R::Attention)),
    // Attention.
    ("attention", Some(C::Attention), Some(R::Attention)),
    ("attn", Some(C::Attention), Some(R::Attention)),
    ("flash", Some(C::Attention), Some(R::Attention)),
    ("fmha", Some(C::Attention), Some(R::Attention)),
    ("mha", Some(C::Attention), Some(R::Attention)),
    ("sdpa", Some(C::Attention), Some(R::Attention)),
    ("paged", Some(C::Attention), Some(R::Attention)),
    ("mla_", Some(C::Attention), Some(R::Attention)),
    // Mixers without a KV cache (their kernels keep the category their
    // other keywords give: a scan reduces, a short convolution is a conv).
    ("mamba", None, Some(R::Linear)),
    ("selective_scan", None, Some(R::Linear)),
    ("selective_state", None, Some(R::Linear)),
    ("ssm_", None, Some(R::Linear)),
    ("causal_conv1d", None, Some(R::Linear)),
    ("gated_delta", None, Some(R::Linear)),
    ("delta_rule", None, Some(R::Linear)),
    ("linear_attn", None, Some(R::Linear)),
    ("lightning_attn", None, Some(R::Linear)),
    ("rwkv", None, Some(R::Linear)),
    ("retention", None, Some(R::Linear)),
    ("short_conv", None, Some(R::Linear)),
    // A decoder's one-dimensional convolution is its mixer's short
    // convolution (`aten::conv1d` of Mamba's and Gated DeltaNet's
    // reference code on the CPU, Hugging Face's Jamba, Mamba, Qwen3-Next).
    ("conv1d", None, Some(R::Linear)),
    ("chunk_scan", None, Some(R::Linear)),
    ("state_passing", None, Some(R::Linear)),
    // Matrix multiply and convolution (`cijk_`: rocBLAS/Tensile).
    ("gemm", Some(C::Gemm), None),
    ("matmul", Some(C::Gemm), None),
    ("cutlass", Some(C::Gemm), None),
    ("cublas", Some(C::Gemm), None),
    ("xmma", Some(C::Gemm), None),
    ("wgmma", Some(C::Gemm), None),
    ("nvjet", Some(C::Gemm), None),
    ("cijk_", Some(C::Gemm), None),
    ("_mm", Some(C::Gemm), None),
    ("conv", Some(C::Gemm), None),
    ("winograd", Some(C::Gemm), None),
    ("implicit", Some(C::Gemm), None),
    ("dgrad", Some(C::Gemm), None),
    ("wgrad", Some(C::Gemm), None),
    ("splitk", Some(C::Gemm), None),
    // Norms (layer, RMS, batch, group; never `normal`: [`NOT_SAID_BY`]).
    ("norm", Some(C::Norm), Some(R::Norm)),
    ("bn_fw", Some(C::Norm), Some(R::Norm)),
    ("bn_bw", Some(C::Norm), Some(R::Norm)),
    // A norm written out op by op (`pow`, `mean`, `add`, `rsqrt`, `mul`:
    // the RMSNorm of Hugging Face's models in eager mode, on the CPU and
    // on the GPU) says itself only by its reciprocal square root.
    ("rsqrt", None, Some(R::Norm)),
    // MoE routing and experts, and combining their rows.
    ("moe", None, Some(R::Moe)),
    ("expert", None, Some(R::Moe)),
    ("router", None, Some(R::Moe)),
    // Grouped GEMMs run the experts (`aten::_grouped_mm` of Hugging Face's
    // MoE layers since transformers 5).
    ("grouped_mm", None, Some(R::Moe)),
    // Counting each expert's rows (`histc` over the router's choices: the
    // token counts of Hugging Face's grouped experts and Megatron's
    // dispatcher) says experts run. Under `torch.compile` on the CPU,
    // Qwen3-MoE's experts and their combine are fused or written out as
    // plain `mm`s, and its top-k, `sort`, `histc` and `cumsum` are what is
    // left of the MoE (its 4 layers were called dense); PhiMoE's router
    // (sparsemixer: a max and masks, no top-k) is fused away too, and
    // `histc` is all that is left (`hf/phimoe-4l-compiled*`: dense before).
    // No trace we have runs it outside an MoE layer.
    ("histc", None, Some(R::Moe)),
    ("index_add", None, Some(R::Combine)),
    ("scatter_add", None, Some(R::Combine)),
    ("scatter_reduce", None, Some(R::Combine)),
    // Reductions; a top-k selects.
    ("topk", Some(C::Reduction), Some(R::TopK)),
    ("top_k", Some(C::Reduction), Some(R::TopK)),
    ("reduce", Some(C::Reduction), None),
    ("softmax", Some(C::Reduction), Some(R::Scores)),
    ("log_softmax", Some(C::Reduction), None),
    ("sum", Some(C::Reduction), None),
    ("argmax", Some(C::Reduction), Some(R::Top1)),
    ("sort", Some(C::Reduction), None),
    ("cumsum", Some(C::Reduction), None),
    ("scan", Some(C::Reduction), None),
    ("max_", Some(C::Reduction), None),
    ("mean", Some(C::Reduction), None),
    ("triton_red", Some(C::Reduction), None),
    ("triton_per", Some(C::Reduction), None),
    // Elementwise, and the MLP's activations.
    ("silu", Some(C::Elementwise), Some(R::Ffn)),
    ("gelu", Some(C::Elementwise), Some(R::Ffn)),
    ("relu", Some(C::Elementwise), Some(R::Ffn)),
    ("act_and_mul", Some(C::Elementwise), Some(R::Ffn)),
    ("swiglu", Some(C::Elementwise), Some(R::Ffn)),
    ("geglu", Some(C::Elementwise), Some(R::Ffn)),
    ("elementwise", Some(C::Elementwise), None),
    ("vectorized", Some(C::Elementwise), None),
    ("pointwise", Some(C::Elementwise), None),
    ("triton_poi", Some(C::Elementwise), None),
    ("sigmoid", Some(C::Elementwise), Some(R::Gate)),
    // GELU's tanh approximation written out (`mul`, `pow`, `tanh`: T5
    // v1.1's gated GELU, Hugging Face's `gelu_new`), as a written-out
    // SiLU's sigmoid.
    ("tanh", Some(C::Elementwise), Some(R::Gate)),
    ("rotary", Some(C::Elementwise), None),
    ("rope", Some(C::Elementwise), None),
    ("add", Some(C::Elementwise), None),
    ("mul", Some(C::Elementwise), None),
    ("div", Some(C::Elementwise), None),
    ("where", Some(C::Elementwise), None),
    ("dropout", Some(C::Elementwise), None),
];

/// The rank of a category in [`CATEGORIES`].
fn category_rank(c: KernelCategory) -> usize {
    CATEGORIES
        .iter()
        .position(|s| *s == c.as_str())
        .unwrap_or(CATEGORIES.len())
}

/// Words that hold a keyword without saying it: `normal` (`aten::normal_`,
/// `normal_kernel`: random initialization) is no norm, `prefill`
/// (FlashInfer's `BatchPrefillWithPagedKVCacheKernel`) no fill, and a
/// loss's `log_softmax` no attention's scores (it reduces all the same:
/// its own keyword).
const NOT_SAID_BY: &[(&str, &str)] = &[
    ("norm", "normal"),
    ("fill", "prefill"),
    ("softmax", "log_softmax"),
];

/// Whether a lower-case name says a keyword: some occurrence of it that is
/// not part of a word in [`NOT_SAID_BY`].
fn says(lower: &str, word: &str) -> bool {
    let Some(&(_, holder)) = NOT_SAID_BY.iter().find(|(w, _)| *w == word) else {
        return lower.contains(word);
    };
    let k = holder.find(word).unwrap_or(0);
    // By bytes: `i - k` may fall inside a character that is no ASCII (a
    // fuzzed `at::native\u{fffd}::fillfunctor` panicked slicing there).
    lower
        .match_indices(word)
        .any(|(i, _)| !(i >= k && lower.as_bytes()[i - k..].starts_with(holder.as_bytes())))
}

/// What a name says, by [`WORDS`]: its category (`None` where no keyword
/// speaks of one) and its role.
fn classify(name: &str) -> (Option<KernelCategory>, Role) {
    let lower = name.to_ascii_lowercase();
    // Attention's backward runs in no decoder block's forward; nor does
    // its scores' softmax's, nor a written-out norm's (`RsqrtBackward0`:
    // its norm pairs cut a training step's backward run across layers,
    // seed23/dsa-train-6l).
    let backward = says_backward(&lower);
    let mut category: Option<KernelCategory> = None;
    let mut role = Role::Other;
    for &(word, c, r) in WORDS {
        if !says(&lower, word) {
            continue;
        }
        if let Some(c) = c {
            if category.is_none_or(|have| category_rank(c) < category_rank(have)) {
                category = Some(c);
            }
        }
        if let Some(r) = r {
            if r < role
                && !(backward && (matches!(r, Role::Attention | Role::Scores) || word == "rsqrt"))
            {
                role = r;
            }
        }
    }
    (category, role)
}

/// Whether a lowercased name says it runs a backward pass (autograd's
/// `MmBackward0`, a kernel's `_bwd`).
fn says_backward(lower: &str) -> bool {
    lower.contains("backward") || lower.contains("bwd")
}

/// Whether a name says it runs a backward pass ([`says_backward`]).
pub(crate) fn is_backward(name: &str) -> bool {
    says_backward(&name.to_ascii_lowercase())
}

/// The role a kernel or op name speaks of ([`WORDS`]).
pub(crate) fn role_of(name: &str) -> Role {
    classify(name).1
}

/// Whether a CPU op's role needs its inputs as well as its name
/// ([`op_role`]): a convolution's, whose name does not say its dimensions.
pub(crate) fn role_needs_inputs(name: &str) -> bool {
    matches!(name, "aten::convolution" | "aten::_convolution")
}

/// The role of a CPU op, from its name and its `Input Dims` text: its
/// name's ([`role_of`]), but a convolution over one-dimensional inputs
/// (a first input of three dims: batch, channels, length) is a `conv1d`'s,
/// a mixer's short convolution. Inductor calls `aten::convolution` where
/// eager code calls `aten::conv1d` (Qwen3.5's Gated DeltaNet and LFM2's
/// short convolutions under `torch.compile` on the CPU: the only item of
/// their mixers Inductor leaves to the profiler, whose layers were
/// otherwise the attention layers alone: 2 of 6 in hf/lfm2-6l-compiled,
/// 2 of 8 in Qwen3.5's).
pub(crate) fn op_role(name: &str, shapes: &str) -> Role {
    let role = role_of(name);
    if role != Role::Other || !role_needs_inputs(name) {
        return role;
    }
    match super::shapes::dims(shapes).first() {
        Some(d) if d.len() == 3 => role_of("conv1d"),
        _ => role,
    }
}

/// The category of a GPU op from its kind and name: every memcpy and memset
/// is `memory`; a kernel's is the first in [`CATEGORIES`] its keywords
/// ([`WORDS`]) speak of, else `other`.
pub fn category(kind: GpuOpKind, name: &str) -> KernelCategory {
    if kind != GpuOpKind::Kernel {
        return KernelCategory::Memory;
    }
    classify(name).0.unwrap_or(KernelCategory::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A convolution is a mixer's short convolution where its input is
    /// one-dimensional (as Inductor calls `conv1d`), not where it is an
    /// image's.
    #[test]
    fn a_convolution_over_a_sequence_is_a_short_convolution() {
        let conv1d = "[[1, 128, 5], [128, 1, 4], [], [], [], [], [], [], []]";
        let conv2d = "[[8, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []]";
        assert_eq!(op_role("aten::convolution", conv1d), Role::Linear);
        assert_eq!(op_role("aten::convolution", conv2d), Role::Other);
        assert_eq!(op_role("aten::convolution", ""), Role::Other);
        assert_eq!(op_role("aten::convolution_backward", conv1d), Role::Other);
        assert_eq!(op_role("aten::mm", conv1d), Role::Other);
    }

    /// A keyword right after a character that is no ASCII: the check for
    /// the word that holds it (`prefill` for `fill`) reads bytes, not a
    /// slice of the text (the fuzzer's `analyze` target found the panic).
    #[test]
    fn keywords_after_other_characters_are_read() {
        assert!(says("at::native\u{fffd}::fillfunctor", "fill"));
        assert!(says("pre\u{fffd}fill", "fill"));
        assert!(!says("\u{fffd}prefill", "fill"));
        assert!(says("\u{fffd}\u{fffd}norm", "norm"));
        assert!(!says("x\u{fffd}normal_kernel", "norm"));
        let _ = classify("void at::native::vectorized_elementwise_kernel<4, at::native\u{fffd}::FillFunctor<float> >");
    }

    #[test]
    fn short_names_drop_templates_and_params() {
        assert_eq!(
            short_name("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}> >(int, at::native::foo)"),
            "at::native::elementwise_kernel (direct_copy_kernel_cuda)"
        );
        assert_eq!(
            short_name("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)"),
            "at::native::vectorized_elementwise_kernel (MulFunctor)"
        );
        assert_eq!(
            short_name("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(long)"),
            "at::native::distribution_elementwise_grid_stride_kernel"
        );
        assert_eq!(
            short_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda(bool, float, float)#1}>(at::TensorIteratorBase&)::{lambda(int)#1}>(int, at::native::foo)"),
            "at::native::elementwise_kernel"
        );
        assert_eq!(
            short_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4>)"),
            "at::native::reduce_kernel (ArgMaxOps)"
        );
        assert_eq!(
            short_name("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"),
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
        );
        assert_eq!(
            short_name("Memcpy DtoD (Device -> Device)"),
            "Memcpy DtoD (Device -> Device)"
        );
        assert_eq!(
            short_name(
                "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
            ),
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
        );
    }

    #[test]
    fn normalized_names_ignore_hashes_and_addresses() {
        assert_eq!(
            normalized_name("triton_poi_fused_add_0x7f3a12"),
            normalized_name("triton_poi_fused_add_0x7f9912")
        );
        assert_eq!(normalized_name("kernel_abc_12345"), "kernel_abc_#");
    }

    #[test]
    fn categories_follow_the_rules() {
        assert_eq!(
            category(
                GpuOpKind::Kernel,
                "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
            )
            .as_str(),
            "communication"
        );
        assert_eq!(
            category(
                GpuOpKind::Kernel,
                "void at::native::elementwise_kernel<128, 4, at::native::direct_copy_kernel_cuda>"
            )
            .as_str(),
            "memory"
        );
        assert_eq!(
            category(GpuOpKind::Memcpy, "Memcpy HtoD (Pageable -> Device)").as_str(),
            "memory"
        );
        assert_eq!(
            category(
                GpuOpKind::Kernel,
                "flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64>>"
            )
            .as_str(),
            "attention"
        );
        assert_eq!(
            category(
                GpuOpKind::Kernel,
                "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
            )
            .as_str(),
            "gemm"
        );
        assert_eq!(
            category(GpuOpKind::Kernel, "Cijk_Alik_Bljk_BBS_BH_MT128x128x64").as_str(),
            "gemm"
        );
        assert_eq!(
            category(
                GpuOpKind::Kernel,
                "void vllm::rms_norm_kernel<c10::BFloat16>"
            )
            .as_str(),
            "norm"
        );
        assert_eq!(
            category(GpuOpKind::Kernel, "void at::native::reduce_kernel<512, 1>").as_str(),
            "reduction"
        );
        assert_eq!(
            category(GpuOpKind::Kernel, "void vllm::act_and_mul_kernel<silu>").as_str(),
            "elementwise"
        );
        assert_eq!(category(GpuOpKind::Kernel, "mystery").as_str(), "other");
    }

    /// The names the two former rules disagreed on get one answer per
    /// facet from the one table, and `normal` is no norm in either.
    #[test]
    fn one_table_gives_category_and_role() {
        let both = |n: &str| (category(GpuOpKind::Kernel, n).as_str(), role_of(n));
        assert_eq!(both("gatherTopK<float>"), ("memory", Role::TopK));
        assert_eq!(both("aten::topk"), ("reduction", Role::TopK));
        assert_eq!(
            both("void vllm::reshape_and_cache_flash_kernel<...>"),
            ("memory", Role::Attention)
        );
        assert_eq!(
            both("flash::flash_fwd_splitkv_kernel<...>"),
            ("attention", Role::Attention)
        );
        assert_eq!(
            both("flash_bwd_dot_do_o_kernel"),
            ("attention", Role::Other)
        );
        assert_eq!(
            both("BatchPrefillWithPagedKVCacheKernel"),
            ("attention", Role::Attention)
        );
        assert_eq!(
            both("fused_recurrent_gated_delta_rule_fwd_kernel"),
            ("other", Role::Linear)
        );
        assert_eq!(
            both("void at::native::normal_kernel<float>"),
            ("other", Role::Other)
        );
        assert_eq!(both("triton_red_fused_rms_norm_0"), ("norm", Role::Norm));
        // Eager attention's scores; a loss's log-softmax reduces too, but
        // is no attention's.
        assert_eq!(both("aten::softmax"), ("reduction", Role::Scores));
        assert_eq!(
            both("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"),
            ("reduction", Role::Scores)
        );
        assert_eq!(both("aten::_log_softmax"), ("reduction", Role::Other));
        assert_eq!(
            both("aten::_log_softmax_backward_data"),
            ("reduction", Role::Other)
        );
        assert_eq!(
            both("aten::_softmax_backward_data"),
            ("reduction", Role::Other)
        );
        assert_eq!(
            kernel_family("triton_red_fused__fused_rms_norm_add_12"),
            "triton_red_fused__fused_rms_norm_add"
        );
        assert_eq!(
            kernel_family("triton_poi_fused_mul_silu_split_3"),
            "triton_poi_fused_mul_silu_split"
        );
        assert_eq!(
            kernel_family("triton_poi_fused_add"),
            "triton_poi_fused_add"
        );
        assert_eq!(
            kernel_family("sm90_xmma_gemm_64x64_16"),
            "sm90_xmma_gemm_64x64_16"
        );
        assert_eq!(both("linear_attn_fwd"), ("attention", Role::Linear));
    }

    #[test]
    fn short_names_are_made_unique_by_what_differs() {
        let cast = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(c10::Float8_e4m3fn)#1}> >(int, c10::Float8_e4m3fn, c10::BFloat16)";
        let plain = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}> >(int, c10::BFloat16, c10::BFloat16)";
        let gemm = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn";
        let names = distinct_short_names(&[cast, plain, gemm, gemm]);
        assert_eq!(
            names[0],
            "at::native::elementwise_kernel (direct_copy_kernel_cuda) [Float8_e4m3fn]"
        );
        assert_eq!(
            names[1],
            "at::native::elementwise_kernel (direct_copy_kernel_cuda) [float]"
        );
        assert_eq!(names[2], gemm);
        assert_eq!(names[3], format!("{gemm} #2"));
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
