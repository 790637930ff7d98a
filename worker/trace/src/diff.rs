//! Diffs: run a (baseline) against run b (patch), from their summaries only.
//!
//! Times are compared per step when both runs have steps (so runs of
//! different lengths compare), else per trace. Ops match by name; kernels by
//! name, then by normalized name (no template arguments, addresses or
//! hashes), so a recompiled kernel still matches; the rest are listed as
//! added or removed.

use crate::analysis::names::normalized_name;
use crate::timeline::TimelineIndex;
use kinetoscope_types::units::{calls, change_pct, pct, time_us};
use kinetoscope_types::*;
use std::collections::{BTreeMap, HashMap};

/// Rows kept in each delta table (sorted by absolute change).
const MAX_ROWS: usize = 500;
/// Names kept in the added/removed lists.
const MAX_NAMES: usize = 200;

/// A summary with the identity of its run.
pub struct Side<'a> {
    /// Id.
    pub id: &'a str,
    /// Name.
    pub name: &'a str,
    /// Summary.
    pub summary: &'a Summary,
}

/// Change from `a` to `b`, % (100 for something new).
pub(crate) fn change(a: f64, b: f64) -> f64 {
    if a.abs() > 0.0 {
        100.0 * (b - a) / a
    } else if b.abs() > 0.0 {
        100.0
    } else {
        0.0
    }
}

