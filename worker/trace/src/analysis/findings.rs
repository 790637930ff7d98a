//! Findings: ranked plain sentences with their numbers, derived only from
//! the summary's tables. No rule looks for a particular op, kernel or trace
//! name: each one looks at shares, counts, shapes and timings, and (where
//! the device is known) at the device's peaks.

use super::shapes;
use kinetoscope_types::units::{bytes, calls, count, pct, rate_gbps, rate_tflops, time_us};
use kinetoscope_types::{
    Device, Finding, FindingKind, FindingTab, GpuOpKind, GraphMode, KernelCategory, LayerKind,
    OpKind, OpRow, PartlyUsed, ShapeGroup, Summary, TimeBasis,
};

/// Ops whose self device share makes them a finding on their own.
const OP_SHARE_MIN: f64 = 10.0;
/// Busy share below which idle time is reported.
const BUSY_PCT_MAX: f64 = 80.0;
/// Kernels shorter than this (µs) count as small for launch-bound analysis.
const SMALL_KERNEL_US: f64 = 10.0;

/// Whether a kernel name whose calls average `avg_us` counts as small for
/// the launch-bound finding (the kernel table's left-out names use it too).
pub(crate) fn is_small_kernel(avg_us: f64) -> bool {
    avg_us < SMALL_KERNEL_US
}

fn finding(
    kind: FindingKind,
    text: String,
    impact: f64,
    tab: FindingTab,
    name: Option<&str>,
) -> Finding {
    Finding {
        kind,
        text,
        impact_pct: (impact * 10.0).round() / 10.0,
        tab: Some(tab),
        name: name.map(str::to_string),
        cause: None,
    }
}

/// What every finding rule reads: the summary, and the facts about it
/// several rules share.
struct Facts<'a> {
    s: &'a Summary,
    /// The time the op findings measure, and its whole.
    clock: Clock,
    /// Device time over all GPU ops, µs.
    gpu_total: f64,
    /// Whether the trace has steps (per-step numbers make sense).
    has_steps: bool,
    /// The device with at least one known peak.
    device: Option<&'a Device>,
}

/// One finding kind: pushes its findings, if the summary shows any.
type Rule = fn(&Facts, &mut Vec<Finding>);

/// Every rule, in the order their findings are made (the sort by impact is
/// stable: equal impacts keep this order).
const RULES: &[Rule] = &[
    top_ops,
    graph_replay,
    top_kernel,
    top_category,
    gpu_idle,
    launch_bound,
    sync,
    pageable_copy,
    layers,
    step_kinds,
    slow_step,
    compiling,
    unattributed,
    whole_tensor,
    launch_geometry,
    small_gemm,
    memory_peak,
    memory_churn,
    memory_growth,
];

