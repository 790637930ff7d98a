//! Findings: ranked plain sentences with their numbers, derived only from
//! the summary's tables. No rule looks for a particular op, kernel or trace
//! name: each one looks at shares, counts, shapes and timings.

use kinetoscope_types::units::{bytes, count, pct, rate_gbps, time_us};
use kinetoscope_types::{Finding, OpRow, Summary};

/// Ops whose self device share makes them a finding on their own.
const OP_SHARE_MIN: f64 = 10.0;
/// Busy share below which idle time is reported.
const BUSY_PCT_MAX: f64 = 80.0;
/// Kernels shorter than this (µs) count as small for launch-bound analysis.
const SMALL_KERNEL_US: f64 = 10.0;

fn finding(kind: &str, text: String, impact: f64, tab: &str, name: Option<&str>) -> Finding {
    Finding {
        kind: kind.into(),
        text,
        impact_pct: (impact * 10.0).round() / 10.0,
        tab: Some(tab.into()),
        name: name.map(str::to_string),
    }
}

/// Derives the findings of a summary, most important first.
pub fn find(s: &Summary) -> Vec<Finding> {
    let mut out = Vec::new();
    let gpu_total = s.gpu_time.gpu_op_us;
    let has_steps = s.steps_stats.count > 0;

    // Ops that dominate device time, with what they do per step and per call.
    let mut top_ops: Vec<&OpRow> = s
        .ops
        .iter()
        .filter(|o| o.kind != "runtime" && o.self_device_us > 0.0)
        .collect();
    top_ops.sort_by(|a, b| b.self_device_us.total_cmp(&a.self_device_us));
    for (k, op) in top_ops.iter().take(3).enumerate() {
        if k > 0 && op.device_pct < OP_SHARE_MIN {
            break;
        }
        out.push(finding(
            "top_op",
            op_sentence(op, has_steps, s.steps_stats.count),
            op.device_pct,
            "ops",
            Some(&op.name),
        ));
    }

    // The top kernel and who launches it.
    if let Some(k) = s.kernels.first().filter(|k| k.total_us > 0.0) {
        let mut text = format!(
            "The top GPU kernel, {}, is a {} kernel taking {} of GPU time: {} calls{} averaging {}",
            k.short_name,
            k.category,
            pct(k.pct),
            k.calls,
            k.calls_per_step
                .filter(|_| has_steps)
                .map(|c| format!(" ({} per step)", count(c)))
                .unwrap_or_default(),
            time_us(k.avg_us),
        );
        if let Some(chain) = k.launched_by.first().filter(|c| !c.chain.is_empty()) {
            let share = 100.0 * chain.calls as f64 / k.calls as f64;
            text.push_str(&format!(
                "; {} of its calls come from {}",
                pct(share),
                chain.chain.last().map(String::as_str).unwrap_or("?")
            ));
        }
        out.push(finding("top_kernel", text, k.pct * 0.9, "kernels", Some(&k.name)));
    }

    // A kernel category that dominates.
    if let Some(c) = s.gpu_time.by_category.first().filter(|c| c.pct >= 40.0 && c.category != "other") {
        out.push(finding(
            "top_category",
            format!(
                "{} kernels take {} of GPU time ({} in {} calls)",
                capitalize(&c.category),
                pct(c.pct),
                time_us(c.us),
                c.calls
            ),
            c.pct * 0.5,
            "gpu",
            Some(&c.category),
        ));
    }

    // Idle GPU, and whether small kernels explain it.
    let g = &s.gpu_time;
    if gpu_total > 0.0 && g.busy_pct < BUSY_PCT_MAX {
        let idle_pct = 100.0 - g.busy_pct;
        let mut text = format!(
            "The GPU is idle {} of the profiled window ({} of {})",
            pct(idle_pct),
            time_us(g.idle_us),
            time_us(g.span_us)
        );
        if has_steps {
            text.push_str(&format!(
                "; a step takes {} but runs {} of GPU work",
                time_us(s.steps_stats.mean_us),
                time_us(s.steps_stats.mean_device_us)
            ));
        }
        out.push(finding("gpu_idle", text, idle_pct * 0.8, "gpu", None));

        let (small, all) = s
            .kernels
            .iter()
            .filter(|k| k.kind == "kernel")
            .fold((0u64, 0u64), |(sm, al), k| {
                (sm + if k.avg_us < SMALL_KERNEL_US { k.calls } else { 0 }, al + k.calls)
            });
        if all >= 100 && small * 2 > all {
            out.push(finding(
                "launch_bound",
                format!(
                    "{} of the {} kernels run under {} µs each while the GPU idles {}: launch overhead bounds the step (CUDA graphs or fusion would help)",
                    pct(100.0 * small as f64 / all as f64),
                    all,
                    SMALL_KERNEL_US,
                    pct(idle_pct)
                ),
                idle_pct * 0.7,
                "kernels",
                None,
            ));
        }
    }

    // CPU blocked in synchronizing calls.
    let window = if has_steps {
        s.steps.iter().map(|st| st.cpu_us).sum::<f64>()
    } else {
        s.trace.span_us
    };
    for op in s.ops.iter().filter(|o| o.kind == "runtime" && is_blocking(&o.name)) {
        let share = if window > 0.0 { 100.0 * op.cpu_total_us / window } else { 0.0 };
        if share < 10.0 {
            continue;
        }
        let of = if has_steps { "step time" } else { "the window" };
        // A CPU waiting for a busy GPU is the GPU-bound case, not a problem
        // of its own; a CPU waiting while the GPU idles serializes the two.
        let (text, impact) = if g.busy_pct >= 85.0 {
            (
                format!(
                    "{} waits {} of {of} for the GPU, which is busy {}: the step is GPU-bound, so GPU time is what to cut",
                    op.name,
                    pct(share),
                    pct(g.busy_pct)
                ),
                share * 0.1,
            )
        } else {
            (
                format!(
                    "{} blocks the CPU for {} of {of} ({} calls, {} in all) while the GPU idles {}: CPU and GPU take turns instead of overlapping",
                    op.name,
                    pct(share),
                    op.calls,
                    time_us(op.cpu_total_us),
                    pct(100.0 - g.busy_pct)
                ),
                share * 0.5,
            )
        };
        out.push(finding("sync", text, impact, "ops", Some(&op.name)));
    }

    // Host copies from pageable memory.
    let pageable: Vec<_> = s.kernels.iter().filter(|k| k.kind == "memcpy" && k.name.contains("Pageable")).collect();
    let pageable_us: f64 = pageable.iter().map(|k| k.total_us).sum();
    if gpu_total > 0.0 && pageable_us / gpu_total >= 0.01 {
        let moved: f64 = pageable.iter().map(|k| k.bytes_per_call.unwrap_or(0.0) * k.calls as f64).sum();
        out.push(finding(
            "pageable_copy",
            format!(
                "Copies from pageable host memory take {} of GPU time ({} moved): pinned memory would make them faster and asynchronous",
                pct(100.0 * pageable_us / gpu_total),
                bytes(moved)
            ),
            100.0 * pageable_us / gpu_total,
            "kernels",
            pageable.first().map(|k| k.name.as_str()),
        ));
    }

    // What the layers spend their time on, when they all agree.
    let l = &s.layers;
    if l.count >= 2 {
        let total: f64 = l.items.iter().map(|i| i.device_us).sum();
        let mut by_cat: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
        for item in &l.items {
            for (c, us) in &item.by_category {
                *by_cat.entry(c.as_str()).or_default() += us;
            }
        }
        let top_cat = by_cat.iter().max_by(|a, b| a.1.total_cmp(b.1));
        let top_op = l.items[0].top_ops.first().map(|o| o.name.clone());
        let same_top_op = top_op.is_some()
            && l.items.iter().all(|i| i.top_ops.first().map(|o| &o.name) == top_op.as_ref());
        if let (Some((cat, us)), true) = (top_cat, total > 0.0) {
            let share = 100.0 * us / total;
            let mut text = format!(
                "The {} layers (found by {}) spend {} of their device time on {} kernels; a layer takes {} per step",
                l.count,
                l.method,
                pct(share),
                cat,
                time_us(total / l.count as f64)
            );
            if same_top_op {
                let op = &l.items[0].top_ops[0];
                text.push_str(&format!(", and its top op is {} ({}) in every layer", op.name, time_us(op.us)));
            }
            out.push(finding("layers", text, share * 0.3, "layers", None));
        }
    }

    // Slow steps.
    if s.steps.len() >= 3 && s.steps_stats.p50_us > 0.0 {
        if let Some(worst) = s.steps.iter().max_by(|a, b| a.cpu_us.total_cmp(&b.cpu_us)) {
            let ratio = worst.cpu_us / s.steps_stats.p50_us;
            if ratio >= 1.5 {
                let total: f64 = s.steps.iter().map(|st| st.cpu_us).sum();
                out.push(finding(
                    "slow_step",
                    format!(
                        "{} takes {}, {:.1}x the median step ({})",
                        worst.name,
                        time_us(worst.cpu_us),
                        ratio,
                        time_us(s.steps_stats.p50_us)
                    ),
                    100.0 * (worst.cpu_us - s.steps_stats.p50_us) / total,
                    "steps",
                    Some(&worst.name),
                ));
            }
        }
    }

    // Device time nobody can be blamed for.
    let a = &s.trace.attribution;
    if gpu_total > 0.0 && a.unattributed_us / gpu_total >= 0.2 {
        out.push(finding(
            "unattributed",
            format!(
                "{} of GPU time cannot be tied to an op ({} GPU ops launched before the window or outside any op)",
                pct(100.0 * a.unattributed_us / gpu_total),
                a.without_launch + a.without_op
            ),
            100.0 * a.unattributed_us / gpu_total * 0.3,
            "kernels",
            None,
        ));
    }

    out.sort_by(|a, b| b.impact_pct.total_cmp(&a.impact_pct));
    out
}

