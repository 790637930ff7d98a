//! Kernel short names: one rule, used by the analysis (tables, findings,
//! the diff) and by the dashboard (timeline tooltips), so a kernel reads
//! the same everywhere.

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