/// An op signature's words for a memory finding: `aten::_to_copy ([2,
/// 1114112, 1, 128] Float8_e4m3fn)`.
fn signature_words(op: &str, shapes: &str, dtypes: &str) -> String {
    let dims = shapes::dims(shapes).into_iter().find(|d| !d.is_empty());
    let types: Vec<String> = serde_json::from_str::<Vec<String>>(dtypes)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| !d.is_empty() && d != "Scalar")
        .map(|d| d.trim_start_matches("c10::").to_string())
        .collect();
    let mut inner = Vec::new();
    if let Some(d) = dims {
        inner.push(format!(
            "[{}]",
            d.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(t) = types.first() {
        inner.push(t.clone());
    }
    if inner.is_empty() {
        op.to_string()
    } else {
        format!("{op} ({})", inner.join(" "))
    }
}

/// The memory peak of each device and what makes it up: the largest
/// allocations live then, with the ops that made them.
fn memory_peak(f: &Facts, out: &mut Vec<Finding>) {
    for m in &f.s.memory {
        if m.peak_bytes <= 0 {
            continue;
        }
        let mut text = format!(
            "Peak memory on {}: {}",
            m.device,
            bytes(m.peak_bytes as f64)
        );
        if let Some(r) = m.reserved_peak_bytes.filter(|&r| r > 0) {
            text += &format!(" allocated of {} reserved", bytes(r as f64));
        }
        if let Some(step) = &m.peak_step {
            text += &format!(", in {step}");
        }
        let named: Vec<String> = m
            .live_at_peak
            .iter()
            .take(3)
            .map(|l| {
                let who = if l.op.is_empty() {
                    "outside any op".to_string()
                } else {
                    signature_words(&l.op, &l.shapes, &l.dtypes)
                };
                format!("{} from {who}", bytes(l.bytes as f64))
            })
            .collect();
        if !named.is_empty() {
            text += &format!("; the largest allocations live then: {}", named.join(", "));
        }
        text.push('.');
        let name = m
            .live_at_peak
            .first()
            .map(|l| l.op.as_str())
            .filter(|o| !o.is_empty());
        // A fact, not a cost: below every finding that costs time.
        out.push(finding(
            FindingKind::MemoryPeak,
            text,
            0.5,
            FindingTab::Memory,
            name,
        ));
    }
}

/// An op signature that allocates a large buffer and frees it within the
/// step, on every call: at least a quarter of the device's peak a step,
/// in buffers of at least 0.5% of the peak. The impact is the churn against
/// the peak (a tenth of it: allocator churn costs time only indirectly).
fn memory_churn(f: &Facts, out: &mut Vec<Finding>) {
    for m in &f.s.memory {
        let peak = m.peak_bytes.max(1) as f64;
        let Some(top) = m.top_churn.first() else {
            continue;
        };
        if top.churn_bytes_per_step < 0.25 * peak || top.bytes_per_call < 0.005 * peak {
            continue;
        }
        let per_step_calls = top.calls as f64 / m.steps.max(1) as f64;
        let how_often = if per_step_calls >= 1.5 {
            format!("{} times a step", count(per_step_calls.round()))
        } else {
            "every step".to_string()
        };
        let text = format!(
            "{} allocates {} and frees it {how_often} on {}: {} per step made and dropped \
             ({}); keep one buffer across calls (allocate once, write into it) \
             or allocate only what the step uses.",
            signature_words(&top.op, &top.shapes, &top.dtypes),
            bytes(top.bytes_per_call),
            m.device,
            bytes(top.churn_bytes_per_step),
            against_peak(top.churn_bytes_per_step / peak),
        );
        let impact = (10.0 * top.churn_bytes_per_step / peak).min(9.0);
        out.push(finding(
            FindingKind::MemoryChurn,
            text,
            impact,
            FindingTab::Memory,
            Some(&top.op),
        ));
    }
}

/// Bytes against the peak: a share below it, a multiple past it (a step
/// that makes and drops eight times its peak).
fn against_peak(ratio: f64) -> String {
    if ratio < 1.0 {
        format!("{} of the peak", pct(100.0 * ratio))
    } else {
        format!("{ratio:.1} times the peak")
    }
}

/// Memory that grows from step to step (a leak, or a cache that only
/// grows).
fn memory_growth(f: &Facts, out: &mut Vec<Finding>) {
    for m in &f.s.memory {
        let Some(g) = m.growth_bytes_per_step else {
            continue;
        };
        let text = format!(
            "Memory on {} grows from step to step: {} a step on average over {} steps, to a \
             peak of {}: something keeps what each step allocates (a list of tensors, a cache, \
             an autograd graph held by a saved loss).",
            m.device,
            bytes(g),
            m.steps,
            bytes(m.peak_bytes as f64)
        );
        out.push(finding(
            FindingKind::MemoryGrowth,
            text,
            5.0,
            FindingTab::Memory,
            None,
        ));
    }
}

/// Derives the findings of a summary, most important first.
pub fn find(s: &Summary) -> Vec<Finding> {
    let basis = s.time_basis();
    let facts = Facts {
        s,
        clock: Clock::new(s, basis),
        gpu_total: s.gpu_time.gpu_op_us,
        has_steps: s.steps_stats.count > 0,
        device: s
            .device
            .as_ref()
            .filter(|d| d.peak_gbps.is_some() || d.peak_tflops_bf16.is_some()),
    };
    let mut out = Vec::new();
    for rule in RULES {
        rule(&facts, &mut out);
    }
    out.sort_by(|a, b| b.impact_pct.total_cmp(&a.impact_pct));
    by_cause(s, out)
}

/// Least share of a kernel's calls (of a category's time) that an op (a
/// kernel) must hold for the kernel (the category) to be the op's (the
/// kernel's) evidence rather than a cause of its own: most of it.
const EVIDENCE_SHARE: f64 = 0.5;

/// Findings grouped by root cause: the op that an op finding names; a
/// kernel that op launches most of the calls of (else the kernel itself);
/// the category that kernel holds most of (else the category); the layers
/// whose top op it is, or whose top category it is; the host, for an idle
/// GPU and launch-bound steps. Each group is led by its fix where one says
/// how to cut the cost (`whole_tensor`, `launch_bound`), else by its first
/// finding; the lead's impact is the group's (the most any of them
/// states, so at most 100%), and the rest follow it with `cause` naming the
/// lead's place. On the story's capture the op, its kernel, its fix, the
/// memory category and the layers were five findings over 300% of impact;
/// they are one cause at 88.6%.
fn by_cause(s: &Summary, found: Vec<Finding>) -> Vec<Finding> {
    let ops: Vec<&str> = found
        .iter()
        .filter(|f| matches!(f.kind, FindingKind::TopOp | FindingKind::WholeTensor))
        .filter_map(|f| f.name.as_deref())
        .collect();
    // The op a kernel's calls mostly come from, among the ops named.
    let op_of_kernel = |kernel: &str| -> Option<String> {
        let k = s.kernels.iter().find(|k| k.name == kernel)?;
        ops.iter()
            .map(|op| (k.launched_from(op).0, *op))
            .max()
            .filter(|(calls, _)| *calls as f64 >= EVIDENCE_SHARE * k.calls as f64)
            .map(|(_, op)| op.to_string())
    };
    // The top kernel's cause: the op it mostly comes from, else itself.
    let kernel_cause: Option<(String, String)> = found
        .iter()
        .find(|f| f.kind == FindingKind::TopKernel)
        .and_then(|f| f.name.clone())
        .map(|k| {
            let cause = op_of_kernel(&k).unwrap_or_else(|| format!("kernel {k}"));
            (k, cause)
        });
    // The top category's cause: its top kernel's where that kernel holds
    // most of its time, else the category itself.
    let category_cause: Option<(String, String)> = found
        .iter()
        .find(|f| f.kind == FindingKind::TopCategory)
        .and_then(|f| f.name.clone())
        .map(|cat| {
            let held = kernel_cause.as_ref().and_then(|(k, cause)| {
                let row = s.kernels.iter().find(|r| &r.name == k)?;
                let c = s
                    .gpu_time
                    .by_category
                    .iter()
                    .find(|c| c.category.as_str() == cat)?;
                (row.category == c.category && row.total_us >= EVIDENCE_SHARE * c.us)
                    .then(|| cause.clone())
            });
            let cause = held.unwrap_or_else(|| format!("category {cat}"));
            (cat, cause)
        });
    let cause_of = |f: &Finding| -> Option<String> {
        match f.kind {
            FindingKind::TopOp | FindingKind::WholeTensor => f.name.clone(),
            FindingKind::TopKernel => kernel_cause
                .as_ref()
                .filter(|(k, _)| Some(k.as_str()) == f.name.as_deref())
                .map(|(_, c)| c.clone()),
            FindingKind::TopCategory => category_cause.as_ref().map(|(_, c)| c.clone()),
            // An idle GPU and launches that bound the step: one cause, the
            // host.
            FindingKind::GpuIdle | FindingKind::LaunchBound => Some("host".to_string()),
            FindingKind::Layers => {
                let l = &s.layers;
                let top = l.items.first()?.top_ops.first()?.name.clone();
                let every = l
                    .items
                    .iter()
                    .all(|i| i.top_ops.first().is_some_and(|o| o.name == top));
                if every && ops.contains(&top.as_str()) {
                    return Some(top);
                }
                // Else the layers' top category's cause, where there is one.
                let mut by_cat: std::collections::BTreeMap<&str, f64> = Default::default();
                for item in &l.items {
                    for (c, us) in &item.by_category {
                        *by_cat.entry(c.as_str()).or_default() += us;
                    }
                }
                let (cat, _) = by_cat.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
                category_cause
                    .as_ref()
                    .filter(|(c, _)| c == cat)
                    .map(|(_, cause)| cause.clone())
            }
            _ => None,
        }
    };
    let causes: Vec<Option<String>> = found.iter().map(cause_of).collect();
    // Groups in the order of their first finding (the list is by impact).
    let mut placed = vec![false; found.len()];
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for (i, f) in found.iter().enumerate() {
        if placed[i] {
            continue;
        }
        let Some(key) = &causes[i] else {
            placed[i] = true;
            out.push(f.clone());
            continue;
        };
        let members: Vec<usize> = (0..found.len())
            .filter(|&j| causes[j].as_ref() == Some(key))
            .collect();
        // The fix leads where the group has one.
        let lead = members
            .iter()
            .copied()
            .find(|&j| {
                matches!(
                    found[j].kind,
                    FindingKind::WholeTensor | FindingKind::LaunchBound
                )
            })
            .unwrap_or(members[0]);
        let impact = members
            .iter()
            .map(|&j| found[j].impact_pct)
            .fold(0.0, f64::max);
        let at = out.len();
        let mut head = found[lead].clone();
        head.impact_pct = impact;
        out.push(head);
        for &j in &members {
            placed[j] = true;
            if j != lead {
                let mut e = found[j].clone();
                e.cause = Some(at as u32);
                out.push(e);
            }
        }
    }
    out
}

/// Ops that dominate the trace's time (device time, or self CPU time on a
/// trace without GPU ops): their input signature that carries the time,
/// with what it does per step and per call. Annotations and graph replays
/// have findings of their own: they are not ops.
fn top_ops(f: &Facts, out: &mut Vec<Finding>) {
    let (s, clock) = (f.s, &f.clock);
    let mut top_ops: Vec<&OpRow> = s
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Op && clock.op_us(o) > 0.0)
        .collect();
    top_ops.sort_by(|a, b| clock.op_us(b).total_cmp(&clock.op_us(a)));
    for (k, op) in top_ops.iter().take(3).enumerate() {
        let share = clock.op_pct(op);
        if (k > 0 && share < OP_SHARE_MIN) || share < 1.0 {
            break;
        }
        let (text, share) = op_sentence(op, f);
        out.push(finding(
            FindingKind::TopOp,
            text,
            share,
            FindingTab::Ops,
            Some(&op.name),
        ));
    }
}

/// Graph replays: how much they run, and what bounds a step that already
/// uses graphs.
fn graph_replay(f: &Facts, out: &mut Vec<Finding>) {
    let (s, gpu_total, has_steps) = (f.s, f.gpu_total, f.has_steps);
    let g = &s.gpu_time;
    let gr = &s.graphs;
    if !(gr.replays > 0 && gpu_total > 0.0) {
        return;
    }
    let top_ctx = s
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Graph)
        .max_by(|a, b| a.self_device_us.total_cmp(&b.self_device_us));
    let mut text = format!(
        "{} graph replays run {} of GPU time{}",
        gr.replays,
        pct(gr.pct),
        top_ctx
            .map(|o| format!(" (most from {}, {})", o.name, pct(o.device_pct)))
            .unwrap_or_default()
    );
    let eager_pct = 100.0 * gr.eager_us / gpu_total;
    if gr.mode == GraphMode::Piecewise {
        text.push_str(&format!(
            "; {} runs eagerly between the graphs{}",
            pct(eager_pct),
            gr.top_eager
                .first()
                .map(|k| format!(" (top: {}, {})", k.name, time_us(k.us)))
                .unwrap_or_default()
        ));
    }
    let idle_pct = 100.0 - g.busy_pct;
    let impact = if g.busy_pct < BUSY_PCT_MAX {
        let piecewise = gr.mode == GraphMode::Piecewise;
        let per = if has_steps {
            s.steps_stats.count as f64
        } else {
            1.0
        };
        text.push_str(&format!(
            ". The GPU idles {} of the window: the work is already in graphs, so launch overhead is not the limit; {}the host between replays ({}{} of CPU time between graph launches) {} the step",
            pct(idle_pct),
            if piecewise { "the eager parts between piecewise graphs and " } else { "" },
            time_us(gr.host_between_us / per),
            if has_steps { " per step" } else { "" },
            if piecewise { "bound" } else { "bounds" },
        ));
        idle_pct * 0.8
    } else {
        text.push_str(&format!("; the GPU is busy {}", pct(g.busy_pct)));
        if gr.mode == GraphMode::Piecewise {
            eager_pct * 0.3
        } else {
            gr.pct * 0.2
        }
    };
    out.push(finding(
        FindingKind::GraphReplay,
        text,
        impact,
        FindingTab::Ops,
        top_ctx.map(|o| o.name.as_str()),
    ));
}