/// Both values in one unit: `93.2 -> 66.1 ms`.
pub fn pair(a_us: f64, b_us: f64) -> String {
    let m = a_us.abs().max(b_us.abs());
    let (div, unit) = if m >= 1e6 {
        (1e6, "s")
    } else if m >= 1e3 {
        (1e3, "ms")
    } else {
        (1.0, "µs")
    };
    let f = |x: f64| {
        let v = x / div;
        if m / div >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    format!("{} -> {} {unit}", f(a_us), f(b_us))
}

fn side(s: &Side) -> DiffSide {
    DiffSide {
        id: s.id.to_string(),
        name: s.name.to_string(),
        devices: s.summary.trace.devices.iter().take(1).cloned().collect(),
        steps: s.summary.steps_stats.count,
        mean_step_us: s.summary.steps_stats.mean_us,
        p50_step_us: s.summary.steps_stats.p50_us,
        busy_pct: s.summary.gpu_time.busy_pct,
        layers: s.summary.layers.items.clone(),
        layer_method: s.summary.layers.method,
        bound: Some(crate::host::bound(s.summary)),
    }
}

fn delta_rows(
    a: &HashMap<String, (f64, f64, Option<KernelCategory>)>,
    b: &HashMap<String, (f64, f64, Option<KernelCategory>)>,
) -> (Vec<DeltaRow>, Vec<String>, Vec<String>) {
    let mut rows = Vec::new();
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for (name, &(au, ac, ref cat)) in a {
        match b.get(name) {
            Some(&(bu, bc, _)) => rows.push(DeltaRow {
                name: name.clone(),
                a_us: au,
                b_us: bu,
                delta_us: bu - au,
                change_pct: change(au, bu),
                a_calls: ac,
                b_calls: bc,
                matched_by: MatchedBy::Name,
                b_name: None,
                category: *cat,
                short_name: None,
            }),
            None => removed.push(name.clone()),
        }
    }
    for name in b.keys() {
        if !a.contains_key(name) {
            added.push(name.clone());
        }
    }
    (rows, added, removed)
}

fn finish(mut rows: Vec<DeltaRow>) -> Vec<DeltaRow> {
    rows.sort_by(|x, y| {
        y.delta_us
            .abs()
            .total_cmp(&x.delta_us.abs())
            .then(x.name.cmp(&y.name))
    });
    rows.truncate(MAX_ROWS);
    rows
}

fn sorted_names(mut v: Vec<String>, weight: &dyn Fn(&str) -> f64) -> Vec<String> {
    v.sort_by(|x, y| weight(y).total_cmp(&weight(x)).then(x.cmp(y)));
    v.truncate(MAX_NAMES);
    v
}

/// The time two runs' ops are compared by: self device time, or self CPU
/// time when both traces' time is the CPU's (the rule the op table and
/// findings follow). The diff and the regression gate share it.
pub fn op_basis(a: &Summary, b: &Summary) -> TimeBasis {
    match (a.time_basis(), b.time_basis()) {
        (TimeBasis::Cpu, TimeBasis::Cpu) => TimeBasis::Cpu,
        _ => TimeBasis::Device,
    }
}

/// Compares two runs' summaries.
pub fn diff(a: &Side, b: &Side) -> Diff {
    let (sa, sb) = (a.summary, b.summary);
    let per_step = sa.steps_stats.count > 0 && sb.steps_stats.count > 0;
    let (na, nb) = if per_step {
        (sa.steps_stats.count as f64, sb.steps_stats.count as f64)
    } else {
        (1.0, 1.0)
    };

    let op_time = op_basis(sa, sb);
    // Each `ProfilerStep#N` row is one step's own time: the steps fold into
    // one row, as torch prints them (`ProfilerStep#*`), or two captures of
    // different step numbers would list every step as removed and added.
    let ops_of = |s: &Summary, n: f64| -> HashMap<String, (f64, f64, Option<KernelCategory>)> {
        let mut rows: HashMap<String, (f64, f64, Option<KernelCategory>)> = HashMap::new();
        for o in &s.ops {
            let us = op_time.pick(o.self_device_us, o.self_cpu_us);
            if us <= 0.0 {
                continue;
            }
            let row = rows
                .entry(crate::host::host_name(&o.name))
                .or_insert((0.0, 0.0, None));
            row.0 += us / n;
            row.1 += o.calls as f64 / n;
        }
        rows
    };
    let (oa, ob) = (ops_of(sa, na), ops_of(sb, nb));
    let (op_rows, added_ops, removed_ops) = delta_rows(&oa, &ob);

    // Kernels by name, then by normalized name.
    let kernels_of = |s: &Summary, n: f64| -> HashMap<String, (f64, f64, Option<KernelCategory>)> {
        s.kernels
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    (k.total_us / n, k.calls as f64 / n, Some(k.category)),
                )
            })
            .collect()
    };
    let (ka, kb) = (kernels_of(sa, na), kernels_of(sb, nb));
    let (mut kernel_rows, added_k, removed_k) = delta_rows(&ka, &kb);
    let group = |names: &[String], map: &HashMap<String, (f64, f64, Option<KernelCategory>)>| {
        let mut g: BTreeMap<String, (f64, f64, Vec<String>, Option<KernelCategory>)> =
            BTreeMap::new();
        for n in names {
            let e = g
                .entry(normalized_name(n))
                .or_insert((0.0, 0.0, Vec::new(), None));
            let (us, calls, cat) = &map[n];
            e.0 += us;
            e.1 += calls;
            e.2.push(n.clone());
            e.3 = *cat;
        }
        g
    };
    let ga = group(&removed_k, &ka);
    let gb = group(&added_k, &kb);
    let mut added_kernels = Vec::new();
    let mut removed_kernels = Vec::new();
    for (norm, (au, ac, names_a, cat)) in &ga {
        match gb.get(norm) {
            Some((bu, bc, names_b, _)) => kernel_rows.push(DeltaRow {
                name: names_a[0].clone(),
                a_us: *au,
                b_us: *bu,
                delta_us: bu - au,
                change_pct: change(*au, *bu),
                a_calls: *ac,
                b_calls: *bc,
                matched_by: MatchedBy::Normalized,
                b_name: Some(names_b[0].clone()),
                category: *cat,
                short_name: None,
            }),
            None => removed_kernels.extend(names_a.iter().cloned()),
        }
    }
    for (norm, (_, _, names_b, _)) in &gb {
        if !ga.contains_key(norm) {
            added_kernels.extend(names_b.iter().cloned());
        }
    }

    // Categories.
    let cats = |s: &Summary, n: f64| -> HashMap<String, (f64, f64, Option<KernelCategory>)> {
        s.gpu_time
            .by_category
            .iter()
            .map(|c| {
                (
                    c.category.as_str().to_string(),
                    (c.us / n, c.calls as f64 / n, None),
                )
            })
            .collect()
    };
    let (ca, cb) = (cats(sa, na), cats(sb, nb));
    let (mut cat_rows, cat_added, cat_removed) = delta_rows(&ca, &cb);
    for c in cat_added {
        let (bu, bc, _) = cb[&c];
        cat_rows.push(DeltaRow {
            name: c,
            b_us: bu,
            delta_us: bu,
            change_pct: 100.0,
            b_calls: bc,
            matched_by: MatchedBy::Added,
            ..Default::default()
        });
    }
    for c in cat_removed {
        let (au, ac, _) = ca[&c];
        cat_rows.push(DeltaRow {
            name: c,
            a_us: au,
            delta_us: -au,
            change_pct: -100.0,
            a_calls: ac,
            matched_by: MatchedBy::Removed,
            ..Default::default()
        });
    }

    // Layers (already per step in the summaries).
    let mut layers: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for l in &sa.layers.items {
        layers.entry(l.index).or_default().0 = l.device_us;
    }
    for l in &sb.layers.items {
        layers.entry(l.index).or_default().1 = l.device_us;
    }
    let layers: Vec<LayerDelta> = layers
        .into_iter()
        .map(|(index, (a_us, b_us))| LayerDelta {
            index,
            a_us,
            b_us,
            delta_us: b_us - a_us,
        })
        .collect();

    let steps = StepsDiff {
        a_mean_us: sa.steps_stats.mean_us,
        b_mean_us: sb.steps_stats.mean_us,
        change_pct: change(sa.steps_stats.mean_us, sb.steps_stats.mean_us),
        a_p50_us: sa.steps_stats.p50_us,
        b_p50_us: sb.steps_stats.p50_us,
        p50_change_pct: change(sa.steps_stats.p50_us, sb.steps_stats.p50_us),
    };
    let busy_a = sa.gpu_time.busy_us / na;
    let busy_b = sb.gpu_time.busy_us / nb;
    let gpu_busy = ValueDiff {
        a_us: busy_a,
        b_us: busy_b,
        delta_us: busy_b - busy_a,
        change_pct: change(busy_a, busy_b),
    };

    let weight_a = |n: &str| ka.get(n).map_or(0.0, |v| v.0);
    let weight_b = |n: &str| kb.get(n).map_or(0.0, |v| v.0);
    let op_rows = finish(op_rows);
    let mut kernel_rows = finish(kernel_rows);
    let (side_a, side_b) = (side(a), side(b));
    let mut host_ops = crate::host::host_rows(sa, sb);
    let host = match (&side_a.bound, &side_b.bound) {
        (Some(x), Some(y)) => Some(crate::host::host_change(&host_ops, x, y)),
        _ => None,
    };
    host_ops.truncate(MAX_ROWS);
    let full: Vec<&str> = kernel_rows.iter().map(|r| r.name.as_str()).collect();
    let shorts = crate::analysis::names::distinct_short_names(&full);
    for (r, short) in kernel_rows.iter_mut().zip(shorts) {
        r.short_name = Some(short);
    }
    let mut d = Diff {
        a: side_a,
        b: side_b,
        basis: if per_step {
            DiffBasis::PerStep
        } else {
            DiffBasis::PerTrace
        },
        steps,
        gpu_busy,
        ops: op_rows,
        host_ops,
        host,
        kernels: kernel_rows,
        categories: finish(cat_rows),
        layers,
        added_ops: sorted_names(added_ops, &|n| ob.get(n).map_or(0.0, |v| v.0)),
        removed_ops: sorted_names(removed_ops, &|n| oa.get(n).map_or(0.0, |v| v.0)),
        added_kernels: sorted_names(added_kernels, &weight_b),
        removed_kernels: sorted_names(removed_kernels, &weight_a),
        ranks: Vec::new(),
        findings: Vec::new(),
        op_time,
        memory: sa
            .memory
            .iter()
            .filter_map(|ma| {
                let mb = sb.memory.iter().find(|m| m.device == ma.device)?;
                Some(MemoryDelta {
                    device: ma.device.clone(),
                    a_peak_bytes: ma.peak_bytes,
                    b_peak_bytes: mb.peak_bytes,
                    peak_change_pct: change(ma.peak_bytes as f64, mb.peak_bytes as f64),
                    a_churn_bytes_per_step: ma.churn_bytes_per_step,
                    b_churn_bytes_per_step: mb.churn_bytes_per_step,
                })
            })
            .collect(),
    };
    d.findings = findings(&d, sa, sb, &ka, &kb);
    d
}

