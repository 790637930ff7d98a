//! Readable kernel names, normalized names for matching across runs, and
//! kernel categories.

use kinetoscope_types::{GpuOpKind, KernelCategory};

/// The kernel name without return type, template arguments or parameter list:
/// `void at::native::elementwise_kernel<128, 4, ...>(int, ...)` becomes
/// `at::native::elementwise_kernel`. Names without C++ decoration are kept.
pub fn short_name(name: &str) -> String {
    if !name.contains("::") && !name.contains('<') {
        // Not C++: keep it, minus a parameter list after a plain identifier
        // (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgs...)`).
        return match name.find('(') {
            Some(p) if p > 0 && !name[..p].contains(' ') => name[..p].to_string(),
            _ => name.to_string(),
        };
    }
    let s = name.replace("(anonymous namespace)::", "");
    let base = qualified_name(&s);
    if base.is_empty() {
        return name.chars().take(120).collect();
    }
    // Generic ATen kernels say what they compute only in their template
    // arguments: add the functor (`elementwise_kernel (MulFunctor)`).
    match functor_hint(&s, &base) {
        Some(hint) => format!("{base} ({hint})"),
        None => base,
    }
}

/// Identifiers in template arguments that tell generic kernels apart.
fn functor_hint(full: &str, base: &str) -> Option<String> {
    let generic = [
        "elementwise_kernel",
        "reduce_kernel",
        "multi_tensor_apply_kernel",
        "index_elementwise_kernel",
    ];
    if !generic.iter().any(|g| base.ends_with(g)) {
        return None;
    }
    let tail = base.rsplit("::").next().unwrap_or(base);
    // Only the kernel's own template arguments (the parameter list repeats them).
    let open = full.find('<')?;
    let mut depth = 0;
    let mut close = full.len();
    for (k, c) in full[open..].char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    close = open + k;
                    break;
                }
            }
            _ => {}
        }
    }
    full[open..close]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|tok| !tok.is_empty() && *tok != tail)
        .rfind(|tok| {
            tok.ends_with("Functor")
                || tok.contains("Functor_")
                || (tok.ends_with("_kernel_cuda") && *tok != "gpu_kernel_cuda")
                || (tok.ends_with("Ops") && tok.len() > 3)
                || tok.ends_with("_functor")
        })
        .map(str::to_string)
}

/// The qualified name of a C++ symbol: no return type, template arguments
/// or parameters.
fn qualified_name(s: &str) -> String {
    let s = s.trim_start();
    let s = s.strip_prefix("void ").unwrap_or(s).trim_start();
    // The qualified name ends where template arguments or parameters start.
    let cut = s.find(['<', '(']).unwrap_or(s.len());
    let head = s[..cut].trim();
    // Drop a return type written before the name.
    let head = match head.rsplit_once(' ') {
        Some((_, last)) if !last.is_empty() => last,
        _ => head,
    };
    head.to_string()
}

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

/// Kernel categories, in the order their rules are tried.
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

/// The category of a GPU op from its kind and name. Rules, tried in order on
/// the lower-cased full name (first match wins):
///
/// 1. `communication`: collectives — `nccl`, `rccl`, `allreduce`/`all_reduce`,
///    `allgather`/`all_gather`, `reducescatter`/`reduce_scatter`,
///    `alltoall`/`all_to_all`, `cross_device_reduce` (vLLM custom all-reduce),
///    `sendrecv`.
/// 2. `memory`: every memcpy and memset, and kernels that move data without
///    arithmetic — `copy`, `memcpy`, `memset`, `fill`, `cat` kernels
///    (`catarraybatched`), `gather`/`scatter`/`index_select`/`indexSelect`, KV-cache writes
///    (`reshape_and_cache`, `kv_cache`, `store_kvcache`).
/// 3. `attention`: `attention`, `attn`, `flash`, `fmha`, `mha`, `sdpa`,
///    `paged`, `mla`.
/// 4. `gemm`: matrix multiply and convolution — `gemm`, `matmul`, `cutlass`,
///    `cublas`, `xmma`, `wgmma`, `nvjet`, `cijk_` (rocBLAS/Tensile), `_mm`,
///    `conv`, `winograd`, `implicit`, `dgrad`, `wgrad`, `splitk`.
/// 5. `norm`: `norm` (layer/rms/batch/group), `bn_fw`, `bn_bw`.
/// 6. `reduction`: `reduce`, `softmax`, `sum`, `argmax`, `topk`, `sort`,
///    `cumsum`, `scan`, `max_`, `mean`, `triton_red`, `triton_per`.
/// 7. `elementwise`: `elementwise`, `vectorized`, `pointwise`, `triton_poi`,
///    activations (`silu`, `gelu`, `relu`, `act_and_mul`, `sigmoid`, `tanh`),
///    `rotary`/`rope`, `add`, `mul`, `div`, `where`, `dropout`.
/// 8. `other`: everything else.
pub fn category(kind: GpuOpKind, name: &str) -> KernelCategory {
    if kind != GpuOpKind::Kernel {
        return KernelCategory::Memory;
    }
    let n = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| n.contains(w));
    if has(&[
        "nccl",
        "rccl",
        "allreduce",
        "all_reduce",
        "allgather",
        "all_gather",
        "reducescatter",
        "reduce_scatter",
        "alltoall",
        "all_to_all",
        "cross_device_reduce",
        "sendrecv",
    ]) {
        KernelCategory::Communication
    } else if has(&[
        "copy",
        "memcpy",
        "memset",
        "fill",
        "catarraybatched",
        "gather",
        "scatter",
        "index_select",
        "indexselect",
        "reshape_and_cache",
        "kv_cache",
        "store_kvcache",
    ]) {
        KernelCategory::Memory
    } else if has(&[
        "attention",
        "attn",
        "flash",
        "fmha",
        "mha",
        "sdpa",
        "paged",
        "mla_",
    ]) {
        KernelCategory::Attention
    } else if has(&[
        "gemm", "matmul", "cutlass", "cublas", "xmma", "wgmma", "nvjet", "cijk_", "_mm", "conv",
        "winograd", "implicit", "dgrad", "wgrad", "splitk",
    ]) {
        KernelCategory::Gemm
    } else if has(&["norm", "bn_fw", "bn_bw"]) {
        KernelCategory::Norm
    } else if has(&[
        "reduce",
        "softmax",
        "sum",
        "argmax",
        "topk",
        "sort",
        "cumsum",
        "scan",
        "max_",
        "mean",
        "triton_red",
        "triton_per",
    ]) {
        KernelCategory::Reduction
    } else if has(&[
        "elementwise",
        "vectorized",
        "pointwise",
        "triton_poi",
        "silu",
        "gelu",
        "relu",
        "act_and_mul",
        "sigmoid",
        "tanh",
        "rotary",
        "rope",
        "add",
        "mul",
        "div",
        "where",
        "dropout",
    ]) {
        KernelCategory::Elementwise
    } else {
        KernelCategory::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