/// A kernel category with its article: "a gemm", "an elementwise", and
/// "an uncategorized" for [`KernelCategory::Other`].
fn a_kind(category: KernelCategory) -> &'static str {
    match category {
        KernelCategory::Gemm => "a gemm",
        KernelCategory::Attention => "an attention",
        KernelCategory::Communication => "a communication",
        KernelCategory::Memory => "a memory",
        KernelCategory::Elementwise => "an elementwise",
        KernelCategory::Reduction => "a reduction",
        KernelCategory::Norm => "a norm",
        KernelCategory::Other => "an uncategorized",
    }
}

/// The least calls per step a sentence states: below it a count reads
/// "0" (`units::count` keeps one decimal), which says nothing; such calls
/// lie outside the steps ([`calls_said`]).
const LEAST_PER_STEP: f64 = 0.05;

/// " (N per step)" after a kernel's calls, where the trace has steps and
/// the calls run in them.
fn per_step_note(per_step: Option<f64>, has_steps: bool) -> String {
    per_step
        .filter(|&c| has_steps && c >= LEAST_PER_STEP)
        .map(|c| format!(" ({} per step)", count(c)))
        .unwrap_or_default()
}

/// The top kernel: its launch geometry that carries the time (kernels that
/// share a name, such as every cast to BF16, differ in grid), and who
/// launches it.
fn top_kernel(f: &Facts, out: &mut Vec<Finding>) {
    let (s, has_steps) = (f.s, f.has_steps);
    let Some(k) = s.kernels.first().filter(|k| k.total_us > 0.0) else {
        return;
    };
    let dominant = k
        .groups
        .first()
        .filter(|g| k.groups.len() > 1 && g.total_us >= 0.5 * k.total_us && g.calls < k.calls);
    let mut text = match dominant {
        Some(kg) => format!(
            "The top GPU kernel, {} with grid {} and block {}, is {} kernel taking {} of GPU time: {}{} averaging {}; its {} with other grids average {}",
            k.short_name,
            dim3(kg.grid),
            dim3(kg.block),
            a_kind(k.category),
            pct(kg.pct),
            calls(kg.calls as f64),
            per_step_note(kg.calls_per_step, has_steps),
            time_us(kg.avg_us),
            calls((k.calls - kg.calls) as f64),
            time_us((k.total_us - kg.total_us) / (k.calls - kg.calls).max(1) as f64),
        ),
        None => format!(
            "The top GPU kernel, {}, is {} kernel taking {} of GPU time: {}{} averaging {}",
            k.short_name,
            a_kind(k.category),
            pct(k.pct),
            calls(k.calls as f64),
            per_step_note(k.calls_per_step, has_steps),
            time_us(k.avg_us),
        ),
    };
    if let Some(chain) = k.launched_by.first().filter(|c| !c.chain.is_empty()) {
        // Chains differ by their Python stacks too: count every chain that
        // ends in the same op.
        let calls: u64 = k
            .launched_by
            .iter()
            .filter(|c| c.chain.last() == chain.chain.last())
            .map(|c| c.calls)
            .sum();
        let share = 100.0 * calls as f64 / k.calls as f64;
        text.push_str(&format!(
            "; {} of its calls come from {}",
            pct(share),
            chain.chain.last().map(String::as_str).unwrap_or("?")
        ));
    } else if let Some(chain) = k.launched_by.first().filter(|c| !c.python.is_empty()) {
        let frame = chain
            .python
            .iter()
            .rev()
            .find(|f| super::python::is_user_frame(f));
        text.push_str(&format!(
            "; launched by {} in {}",
            chain.launch,
            frame.unwrap_or(&chain.python[0])
        ));
    }
    let impact = dominant.map_or(k.pct, |kg| kg.pct) * 0.9;
    out.push(finding(
        FindingKind::TopKernel,
        text,
        impact,
        FindingTab::Kernels,
        Some(&k.name),
    ));
}

/// A kernel category that dominates.
fn top_category(f: &Facts, out: &mut Vec<Finding>) {
    let Some(c) =
        f.s.gpu_time
            .by_category
            .first()
            .filter(|c| c.pct >= 40.0 && c.category != KernelCategory::Other)
    else {
        return;
    };
    out.push(finding(
        FindingKind::TopCategory,
        format!(
            "{} kernels take {} of GPU time ({} in {})",
            capitalize(c.category.as_str()),
            pct(c.pct),
            time_us(c.us),
            calls(c.calls as f64)
        ),
        c.pct * 0.5,
        FindingTab::Gpu,
        Some(c.category.as_str()),
    ));
}

/// The idle share of the window when the GPU idles enough to report it.
fn idle_pct(f: &Facts) -> Option<f64> {
    let busy = f.s.gpu_time.busy_pct;
    (f.gpu_total > 0.0 && busy < BUSY_PCT_MAX).then_some(100.0 - busy)
}

/// Idle GPU. With graph replays the replay finding says why the GPU idles.
/// Where most of the idle time lies outside the steps (the time before,
/// between or after them that the window also holds: an SGLang capture's
/// one step runs 493 ms of GPU work in 494 ms of a 987 ms window), it says
/// so, and its impact is the idle time within the steps.
fn gpu_idle(f: &Facts, out: &mut Vec<Finding>) {
    let (s, g) = (f.s, &f.s.gpu_time);
    let Some(idle_pct) = idle_pct(f).filter(|_| s.graphs.replays == 0) else {
        return;
    };
    let mut text = format!(
        "The GPU is idle {} of the profiled window ({} of {})",
        pct(idle_pct),
        time_us(g.idle_us),
        time_us(g.span_us)
    );
    let mut impact = idle_pct;
    if f.has_steps {
        // Within the steps: each step's time less its GPU work.
        let (mut steps_us, mut busy_us) = (0.0, 0.0);
        for r in s.steps.iter().filter(|r| !r.left_out) {
            steps_us += r.time();
            busy_us += r.device_us.min(r.time());
        }
        let inside = steps_us - busy_us;
        let outside = (g.idle_us - inside).max(0.0);
        if steps_us > 0.0 && outside > inside {
            let busy_pct = 100.0 * busy_us / steps_us;
            text.push_str(&format!(
                ", {} of it outside the steps (before, between or after them): within the steps the GPU is busy {}",
                time_us(outside),
                pct(busy_pct)
            ));
            impact = 100.0 - busy_pct;
        } else {
            text.push_str(&format!(
                "; a step takes {} but runs {} of GPU work",
                time_us(s.steps_stats.mean_us),
                time_us(s.steps_stats.mean_device_us)
            ));
        }
    }
    out.push(finding(
        FindingKind::GpuIdle,
        text,
        impact * 0.8,
        FindingTab::Gpu,
        None,
    ));
}