fn findings(
    d: &Diff,
    sa: &Summary,
    sb: &Summary,
    ka: &HashMap<String, (f64, f64, Option<KernelCategory>)>,
    kb: &HashMap<String, (f64, f64, Option<KernelCategory>)>,
) -> Vec<DiffFinding> {
    let mut out: Vec<(f64, String)> = Vec::new();
    let per = if d.basis == DiffBasis::PerStep {
        " per step"
    } else {
        ""
    };
    if d.basis == DiffBasis::PerStep {
        out.push((
            1e12,
            format!(
                "step time {} ({})",
                change_pct(d.steps.change_pct),
                pair(d.steps.a_mean_us, d.steps.b_mean_us)
            ),
        ));
    } else {
        let (a, b) = (sa.gpu_time.gpu_op_us, sb.gpu_time.gpu_op_us);
        out.push((
            1e12,
            format!("GPU time {} ({})", change_pct(change(a, b)), pair(a, b)),
        ));
    }
    let op_time = d.op_time;
    let time_words = match op_time {
        TimeBasis::Device => "self device time",
        TimeBasis::Cpu => "self CPU time",
    };
    // What a change is measured against: GPU busy time, or on CPU-only
    // traces the larger of the two step times (or op self times).
    let scale = match op_time {
        TimeBasis::Device => d.gpu_busy.a_us.max(d.gpu_busy.b_us),
        TimeBasis::Cpu => {
            let sum = |side: fn(&DeltaRow) -> f64| d.ops.iter().map(side).sum::<f64>();
            sum(|r| r.a_us).max(sum(|r| r.b_us))
        }
    }
    .max(1e-9);
    for r in d.ops.iter().take(3) {
        if r.delta_us.abs() >= 0.01 * scale {
            out.push((
                r.delta_us.abs(),
                format!(
                    "{} {time_words} {} ({}{per})",
                    r.name,
                    change_pct(r.change_pct),
                    pair(r.a_us, r.b_us)
                ),
            ));
        }
    }
    // Inside an op that changed: the input signature that carries the
    // change (matched by conversion, else dtypes, since shapes change with
    // the patch), with its bytes per call.
    let n_of = |s: &Summary| {
        if d.basis == DiffBasis::PerStep {
            s.steps_stats.count.max(1) as f64
        } else {
            1.0
        }
    };
    let (na, nb) = (n_of(sa), n_of(sb));
    for r in d
        .ops
        .iter()
        .take(3)
        .filter(|r| r.delta_us.abs() >= 0.01 * scale)
    {
        // Per conversion (or dtypes): time per step, and the bytes per call
        // and share of peak bandwidth of its leading signature.
        type Group = (f64, Option<f64>, Option<f64>);
        let groups = |s: &Summary, n: f64| -> HashMap<String, Group> {
            let mut m: HashMap<String, Group> = HashMap::new();
            if let Some(op) = s.ops.iter().find(|o| o.name == r.name) {
                for g in &op.input_shapes {
                    let key = g.conversion.clone().unwrap_or_else(|| g.dtypes.clone());
                    let e = m
                        .entry(key)
                        .or_insert((0.0, g.bytes_per_call, g.pct_of_peak_bw));
                    e.0 += op_time.pick(g.self_device_us, g.self_cpu_us) / n;
                }
            }
            m
        };
        let (ga, gb) = (groups(sa, na), groups(sb, nb));
        let best = ga
            .iter()
            .filter_map(|(k, a)| gb.get(k).map(|b| (k, *a, *b)))
            .max_by(|x, y| {
                (x.2 .0 - x.1 .0)
                    .abs()
                    .total_cmp(&(y.2 .0 - y.1 .0).abs())
                    // Equal changes: the first key by name, not by hash order.
                    .then(y.0.cmp(x.0))
            });
        if let Some((key, (a_us, a_bytes, a_peak), (b_us, b_bytes, b_peak))) = best {
            if (b_us - a_us).abs() >= 0.5 * r.delta_us.abs() && ga.len() + gb.len() > 2 {
                let bytes_text = match (a_bytes, b_bytes) {
                    (Some(x), Some(y)) if x != y => {
                        format!(
                            ", {} -> {} per call",
                            kinetoscope_types::units::bytes(x),
                            kinetoscope_types::units::bytes(y)
                        )
                    }
                    _ => String::new(),
                };
                let peak_text = match (a_peak, b_peak) {
                    (Some(x), Some(y)) => format!(
                        ", {} -> {} of {} peak bandwidth",
                        pct(x),
                        pct(y),
                        sb.device
                            .as_ref()
                            .map(|d| format!("the {}'s", d.name))
                            .unwrap_or_else(|| "the device's".into())
                    ),
                    _ => String::new(),
                };
                out.push((
                    (b_us - a_us).abs() * 1.001,
                    format!(
                        "{} ({key}) {time_words} {} ({}{per}){bytes_text}{peak_text}",
                        r.name,
                        change_pct(change(a_us, b_us)),
                        pair(a_us, b_us)
                    ),
                ));
            }
        }
    }
    if (d.gpu_busy.change_pct).abs() >= 1.0 {
        out.push((
            d.gpu_busy.delta_us.abs() * 0.9,
            format!(
                "GPU busy time {} ({}{per})",
                change_pct(d.gpu_busy.change_pct),
                pair(d.gpu_busy.a_us, d.gpu_busy.b_us)
            ),
        ));
    }
    for r in d.categories.iter().take(2) {
        if r.delta_us.abs() >= 0.05 * scale {
            out.push((
                r.delta_us.abs() * 0.8,
                format!(
                    "{} kernels {} ({}{per})",
                    r.name,
                    change_pct(r.change_pct),
                    pair(r.a_us, r.b_us)
                ),
            ));
        }
    }
    for name in d.added_kernels.iter().take(2) {
        let (us, n, _) = kb[name];
        if us >= 0.02 * scale {
            out.push((
                us * 0.7,
                format!(
                    "new kernel {}: {}{per} in {}",
                    crate::analysis::names::short_name(name),
                    time_us(us),
                    calls(n)
                ),
            ));
        }
    }
    for name in d.removed_kernels.iter().take(2) {
        let (us, n, _) = ka[name];
        if us >= 0.02 * scale {
            out.push((
                us * 0.7,
                format!(
                    "kernel {} is gone: it took {}{per} in {}",
                    crate::analysis::names::short_name(name),
                    time_us(us),
                    calls(n)
                ),
            ));
        }
    }
    if let Some(l) = d
        .layers
        .iter()
        .max_by(|x, y| x.delta_us.abs().total_cmp(&y.delta_us.abs()))
    {
        if !d.layers.is_empty() && l.delta_us.abs() >= 0.01 * scale {
            let total_a: f64 = d.layers.iter().map(|l| l.a_us).sum();
            let total_b: f64 = d.layers.iter().map(|l| l.b_us).sum();
            out.push((
                (total_b - total_a).abs() * 0.6,
                format!(
                    "device time in the {} layers {} ({} per step)",
                    d.layers.len(),
                    change_pct(change(total_a, total_b)),
                    pair(total_a, total_b)
                ),
            ));
        }
    }
    host_findings(d, &mut out);
    out.sort_by(|x, y| y.0.total_cmp(&x.0));
    out.into_iter()
        .map(|(_, text)| DiffFinding { text })
        .collect()
}