fn op_sentence(op: &OpRow, has_steps: bool, steps: u64) -> String {
    let mut text = format!("{} takes {} of GPU time: ", op.name, pct(op.device_pct));
    // When one input signature carries most of the device time, its calls,
    // bytes and rate describe the op better than averages over all calls.
    let dominant = op
        .input_shapes
        .iter()
        .max_by(|a, b| a.self_device_us.total_cmp(&b.self_device_us))
        .filter(|g| g.self_device_us >= 0.5 * op.self_device_us && g.calls < op.calls);
    let (calls, bytes_per_call, gbps, dtypes) = match dominant {
        Some(g) => (g.calls, g.bytes_per_call, g.achieved_gbps, g.dtypes.as_str()),
        None => (
            op.calls,
            op.bytes_per_call,
            op.achieved_gbps,
            op.input_shapes.first().map_or("", |g| g.dtypes.as_str()),
        ),
    };
    if has_steps && steps > 0 {
        text.push_str(&format!("{} calls per step", count(calls as f64 / steps as f64)));
    } else {
        text.push_str(&format!("{calls} calls"));
    }
    match (bytes_per_call, gbps) {
        (Some(b), Some(r)) => text.push_str(&format!(", {} per call at {}", bytes(b), rate_gbps(r))),
        (Some(b), None) => text.push_str(&format!(", {} per call", bytes(b))),
        _ => text.push_str(&format!(
            ", {} of device time per call",
            time_us(op.self_device_us / op.calls.max(1) as f64)
        )),
    }
    if let Some((from, to)) = super::shapes::conversion(&op.name, dtypes) {
        text.push_str(&format!(" ({from} to {to})"));
    }
    if let Some(g) = dominant {
        let others = op.calls - g.calls;
        text.push_str(&format!("; {others} other calls with other shapes"));
    }
    text
}

/// Runtime calls that block the calling CPU thread until the GPU catches up.
fn is_blocking(name: &str) -> bool {
    name.contains("Synchronize")
        || matches!(name, "cudaMemcpy" | "hipMemcpy" | "cudaMemcpy2D")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