/// Whether small kernels explain an idle GPU. Graph traces already batch
/// their launches: the replay finding says what bounds them instead.
fn launch_bound(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    let Some(idle_pct) = idle_pct(f).filter(|_| s.graphs.replays == 0) else {
        return;
    };
    // The table's rows, and the names it leaves out.
    let (small, all) = s
        .kernels
        .iter()
        .filter(|k| k.kind == GpuOpKind::Kernel)
        .fold(
            (
                s.gpu_time.left_out_small_kernel_calls,
                s.gpu_time.left_out_kernel_calls,
            ),
            |(sm, al), k| {
                (
                    sm + u64::from(is_small_kernel(k.avg_us)) * k.calls,
                    al + k.calls,
                )
            },
        );
    if all >= 100 && small * 2 > all {
        out.push(finding(
            FindingKind::LaunchBound,
            format!(
                "{} of the {} kernels run under {} µs each while the GPU idles {}: launch overhead bounds the step (CUDA graphs or fusion would help)",
                pct(100.0 * small as f64 / all as f64),
                all,
                SMALL_KERNEL_US,
                pct(idle_pct)
            ),
            idle_pct * 0.7,
            FindingTab::Kernels,
            None,
        ));
    }
}

/// CPU blocked in synchronizing calls.
fn sync(f: &Facts, out: &mut Vec<Finding>) {
    let (s, has_steps) = (f.s, f.has_steps);
    let g = &s.gpu_time;
    let step_time = if has_steps {
        s.steps
            .iter()
            .map(kinetoscope_types::StepRow::time)
            .sum::<f64>()
    } else {
        0.0
    };
    for op in s
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Runtime && is_blocking(&o.name))
    {
        let (share, of) = wait_share(f, step_time, op.cpu_total_us);
        if share < 10.0 {
            continue;
        }
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
                    "{} blocks the CPU for {} of {of} ({}, {} in all) while the GPU idles {}: CPU and GPU take turns instead of overlapping",
                    op.name,
                    pct(share),
                    calls(op.calls as f64),
                    time_us(op.cpu_total_us),
                    pct(100.0 - g.busy_pct)
                ),
                share * 0.5,
            )
        };
        out.push(finding(
            FindingKind::Sync,
            text,
            impact,
            FindingTab::Ops,
            Some(&op.name),
        ));
    }
    full_queue(f, step_time, out);
}

/// A wait's share, and what of: against the step time when the waits fit
/// in it; a wait that outlasts the steps (the final sync after graphs
/// queued ahead) against the whole window. No share passes 100%.
fn wait_share(f: &Facts, step_time: f64, wait_us: f64) -> (f64, &'static str) {
    let (window, of) = if f.has_steps && wait_us <= step_time {
        (step_time, "step time")
    } else {
        (f.s.trace.span_us, "the window")
    };
    let share = if window > 0.0 {
        (100.0 * wait_us / window).min(100.0)
    } else {
        0.0
    };
    (share, of)
}

/// Launches that blocked on a full launch queue (Kineto's `Command Buffer
/// Full` overhead inside them): the CPU ran ahead until the GPU's queue
/// filled, which says the GPU bounds the step. Reported from a tenth of the
/// step time (or the window), where it is a visible part of the host's
/// time; the H200 stack-and-memory capture blocks 850 ms of 4 steps.
fn full_queue(f: &Facts, step_time: f64, out: &mut Vec<Finding>) {
    let s = f.s;
    let Some(op) = s.ops.iter().find(|o| o.name == "Command Buffer Full") else {
        return;
    };
    let (share, of) = wait_share(f, step_time, op.self_cpu_us);
    if share < 10.0 {
        return;
    }
    out.push(finding(
        FindingKind::Sync,
        format!(
            "{} kernel launches blocked on a full launch queue (Command Buffer Full, {} in all, {} of {of}): the CPU ran ahead until the GPU's queue filled, so the GPU bounds the step and GPU time is what to cut",
            op.calls,
            time_us(op.self_cpu_us),
            pct(share),
        ),
        share * 0.1,
        FindingTab::Ops,
        Some(&op.name),
    ));
}

/// Steps that compiled: `torch.compile` inside the profiled steps (its
/// recompile limit, a shape that changes every step), said once with what
/// to do, rather than its phases one by one.
fn compiling(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    let steps: Vec<&kinetoscope_types::StepRow> = s.steps.iter().filter(|r| !r.left_out).collect();
    let hit: Vec<&&kinetoscope_types::StepRow> = steps
        .iter()
        .filter(|r| {
            r.compile_us > 0.0
                && r.compile_us
                    >= super::limits::get(super::limits::Limit::CompilingShare) * r.time()
        })
        .collect();
    if hit.is_empty() {
        return;
    }
    let compile: f64 = hit.iter().map(|r| r.compile_us).sum();
    let total: f64 = steps.iter().map(|r| r.time()).sum();
    let share = if total > 0.0 {
        (100.0 * compile / total).min(100.0)
    } else {
        0.0
    };
    out.push(finding(
        FindingKind::Compiling,
        format!(
            "{} of the {} steps were compiling ({} of {} of step time, {}): torch.compile compiled inside the profiled steps; profile after warm-up, and if it recompiles every step (a changing shape, its recompile limit), mark the changing dimension dynamic (torch._dynamo.mark_dynamic)",
            hit.len(),
            steps.len(),
            time_us(compile),
            time_us(total),
            pct(share)
        ),
        share,
        FindingTab::Steps,
        None,
    ));
}

/// Host copies from pageable memory.
fn pageable_copy(f: &Facts, out: &mut Vec<Finding>) {
    let gpu_total = f.gpu_total;
    let pageable: Vec<_> =
        f.s.kernels
            .iter()
            .filter(|k| k.kind == GpuOpKind::Memcpy && k.name.contains("Pageable"))
            .collect();
    let pageable_us: f64 = pageable.iter().map(|k| k.total_us).sum();
    if gpu_total > 0.0 && pageable_us / gpu_total >= 0.01 {
        let moved: f64 = pageable
            .iter()
            .map(|k| k.bytes_per_call.unwrap_or(0.0) * k.calls as f64)
            .sum();
        out.push(finding(
            FindingKind::PageableCopy,
            format!(
                "Copies from pageable host memory take {} of GPU time ({} moved): pinned memory would make them faster and asynchronous",
                pct(100.0 * pageable_us / gpu_total),
                bytes(moved)
            ),
            100.0 * pageable_us / gpu_total,
            FindingTab::Kernels,
            pageable.first().map(|k| k.name.as_str()),
        ));
    }
}

/// What the layers spend their time on, when they all agree.
fn layers(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    let l = &s.layers;
    if l.count < 2 {
        return;
    }
    let total: f64 = l.items.iter().map(|i| i.device_us).sum();
    let mut by_cat: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for item in &l.items {
        for (c, us) in &item.by_category {
            *by_cat.entry(c.as_str()).or_default() += us;
        }
    }
    let top_cat = by_cat.iter().max_by(|a, b| a.1.total_cmp(b.1));
    let top_op = l.items[0].top_ops.first().map(|o| o.name.clone());
    // Only a real op is named as the top op: an annotation (a step marker,
    // say) or a graph replay context is not one.
    let is_op = |name: &str| s.ops.iter().any(|o| o.name == name && o.kind == OpKind::Op);
    let same_top_op = top_op.as_deref().is_some_and(is_op)
        && l.items
            .iter()
            .all(|i| i.top_ops.first().map(|o| &o.name) == top_op.as_ref());
    let (Some((cat, us)), true) = (top_cat, total > 0.0) else {
        return;
    };
    let share = 100.0 * us / total;
    let kinds = layer_kinds(l);
    // Kernel categories say what GPU time does; a CPU op's category
    // (`aten::to` is "other") says little, so CPU layers lead with their
    // time and their top op.
    let spend = if l.basis == TimeBasis::Cpu {
        ":".to_string()
    } else {
        format!(" spend {} of their GPU time on {cat} kernels;", pct(share))
    };
    let mut text = format!(
        "The {} layers ({}found by {}){spend} a layer takes {} of {} per {}",
        l.count,
        kinds,
        l.method,
        time_us(total / l.count as f64),
        l.basis.words(),
        if l.passes > 1 { "forward pass" } else { "step" },
    );
    if same_top_op {
        let op = &l.items[0].top_ops[0];
        text.push_str(&format!(
            ", and its top op is {} ({}) in every layer",
            op.name,
            time_us(op.us)
        ));
    }
    out.push(finding(
        FindingKind::Layers,
        text,
        share * 0.3,
        FindingTab::Layers,
        None,
    ));
}