/// What bounds each side, and what the host's time did: the sentences
/// that explain a step time the device tables cannot (a patch whose step
/// is now bound by its host; a host that ran slower as a whole).
fn host_findings(d: &Diff, out: &mut Vec<(f64, String)>) {
    let (Some(a), Some(b), Some(h)) = (&d.a.bound, &d.b.bound, &d.host) else {
        return;
    };
    // Below the largest op's sentences (what the patch changed leads),
    // above the rest.
    let top = d
        .ops
        .first()
        .map_or(1e9, |r| r.delta_us.abs() * 0.95)
        .max(1.0);
    if a.by != b.by {
        out.push((top, format!("A is {}; B is {}", a.words(), b.words())));
    }
    if b.by == StepBound::Gpu && a.by == StepBound::Gpu {
        return;
    }
    let per = if d.basis == DiffBasis::PerStep {
        " per step"
    } else {
        ""
    };
    let what = format!(
        "host time{per} {} ({})",
        change_pct(h.change_pct),
        pair(h.a_us, h.b_us)
    );
    if crate::host::slower_host(b, h) {
        out.push((
            top * 0.9,
            format!(
                "{what}, alike in every op: {} of A's host time is in ops that took {:.2}x their time (within 15%), so the host itself ran {} (another machine, its clock, contention), not the patch",
                pct(h.uniform_pct),
                h.median_ratio,
                if h.median_ratio > 1.0 { "slower" } else { "faster" }
            ),
        ));
        return;
    }
    if let Some(op) = h
        .concentrated_in
        .as_ref()
        .filter(|_| h.change_pct >= crate::host::MIN_HOST_CHANGE_PCT)
    {
        let r = d.host_ops.iter().find(|r| &r.name == op);
        out.push((
            top * 0.9,
            format!(
                "{what}, most of it in {op}{}",
                r.map(|r| format!(" ({})", pair(r.a_us, r.b_us)))
                    .unwrap_or_default()
            ),
        ));
    }
    if b.by == StepBound::Host {
        // What B's step, bound by its host, is made of.
        let mut top_b: Vec<&DeltaRow> = d.host_ops.iter().collect();
        top_b.sort_by(|x, y| y.b_us.total_cmp(&x.b_us));
        let parts: Vec<String> = top_b
            .iter()
            .take(3)
            .map(|r| format!("{} {}", r.name, time_us(r.b_us)))
            .collect();
        out.push((
            top * 0.8,
            format!(
                "B's step is bound by its host: {}{per} of CPU work ({}), most of it in {}",
                time_us(b.host_us),
                what,
                parts.join(", ")
            ),
        ));
    }
}