/// Prefill and decode steps apart: their times differ by nature.
fn step_kinds(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    let kinds = &s.steps_stats.by_kind;
    if !(kinds.len() >= 2 || kinds.first().is_some_and(|k| k.count < s.steps_stats.count)) {
        return;
    }
    let parts: Vec<String> = kinds
        .iter()
        .map(|k| {
            format!(
                "{} {} step{} take{} {}{} ({} of GPU work)",
                k.count,
                k.kind,
                if k.count == 1 { "" } else { "s" },
                if k.count == 1 { "s" } else { "" },
                time_us(k.mean_us),
                if k.count == 1 { "" } else { " on average" },
                time_us(k.mean_device_us),
            )
        })
        .collect();
    out.push(finding(
        FindingKind::StepKinds,
        parts.join("; "),
        5.0,
        FindingTab::Steps,
        None,
    ));
}

/// Slow steps, against the median of the steps of their own kind (the rule
/// the app's steps chart follows: `types::steps`).
fn slow_step(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    let medians = kinetoscope_types::steps::compared_medians(&s.steps);
    let has_kinds = s.steps.iter().any(|st| !st.left_out && st.kind.is_some());
    let worst = s
        .steps
        .iter()
        .zip(&medians)
        .filter_map(|(st, m)| m.filter(|m| *m > 0.0).map(|m| (st, m)))
        .max_by(|a, b| (a.0.time() / a.1).total_cmp(&(b.0.time() / b.1)));
    let Some((worst, median)) = worst else {
        return;
    };
    let ratio = worst.time() / median;
    if ratio >= kinetoscope_types::steps::SLOW_STEP_RATIO {
        let total: f64 = s
            .steps
            .iter()
            .filter(|st| !st.left_out)
            .map(kinetoscope_types::StepRow::time)
            .sum();
        out.push(finding(
            FindingKind::SlowStep,
            format!(
                "{} takes {}, {:.1}x the median {}step ({})",
                worst.name,
                time_us(worst.time()),
                ratio,
                worst
                    .kind
                    .filter(|_| has_kinds)
                    .map(|k| format!("{k} "))
                    .unwrap_or_default(),
                time_us(median)
            ),
            100.0 * (worst.time() - median) / total,
            FindingTab::Steps,
            Some(&worst.name),
        ));
    }
}

/// Device time nobody can be blamed for.
fn unattributed(f: &Facts, out: &mut Vec<Finding>) {
    let gpu_total = f.gpu_total;
    let a = &f.s.trace.attribution;
    if gpu_total > 0.0 && a.unattributed_us / gpu_total >= 0.2 {
        out.push(finding(
            FindingKind::Unattributed,
            format!(
                "{} of GPU time cannot be tied to an op ({} GPU ops launched before the window opened{})",
                pct(100.0 * a.unattributed_us / gpu_total),
                a.without_launch,
                if a.without_op > 0 { format!(", {} launched outside any op", a.without_op) } else { String::new() }
            ),
            100.0 * a.unattributed_us / gpu_total * 0.3,
            FindingTab::Kernels,
            None,
        ));
    }
}

/// The time the op findings measure, and its whole: device time over all
/// GPU ops, or self CPU time over every op, annotation and runtime call.
struct Clock {
    basis: TimeBasis,
    total_us: f64,
}

impl Clock {
    fn new(s: &Summary, basis: TimeBasis) -> Clock {
        let total_us = match basis {
            TimeBasis::Device => s.gpu_time.gpu_op_us,
            TimeBasis::Cpu => s
                .ops
                .iter()
                .filter(|o| o.kind != OpKind::Graph)
                .map(|o| o.self_cpu_us)
                .sum(),
        };
        Clock { basis, total_us }
    }

    fn op_us(&self, o: &OpRow) -> f64 {
        self.basis.pick(o.self_device_us, o.self_cpu_us)
    }

    fn group_us(&self, g: &ShapeGroup) -> f64 {
        self.basis.pick(g.self_device_us, g.self_cpu_us)
    }

    /// A share of the whole: the summary's device share as it stands, or
    /// the self CPU time over every op's.
    fn share(&self, device_pct: f64, cpu_us: f64) -> f64 {
        match self.basis {
            TimeBasis::Device => device_pct,
            TimeBasis::Cpu => self.pct_of(cpu_us),
        }
    }

    fn op_pct(&self, o: &OpRow) -> f64 {
        self.share(o.device_pct, o.self_cpu_us)
    }

    fn group_pct(&self, g: &ShapeGroup) -> f64 {
        self.share(g.device_pct, g.self_cpu_us)
    }

    fn pct_of(&self, us: f64) -> f64 {
        if self.total_us > 0.0 {
            100.0 * us / self.total_us
        } else {
            0.0
        }
    }

    /// `of device time`, `of self CPU time`: what a per-call time is.
    fn per_call_words(&self) -> &'static str {
        match self.basis {
            TimeBasis::Device => "of device time",
            TimeBasis::Cpu => "of self CPU time",
        }
    }
}

/// `n` calls in the user's words: per step where the trace has steps.
/// Calls per step count the calls inside the steps only: a window that
/// cut passes before and after its steps has calls outside them (the H200
/// story windowed to one whole pass: 112 calls, 78 in the step;
/// `real_captures::a_window_holding_one_whole_pass_has_that_pass_as_its_step`).
/// Calls that all lie outside the steps (an encoder run once before a
/// generation's passes: `hf/t5-6e6d-generate`) are said as such ("0 calls
/// per step" said nothing).
fn calls_said(n: u64, per_step: Option<f64>, has_steps: bool) -> String {
    match per_step.filter(|_| has_steps) {
        Some(x) if x >= LEAST_PER_STEP => format!("{} per step", calls(x)),
        Some(_) => format!("{}, none inside the steps", calls(n as f64)),
        None => calls(n as f64),
    }
}

/// The sentence on an op and its share: led by the input signature that
/// carries most of its time, never by an average over unlike calls.
fn op_sentence(op: &OpRow, f: &Facts) -> (String, f64) {
    let (clock, has_steps) = (&f.clock, f.has_steps);
    let in_steps = |per_step: Option<f64>| per_step.filter(|_| has_steps);
    let per_step = |n: u64, per_step: Option<f64>| calls_said(n, per_step, has_steps);
    let time = clock.basis.words();
    let op_pct = clock.op_pct(op);
    let dominant = op
        .input_shapes
        .first()
        .filter(|g| clock.group_us(g) >= 0.5 * clock.op_us(op));
    let Some(g) = dominant else {
        // No signature dominates (or shapes were not recorded).
        let mut text = format!(
            "{} takes {} of {time}: {}",
            op.name,
            pct(op_pct),
            per_step(op.calls, op.calls_per_step)
        );
        match op.input_shapes.first() {
            Some(big) => text.push_str(&format!(
                " over {}{} input signatures; the largest ({}) takes {} in {} of {}{}",
                if op.input_shapes.len() >= 8 {
                    "at least "
                } else {
                    ""
                },
                op.input_shapes.len(),
                big.conversion.clone().unwrap_or_else(|| big.shapes.clone()),
                pct(clock.group_pct(big)),
                calls(big.calls as f64),
                time_us(clock.group_us(big) / big.calls.max(1) as f64),
                if big.calls == 1 { "" } else { " each" },
            )),
            None => text.push_str(&format!(
                ", {} {} per call",
                time_us(clock.op_us(op) / op.calls.max(1) as f64),
                clock.per_call_words()
            )),
        }
        return (text, op_pct);
    };
    let g_pct = clock.group_pct(g);
    let per_call_us = clock.group_us(g) / g.calls.max(1) as f64;
    let mut text = op.name.clone();
    match &g.conversion {
        Some(c) => text.push_str(&format!(" ({c}, {})", g.shapes)),
        None if !g.shapes.is_empty() => text.push_str(&format!(" ({})", g.shapes)),
        None => {}
    }
    text.push_str(&format!(
        " takes {} of {time}: {}",
        pct(g_pct),
        per_step(g.calls, g.calls_per_step)
    ));
    match (g.bytes_per_call, g.achieved_gbps, clock.basis) {
        (Some(b), Some(r), TimeBasis::Device) => text.push_str(&format!(
            ", {} per call in {} each ({}{})",
            bytes(b),
            time_us(per_call_us),
            rate_gbps(r),
            against_bandwidth(g.pct_of_peak_bw, g.ideal_us, f.device),
        )),
        (Some(b), _, TimeBasis::Cpu) => text.push_str(&format!(
            ", {} per call in {} each",
            bytes(b),
            time_us(per_call_us)
        )),
        (Some(b), None, _) => text.push_str(&format!(", {} per call", bytes(b))),
        _ => text.push_str(&format!(
            ", {} {} per call",
            time_us(per_call_us),
            clock.per_call_words()
        )),
    }
    if !g.parents.is_empty() {
        // The innermost few parents, step markers left out.
        let chain: Vec<String> = g
            .parents
            .iter()
            .filter(|p| !p.starts_with("ProfilerStep#"))
            .map(|p| short(p, 60))
            .collect();
        if !chain.is_empty() {
            text.push_str(&format!(
                "; {} from {}",
                match clock.basis {
                    TimeBasis::Device => "launched",
                    TimeBasis::Cpu => "called",
                },
                chain[chain.len().saturating_sub(3)..].join(" > ")
            ));
        }
    }
    if let Some(frame) = g
        .python
        .iter()
        .rev()
        .find(|f| super::python::is_user_frame(f))
    {
        text.push_str(&format!(" in {frame}"));
    }
    if let Some(p) = &g.partly_used {
        text.push_str(&format!("; {}", whole_tensor_advice(g, p, f)));
    } else if g.loop_invariant {
        let shape = shapes::dims(&g.shapes)
            .into_iter()
            .next()
            .map(|d| format!("{d:?}"))
            .unwrap_or_else(|| g.shapes.clone());
        text.push_str(&format!(
            "; it {} the same {shape} tensor {}: loop-invariant work, the same input each time: {} once and reuse it, or keep it in the dtype its reader wants",
            if g.conversion.is_some() { "converts" } else { "copies" },
            per_step_words(g, f),
            if g.conversion.is_some() { "convert it" } else { "copy it" },
        ));
    }
    let others = op.calls.saturating_sub(g.calls);
    let rest = op_pct - g_pct;
    // Other inputs are named only where they add a share worth reading
    // (not "add 0.0%").
    if others > 0 && rest >= 0.05 {
        let per_step_others = in_steps(op.calls_per_step)
            .zip(in_steps(g.calls_per_step))
            .map(|(all, these)| (all - these).max(0.0))
            .filter(|&n| n >= LEAST_PER_STEP);
        let n = match per_step_others {
            Some(n) => count(n),
            None => others.to_string(),
        };
        text.push_str(&format!(
            "; {n} other {} {}{} with other inputs add {}",
            op.name,
            if n == "1" { "call" } else { "calls" },
            if per_step_others.is_some() {
                " per step"
            } else {
                ""
            },
            pct(rest.max(0.0))
        ));
    }
    (text, g_pct)
}

/// ` = 21% of the NVIDIA H200's 4.80 TB/s; at peak 178 µs`: a rate against
/// the device's peak bandwidth, and the time at the peak.
fn against_bandwidth(pct_of_peak: Option<f64>, ideal: Option<f64>, d: Option<&Device>) -> String {
    match (
        pct_of_peak,
        ideal,
        d.and_then(|d| d.peak_gbps.map(|p| (d, p))),
    ) {
        (Some(share), Some(ideal), Some((d, peak))) => format!(
            " = {} of the {}'s {}; at peak {}",
            pct(share),
            d.name,
            rate_gbps(peak),
            time_us(ideal)
        ),
        _ => String::new(),
    }
}

/// How many times a step a signature runs, in the user's words: `in every
/// layer of every step` when that is what its count is.
fn per_step_words(g: &ShapeGroup, f: &Facts) -> String {
    let per_step = g.calls_per_step.unwrap_or(0.0);
    let layers = f.s.layers.count as f64;
    if layers >= 2.0 && per_step == layers {
        "in every layer of every step".to_string()
    } else {
        format!("{} times in every step", count(per_step))
    }
}

/// What to do about a whole tensor converted on every call.
fn whole_tensor_advice(g: &ShapeGroup, p: &PartlyUsed, f: &Facts) -> String {
    let (verb, fix) = match &g.conversion {
        Some(_) => (
            "converts",
            "cast only the entries the step uses (gather, then cast), or keep the cache in the attention kernel's dtype",
        ),
        None => ("copies", "copy only the entries the step uses"),
    };
    let shape = shapes::dims(&g.shapes)
        .into_iter()
        .next()
        .map(|d| format!("{d:?}"))
        .unwrap_or_else(|| g.shapes.clone());
    format!(
        "it {verb} the same {shape} tensor {}, though a step uses at most {} of its {} rows ({} {} grows from step to step): {fix}",
        per_step_words(g, f),
        count(p.used_rows as f64),
        count(p.rows as f64),
        p.seen_in,
        p.seen_shape,
    )
}

/// Copies and casts of a whole tensor on every call while the steps use a
/// growing part of it: what converting only that part would save. The
/// saving is GPU work, so it is measured in GPU time wherever the trace has
/// GPU ops, even when the op table ranks by CPU time (a host-bound step:
/// the cast's share of CPU time is a launch's, and hid it on the H200
/// stack-and-memory capture, `tests/it/shared_traces.rs`).
fn whole_tensor(f: &Facts, out: &mut Vec<Finding>) {
    let device = Clock::new(f.s, TimeBasis::Device);
    let clock = if f.s.gpu_time.gpu_op_us > 0.0 {
        &device
    } else {
        &f.clock
    };
    for op in f.s.ops.iter().filter(|o| o.kind == OpKind::Op) {
        for g in &op.input_shapes {
            let Some(p) = &g.partly_used else { continue };
            let share = clock.group_pct(g);
            if share < 1.0 || p.rows == 0 {
                continue;
            }
            let unused = 1.0 - p.used_rows as f64 / p.rows as f64;
            // Per step: a call's time by the calls inside the steps, not
            // every call over the steps (a window's cut passes lie outside).
            let per_step = match g.calls_per_step {
                Some(n) => clock.group_us(g) / g.calls.max(1) as f64 * n,
                None => clock.group_us(g),
            };
            let what = match &g.conversion {
                Some(c) => format!("{} ({c}, {})", op.name, g.shapes),
                None => format!("{} ({})", op.name, g.shapes),
            };
            out.push(finding(
                FindingKind::WholeTensor,
                format!(
                    "{} only the rows a step uses would cut {what} from {} to about {} of {} per step: it {} the whole tensor {} ({} of {}), while a step uses at most {} of its {} rows ({} {} grows from step to step){}",
                    match &g.conversion {
                        Some(_) => "Casting",
                        None => "Copying",
                    },
                    time_us(per_step),
                    time_us(per_step * (1.0 - unused)),
                    clock.basis.words(),
                    if g.conversion.is_some() { "converts" } else { "copies" },
                    per_step_words(g, f),
                    pct(share),
                    clock.basis.words(),
                    count(p.used_rows as f64),
                    count(p.rows as f64),
                    p.seen_in,
                    p.seen_shape,
                    match &g.conversion {
                        Some(_) => "; or keep the cache in the attention kernel's dtype",
                        None => "",
                    },
                ),
                share * unused * 0.8,
                FindingTab::Ops,
                Some(&op.name),
            ));
        }
    }
}