/// Sentences on the cross-rank numbers of two multi-rank runs, and on what
/// bounds their ranks (`deltas`: their [`rank_deltas`], made once by the caller).
pub fn rank_findings(a: &RanksSummary, b: &RanksSummary, deltas: &[RankDelta]) -> Vec<DiffFinding> {
    let mut out = Vec::new();
    if let (Some(ra), Some(rb)) = (a.slowest_rank, b.slowest_rank) {
        out.push(DiffFinding {
            text: format!(
                "slowest rank {ra} ({} over the median) -> rank {rb} ({} over the median)",
                change_pct(a.slowest_by_pct),
                change_pct(b.slowest_by_pct)
            ),
        });
    }
    out.extend(rank_host_findings(deltas));
    let coll = |s: &RanksSummary| {
        s.ranks.iter().map(|r| r.collective_us).sum::<f64>() / s.ranks.len().max(1) as f64
    };
    let (ca, cb) = (coll(a), coll(b));
    if ca > 0.0 || cb > 0.0 {
        out.push(DiffFinding {
            text: format!(
                "collective time per rank {} ({})",
                change_pct(change(ca, cb)),
                pair(ca, cb)
            ),
        });
    }
    out
}

/// What bounds the ranks of each run, and how their hosts changed: alike
/// on every rank (the hosts ran slower, as [`crate::host`] tells for one
/// rank), or on one rank more than the others (that rank's host: another
/// process on it, a slower CPU).
fn rank_host_findings(deltas: &[RankDelta]) -> Vec<DiffFinding> {
    use crate::host::MIN_HOST_CHANGE_PCT;
    let mut out = Vec::new();
    let tally = |pick: &dyn Fn(&RankDelta) -> Option<&Bound>| {
        let mut by: Vec<(StepBound, usize)> = Vec::new();
        for b in deltas.iter().filter_map(pick) {
            match by.iter_mut().find(|(k, _)| *k == b.by) {
                Some((_, n)) => *n += 1,
                None => by.push((b.by, 1)),
            }
        }
        by.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        by.iter()
            .map(|(k, n)| format!("{n} bound by {}", k.words()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (ta, tb) = (
        tally(&|d| d.a_bound.as_ref()),
        tally(&|d| d.b_bound.as_ref()),
    );
    if !ta.is_empty() && !tb.is_empty() {
        out.push(DiffFinding {
            text: format!("ranks of A: {ta}; ranks of B: {tb}"),
        });
    }
    let mut changes: Vec<(i64, f64)> = deltas
        .iter()
        .filter_map(|d| Some((d.rank, d.host_change_pct?)))
        .collect();
    if changes.len() < 2 {
        return out;
    }
    changes.sort_by(|x, y| x.1.total_cmp(&y.1));
    let median = changes[changes.len() / 2].1;
    let band = 100.0 * UNIFORM_BAND;
    let (lo, hi) = (changes[0], changes[changes.len() - 1]);
    if hi.1 - lo.1 <= 2.0 * band && median.abs() >= MIN_HOST_CHANGE_PCT {
        out.push(DiffFinding {
            text: format!(
                "every rank's host time changed alike ({} to {}): the hosts themselves ran {}, not one rank",
                change_pct(lo.1),
                change_pct(hi.1),
                if median > 0.0 { "slower" } else { "faster" }
            ),
        });
    } else if let Some(&(rank, c)) = changes
        .iter()
        .filter(|(_, c)| (c - median).abs() > band && c.abs() >= MIN_HOST_CHANGE_PCT)
        .max_by(|x, y| (x.1 - median).abs().total_cmp(&(y.1 - median).abs()))
    {
        out.push(DiffFinding {
            text: format!(
                "rank {rank}'s host time changed {} where the median rank's changed {}: that rank's host (another process on it, a slower CPU) more than the patch",
                change_pct(c),
                change_pct(median)
            ),
        });
    }
    out
}

/// Rank-by-rank comparison of two multi-rank runs' cross-rank summaries.
pub fn rank_deltas(a: &RanksSummary, b: &RanksSummary) -> Vec<RankDelta> {
    a.ranks
        .iter()
        .filter_map(|ra| {
            let rb = b.ranks.iter().find(|r| r.rank == ra.rank)?;
            Some(RankDelta {
                rank: ra.rank,
                a_mean_step_us: ra.mean_step_us,
                b_mean_step_us: rb.mean_step_us,
                change_pct: change(ra.mean_step_us, rb.mean_step_us),
                a_bound: ra.bound.clone(),
                b_bound: rb.bound.clone(),
                host_change_pct: match (&ra.bound, &rb.bound) {
                    (Some(x), Some(y)) => Some(change(x.host_us, y.host_us)),
                    _ => None,
                },
            })
        })
        .collect()
}

/// Where two runs line up on the diff timeline (`GET /api/diff/{a}/{b}/align`):
/// an anchor (a step, or a layer of the median step) and where it lies in
/// each run's timeline index, or why it cannot be found.
pub fn align(
    a: &TimelineIndex,
    b: &TimelineIndex,
    anchor: Option<&str>,
) -> Result<DiffAlign, String> {
    let span = |(start_ns, end_ns): (i64, i64)| AlignSpan { start_ns, end_ns };
    // The step whose duration is the median of the run's steps.
    fn median_step(ix: &TimelineIndex) -> Option<usize> {
        kinetoscope_types::stats::median_index(ix.steps.len(), |k| {
            ix.steps[k].end_ns - ix.steps[k].start_ns
        })
    }
    fn anchor_span(ix: &TimelineIndex, what: &str, n: i64) -> Result<(i64, i64), String> {
        if ix.steps.is_empty() {
            return Err("a run has no steps to align on".into());
        }
        match what {
            "step" => {
                let k = usize::try_from(n)
                    .ok()
                    .filter(|&k| k < ix.steps.len())
                    .ok_or_else(|| {
                        format!(
                            "no step {n}: a run has {} steps (0 to {})",
                            ix.steps.len(),
                            ix.steps.len() - 1
                        )
                    })?;
                Ok((ix.steps[k].start_ns, ix.steps[k].end_ns))
            }
            _ => {
                let m = median_step(ix).ok_or("a run has no steps")?;
                // Layers are device-side: the first layer L that starts
                // after the median step does.
                let s = ix.steps[m].start_ns;
                ix.layers
                    .iter()
                    .filter(|l| l.start_ns >= s)
                    .find(|l| l.index == n)
                    .map(|l| (l.start_ns, l.end_ns))
                    .ok_or_else(|| format!("no layer {n} in the median step"))
            }
        }
    }
    let parsed = match anchor.filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => {
            let (what, n) = text
                .split_once(':')
                .ok_or_else(|| format!("anchor must be step:N or layer:L, not {text:?}"))?;
            if !matches!(what, "step" | "layer") {
                return Err(format!("anchor must be step:N or layer:L, not {text:?}"));
            }
            let n: i64 = n
                .parse()
                .map_err(|_| format!("anchor must be step:N or layer:L, not {text:?}"))?;
            Some((what, n))
        }
    };
    match parsed {
        None => {
            let (ma, mb) = (
                median_step(a).ok_or("run a has no steps to align on")?,
                median_step(b).ok_or("run b has no steps to align on")?,
            );
            Ok(DiffAlign {
                anchor: "median step".into(),
                a: span((a.steps[ma].start_ns, a.steps[ma].end_ns)),
                b: span((b.steps[mb].start_ns, b.steps[mb].end_ns)),
            })
        }
        Some((what, n)) => Ok(DiffAlign {
            anchor: format!("{what}:{n}"),
            a: span(anchor_span(a, what, n)?),
            b: span(anchor_span(b, what, n)?),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_share_a_unit() {
        assert_eq!(pair(93_200.0, 66_100.0), "93.2 -> 66.1 ms");
        assert_eq!(pair(64_600.0, 1_900.0), "64.6 -> 1.9 ms");
        assert_eq!(pair(500.0, 20.0), "500 -> 20 µs");
    }
}