/// The runtime calls that launch a kernel.
fn is_kernel_launch(name: &str) -> bool {
    matches!(
        name,
        "cudaLaunchKernel"
            | "cudaLaunchKernelExC"
            | "cuLaunchKernel"
            | "cuLaunchKernelEx"
            | "hipLaunchKernel"
            | "hipExtLaunchKernel"
            | "hipModuleLaunchKernel"
    )
}

/// Kernels share of GPU time above which a kernel's geometry is worth a
/// sentence.
const GEOMETRY_SHARE_MIN: f64 = 5.0;

/// A grid with at most this share of the device's SMs in blocks leaves
/// enough of them empty to say so (a grid a little short of a full wave is
/// the wave's quantization, not a thin launch).
const THIN_GRID: f64 = 0.75;
/// Calls a kernel group needs for its geometry to be a pattern.
const GEOMETRY_CALLS_MIN: u64 = 10;

/// Launch geometry on an eager trace (graph replays launch differently and
/// have their own finding): a kernel whose grid has fewer blocks than the
/// device has SMs, and kernels shorter than the runtime call that launches
/// them.
fn launch_geometry(f: &Facts, out: &mut Vec<Finding>) {
    let s = f.s;
    if s.graphs.replays > 0 || f.gpu_total <= 0.0 {
        return;
    }
    if let Some((d, sms)) = s.device.as_ref().and_then(|d| d.sms.map(|n| (d, n as u64))) {
        let thin = s
            .kernels
            .iter()
            // Collectives run on a few channels by design.
            .filter(|k| k.kind == GpuOpKind::Kernel && k.category != KernelCategory::Communication)
            .flat_map(|k| k.groups.iter().map(move |g| (k, g)))
            .filter_map(|(k, g)| {
                let [x, y, z] = g.grid?;
                let blocks = x as u64 * y as u64 * z as u64;
                let thin = blocks > 0 && blocks as f64 <= THIN_GRID * sms as f64;
                (thin && g.pct >= GEOMETRY_SHARE_MIN && g.calls >= GEOMETRY_CALLS_MIN)
                    .then_some((k, g, blocks))
            })
            .max_by(|a, b| a.1.pct.total_cmp(&b.1.pct));
        if let Some((k, g, blocks)) = thin {
            let idle = 1.0 - blocks as f64 / sms as f64;
            out.push(finding(
                FindingKind::LaunchGeometry,
                format!(
                    "{} runs with grid {} ({} block{}) on the {}'s {} SMs, {} of GPU time in {}: {} of the SMs have no block while it runs; more blocks per call (split the work, or batch these calls) would use them",
                    k.short_name,
                    dim3(g.grid),
                    blocks,
                    if blocks == 1 { "" } else { "s" },
                    match d.source {
                        kinetoscope_types::PeakSource::Unknown => "device",
                        _ => d.name.as_str(),
                    },
                    sms,
                    pct(g.pct),
                    calls(g.calls as f64),
                    pct(100.0 * idle),
                ),
                g.pct * idle * 0.5,
                FindingTab::Kernels,
                Some(&k.name),
            ));
        }
    }
    // Kernels shorter than their launch: the host cannot issue work as fast
    // as the GPU finishes it. Where the GPU idles the launch-bound finding
    // says so already.
    if idle_pct(f).is_some() {
        return;
    }
    let (launches, launch_us) = s
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Runtime && is_kernel_launch(&o.name))
        .fold((0u64, 0.0), |(n, us), o| (n + o.calls, us + o.cpu_total_us));
    if launches == 0 {
        return;
    }
    let launch_avg = launch_us / launches as f64;
    let (short, short_us, all) = s
        .kernels
        .iter()
        .filter(|k| k.kind == GpuOpKind::Kernel)
        .fold((0u64, 0.0, 0u64), |(n, us, all), k| {
            if k.avg_us < launch_avg {
                (n + k.calls, us + k.total_us, all + k.calls)
            } else {
                (n, us, all + k.calls)
            }
        });
    if all >= 100 && short * 2 > all {
        out.push(finding(
            FindingKind::LaunchGeometry,
            format!(
                "{} of the {} kernels run shorter than the {} a launch takes on the CPU (they average {}): in eager mode the host barely keeps ahead of the GPU; CUDA graphs or fusion would take the launches off the step",
                pct(100.0 * short as f64 / all as f64),
                all,
                time_us(launch_avg),
                time_us(short_us / short.max(1) as f64),
            ),
            (100.0 * short_us / f.gpu_total) * 0.2,
            FindingTab::Kernels,
            None,
        ));
    }
}

/// Share of the FLOP peak below which a GEMM is "far below".
const GEMM_PEAK_PCT_MAX: f64 = 15.0;
/// Rows (tokens) at or under which a GEMM's shape is small (decode batch
/// sizes).
const SMALL_GEMM_ROWS: u64 = 128;

/// GEMMs far below the FLOP peak because their shape is small: the shape,
/// not the kernel, is the limit.
fn small_gemm(f: &Facts, out: &mut Vec<Finding>) {
    let Some(d) = f.device else { return };
    if f.clock.basis != TimeBasis::Device {
        return;
    }
    let mut found: Vec<(&OpRow, &ShapeGroup, shapes::Gemm)> =
        f.s.ops
            .iter()
            .filter(|o| o.kind == OpKind::Op)
            .flat_map(|o| o.input_shapes.iter().map(move |g| (o, g)))
            .filter(|(_, g)| {
                g.device_pct >= GEOMETRY_SHARE_MIN
                    && g.pct_of_peak_flops.is_some_and(|p| p < GEMM_PEAK_PCT_MAX)
            })
            .filter_map(|(o, g)| {
                let gemm = shapes::gemm(&o.name, &g.shapes, &g.dtypes)?;
                (gemm.m <= SMALL_GEMM_ROWS).then_some((o, g, gemm))
            })
            .collect();
    found.sort_by(|a, b| b.1.device_pct.total_cmp(&a.1.device_pct));
    for (op, g, gemm) in found.into_iter().take(2) {
        let (Some(achieved), Some(share), Some(peak)) = (
            g.achieved_tflops,
            g.pct_of_peak_flops,
            d.peak_tflops_for(&gemm.dtype),
        ) else {
            continue;
        };
        let per_call = g.self_device_us / g.calls.max(1) as f64;
        let bandwidth = match (gemm.bytes(), d.peak_gbps) {
            (Some(b), Some(peak_bw)) if per_call > 0.0 => {
                let gbps = b / per_call / 1e3;
                format!(
                    "; it moves {} per call at {} ({} of peak bandwidth), so memory, not compute, bounds it",
                    bytes(b),
                    rate_gbps(gbps),
                    pct(100.0 * gbps / peak_bw)
                )
            }
            _ => String::new(),
        };
        out.push(finding(
            FindingKind::SmallGemm,
            format!(
                "{} ({}, {}) runs at {}, {} of the {}'s {} peak for {}, {} of GPU time: with {} rows the shape, not the kernel, is the limit{bandwidth}; more rows per call (a larger batch per step) would use the tensor cores",
                op.name,
                g.shapes,
                shapes::dtype_label(&gemm.dtype),
                rate_tflops(achieved),
                pct(share),
                d.name,
                rate_tflops(peak),
                shapes::dtype_label(&gemm.dtype),
                pct(g.device_pct),
                gemm.m,
            ),
            g.device_pct * 0.3,
            FindingTab::Ops,
            Some(&op.name),
        ));
    }
}

/// A name cut to `n` characters, marking the cut.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('…')).collect()
    }
}

/// `[557496, 1, 1]`.
fn dim3(d: Option<[u32; 3]>) -> String {
    match d {
        Some([x, y, z]) => format!("[{x}, {y}, {z}]"),
        None => "-".into(),
    }
}

/// `3 dense, 75 MoE; ` when layers have kinds.
fn layer_kinds(l: &kinetoscope_types::Layers) -> String {
    let mut counts: std::collections::BTreeMap<LayerKind, u64> = std::collections::BTreeMap::new();
    for item in &l.items {
        if let Some(k) = item.kind {
            *counts.entry(k).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return String::new();
    }
    let order = [
        LayerKind::Dense,
        LayerKind::Prefix,
        LayerKind::Moe,
        LayerKind::Linear,
        LayerKind::Other,
    ];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|k| {
            counts.get(k).map(|n| {
                format!(
                    "{n} {}",
                    if *k == LayerKind::Moe {
                        "MoE"
                    } else {
                        k.as_str()
                    }
                )
            })
        })
        .collect();
    format!("{}; ", parts.join(", "))
}

/// Runtime calls that block the calling CPU thread until the GPU catches up
/// (one rule: the findings and the diff's bound, `host.rs`).
pub(crate) fn is_blocking(name: &str) -> bool {
    name.contains("Synchronize") || matches!(name, "cudaMemcpy" | "hipMemcpy" | "cudaMemcpy2D")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetoscope_types::{KernelGroup, KernelRow, PeakSource};

    /// A summary of an eager trace on an H200 with 1 ms of GPU work.
    fn on_h200() -> Summary {
        let mut s = Summary::default();
        s.gpu_time.gpu_op_us = 1000.0;
        s.gpu_time.busy_pct = 95.0;
        s.device = crate::devices::device(
            Some(&crate::devices::DeviceQuery {
                name: "NVIDIA H200",
                sms: Some(132),
                ..Default::default()
            }),
            None,
            None,
        );
        assert_eq!(s.device.as_ref().unwrap().source, PeakSource::Table);
        s
    }

    /// A decode-sized projection (64 rows) at 30 µs a call: 62.6 TFLOP/s,
    /// 6.3% of the H200's BF16 peak, its 30.5 MB at 1.02 TB/s.
    #[test]
    fn a_small_gemm_is_limited_by_its_shape() {
        let mut s = on_h200();
        s.ops.push(OpRow {
            name: "aten::mm".into(),
            kind: OpKind::Op,
            calls: 100,
            self_device_us: 3000.0,
            device_pct: 30.0,
            input_shapes: vec![ShapeGroup {
                shapes: "[[64, 7168], [7168, 2048]]".into(),
                dtypes: r#"["c10::BFloat16", "c10::BFloat16"]"#.into(),
                calls: 100,
                self_device_us: 3000.0,
                device_pct: 30.0,
                ..Default::default()
            }],
            ..Default::default()
        });
        super::super::roofline::apply(&mut s);
        let g = &s.ops[0].input_shapes[0];
        assert!((g.achieved_tflops.unwrap() - 62.63).abs() < 0.01, "{g:?}");
        assert!((g.pct_of_peak_flops.unwrap() - 6.33).abs() < 0.01, "{g:?}");
        let f = find(&s);
        let gemm = f
            .iter()
            .find(|f| f.kind == FindingKind::SmallGemm)
            .expect("small GEMM");
        for want in [
            "aten::mm ([[64, 7168], [7168, 2048]], BFloat16) runs at 62.6 TFLOP/s, 6.3% of the NVIDIA H200's 989 TFLOP/s peak",
            "with 64 rows the shape, not the kernel, is the limit",
            "it moves 30.5 MB per call at 1.02 TB/s (21.2% of peak bandwidth)",
        ] {
            assert!(gemm.text.contains(want), "{want:?} not in {}", gemm.text);
        }
        // A large GEMM at the same rate is not "small": no such sentence.
        s.ops[0].input_shapes[0].shapes = "[[4096, 7168], [7168, 2048]]".into();
        super::super::roofline::apply(&mut s);
        assert!(find(&s).iter().all(|f| f.kind != FindingKind::SmallGemm));
    }

    fn kernel(grid: [u32; 3], calls: u64, pct: f64, avg_us: f64) -> KernelRow {
        KernelRow {
            name: "fused_moe_kernel".into(),
            short_name: "fused_moe_kernel".into(),
            kind: GpuOpKind::Kernel,
            calls,
            total_us: avg_us * calls as f64,
            avg_us,
            pct,
            groups: vec![KernelGroup {
                grid: Some(grid),
                block: Some([128, 1, 1]),
                calls,
                total_us: avg_us * calls as f64,
                avg_us,
                pct,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// The top kernel's sentence reads as English: "an elementwise
    /// kernel", "1 call" (it said "a elementwise kernel", "1 calls").
    #[test]
    fn the_top_kernel_takes_its_article_and_its_count() {
        let mut s = on_h200();
        let mut k = kernel([64, 1, 1], 1, 60.0, 600.0);
        k.category = KernelCategory::Elementwise;
        s.kernels.push(k);
        let f = find(&s);
        let top = f
            .iter()
            .find(|f| f.kind == FindingKind::TopKernel)
            .expect("top kernel");
        assert!(
            top.text
                .starts_with("The top GPU kernel, fused_moe_kernel, is an elementwise kernel taking 60.0% of GPU time: 1 call averaging 600 µs"),
            "{}",
            top.text
        );
        assert_eq!(a_kind(KernelCategory::Gemm), "a gemm");
        assert_eq!(a_kind(KernelCategory::Other), "an uncategorized");
    }

    #[test]
    fn thin_grids_on_eager_traces_only() {
        let mut s = on_h200();
        s.kernels.push(kernel([64, 1, 1], 100, 20.0, 2.0));
        let f = find(&s);
        let geo = f
            .iter()
            .find(|f| f.kind == FindingKind::LaunchGeometry)
            .expect("thin grid");
        assert!(
            geo.text.starts_with("fused_moe_kernel runs with grid [64, 1, 1] (64 blocks) on the NVIDIA H200's 132 SMs, 20.0% of GPU time in 100 calls: 51.5% of the SMs have no block"),
            "{}",
            geo.text
        );
        // A grid of most of a wave is its quantization, not a thin launch.
        s.kernels[0] = kernel([120, 1, 1], 100, 20.0, 2.0);
        assert!(find(&s)
            .iter()
            .all(|f| f.kind != FindingKind::LaunchGeometry));
        // Graph replays launch differently: no geometry sentence.
        s.kernels[0] = kernel([64, 1, 1], 100, 20.0, 2.0);
        s.graphs.replays = 10;
        assert!(find(&s)
            .iter()
            .all(|f| f.kind != FindingKind::LaunchGeometry));
    }

    #[test]
    fn kernels_shorter_than_their_launch() {
        let mut s = on_h200();
        s.kernels.push(kernel([4096, 1, 1], 900, 40.0, 1.5));
        s.ops.push(OpRow {
            name: "cudaLaunchKernel".into(),
            kind: OpKind::Runtime,
            calls: 900,
            cpu_total_us: 900.0 * 4.0,
            ..Default::default()
        });
        let f = find(&s);
        let short = f
            .iter()
            .find(|f| f.kind == FindingKind::LaunchGeometry)
            .expect("short kernels");
        assert!(
            short.text.starts_with("100.0% of the 900 kernels run shorter than the 4.00 µs a launch takes on the CPU (they average 1.50 µs)"),
            "{}",
            short.text
        );
    }
}
