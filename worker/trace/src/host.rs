//! What bounds a run's step (the GPU, the host, or waits on syncs), and
//! how the host's time changed between two runs: spread alike over its
//! ops (the host itself ran slower: another machine, its clock,
//! contention) or concentrated in one op. Pure: summaries in. The diff,
//! the regression gate and the cross-rank diffs read it.
//!
//! The limits, each with why:
//! - [`GPU_BOUND_BUSY_PCT`]: 80%. A step whose GPU is busy that much of
//!   the window has little host time left to hide: the story's baseline
//!   (the whole-pool cast) runs at 87-99% busy, its gather-then-cast patch
//!   at 11% (`tests/it/host.rs`, the shared 5x pair), and the findings'
//!   GPU-bound sync rule reads 85% (`findings.rs`); 80 leaves room for the
//!   gaps between graph replays.
//! - [`SYNC_BOUND_SHARE`]: half. A host that spends more than half its
//!   time blocked in synchronizing calls while the GPU idles is waiting,
//!   not working.
//! - [`UNIFORM_BAND`](kinetoscope_types::UNIFORM_BAND), ±15%, and
//!   [`UNIFORM_SHARE_PCT`], 60%: "most ops change by a similar factor over
//!   most of the host time" (the H200 pair whose host ran slower: `aten::mm`
//!   +39%, the attention op +17%, `cudaLaunchKernel` +12% around a median
//!   of +20%); a 1.25x host in `tests/it/host.rs` puts 100% within it.
//! - [`MIN_HOST_CHANGE_PCT`]: 5%. Below it the host did not change: the
//!   gate's own budgets start there.
//! - [`CONCENTRATED_SHARE`]: half. One op holding more than half of the
//!   host's growth is where it went.
//! - [`MIN_VOTE_SHARE`]: 0.5% of A's host time. Ops smaller than that vote
//!   on the median by too few microseconds to mean anything.

use crate::analysis::findings::is_blocking;
use crate::analysis::steps::is_profiler_step;
use kinetoscope_types::*;
use std::collections::HashMap;

/// GPU busy share from which a step is bound by the GPU, %.
pub const GPU_BOUND_BUSY_PCT: f64 = 80.0;
/// Share of the host's time in synchronizing calls from which a step is
/// bound by its waits.
pub const SYNC_BOUND_SHARE: f64 = 0.5;
/// Share of A's host time in ops that changed alike for the change to be
/// the host's, %.
pub const UNIFORM_SHARE_PCT: f64 = 60.0;
/// Least change of the host's time that is one, %.
pub const MIN_HOST_CHANGE_PCT: f64 = 5.0;
/// Share of the host's growth one op must hold to be where it went.
pub const CONCENTRATED_SHARE: f64 = 0.5;
/// Least share of A's host time an op must have to vote on the median.
pub const MIN_VOTE_SHARE: f64 = 0.005;

/// The op-table name a host row goes under: a step range's number folds.
pub(crate) fn host_name(name: &str) -> String {
    if is_profiler_step(name) {
        "ProfilerStep#*".to_string()
    } else {
        name.to_string()
    }
}

/// Steps a summary's times are divided by (1 without steps).
fn per(s: &Summary) -> f64 {
    (s.steps_stats.count as f64).max(1.0)
}

/// What bounds a run's step.
pub fn bound(s: &Summary) -> Bound {
    let n = per(s);
    let mut host = 0.0;
    let mut sync = 0.0;
    for o in s.ops.iter().filter(|o| o.kind != OpKind::Graph) {
        if is_wait(o) {
            sync += o.self_cpu_us;
        } else {
            host += o.self_cpu_us;
        }
    }
    let (host, sync) = (host / n, sync / n);
    let has_gpu = s.gpu_time.gpu_op_us > 0.0;
    let busy = s.gpu_time.busy_pct;
    let by = if has_gpu && busy >= GPU_BOUND_BUSY_PCT {
        StepBound::Gpu
    } else if has_gpu && sync > 0.0 && sync >= SYNC_BOUND_SHARE * (host + sync) {
        StepBound::Sync
    } else {
        StepBound::Host
    };
    Bound {
        by,
        gpu_busy_pct: busy,
        host_us: host,
        sync_us: sync,
        step_us: if s.steps_stats.count > 0 {
            s.steps_stats.mean_us
        } else {
            s.trace.span_us
        },
    }
}

/// CPU time that waits for the GPU rather than works: synchronizing calls,
/// and a launch's `Command Buffer Full` (blocked on a full queue).
fn is_wait(o: &OpRow) -> bool {
    (o.kind == OpKind::Runtime && is_blocking(&o.name)) || o.name == "Command Buffer Full"
}

/// Each op's self CPU time per step in A and B (step ranges folded into
/// `ProfilerStep#*`; graph replays left out, their launches are runtime
/// rows; waits left out, they are the GPU's time), ranked by the size of
/// the change.
pub fn host_rows(sa: &Summary, sb: &Summary) -> Vec<DeltaRow> {
    let of = |s: &Summary| {
        let n = per(s);
        let mut m: HashMap<String, (f64, f64)> = HashMap::new();
        for o in s
            .ops
            .iter()
            .filter(|o| o.kind != OpKind::Graph && !is_wait(o))
        {
            let e = m.entry(host_name(&o.name)).or_default();
            e.0 += o.self_cpu_us / n;
            e.1 += o.calls as f64 / n;
        }
        m
    };
    let (a, b) = (of(sa), of(sb));
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    let mut rows: Vec<DeltaRow> = names
        .into_iter()
        .map(|name| {
            let (au, ac) = a.get(name).copied().unwrap_or_default();
            let (bu, bc) = b.get(name).copied().unwrap_or_default();
            DeltaRow {
                name: name.clone(),
                a_us: au,
                b_us: bu,
                delta_us: bu - au,
                change_pct: crate::diff::change(au, bu),
                a_calls: ac,
                b_calls: bc,
                matched_by: match (a.contains_key(name), b.contains_key(name)) {
                    (true, true) => MatchedBy::Name,
                    (true, false) => MatchedBy::Removed,
                    _ => MatchedBy::Added,
                },
                ..Default::default()
            }
        })
        .filter(|r| r.a_us > 0.0 || r.b_us > 0.0)
        .collect();
    rows.sort_by(|x, y| {
        y.delta_us
            .abs()
            .total_cmp(&x.delta_us.abs())
            .then(x.name.cmp(&y.name))
    });
    rows
}

/// How the host's time changed, from the host rows and both sides' bounds.
pub fn host_change(rows: &[DeltaRow], a: &Bound, b: &Bound) -> HostChange {
    let a_total: f64 = rows.iter().map(|r| r.a_us).sum();
    // The median ratio, weighted by A's time, over the ops both runs have
    // that are large enough to vote.
    let mut votes: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.a_us > 0.0 && r.b_us > 0.0 && r.a_us >= MIN_VOTE_SHARE * a_total)
        .map(|r| (r.b_us / r.a_us, r.a_us))
        .collect();
    votes.sort_by(|x, y| x.0.total_cmp(&y.0));
    let weight: f64 = votes.iter().map(|v| v.1).sum();
    let mut acc = 0.0;
    let mut median = 1.0;
    for &(ratio, w) in &votes {
        acc += w;
        if acc >= weight / 2.0 {
            median = ratio;
            break;
        }
    }
    let alike: f64 = votes
        .iter()
        .filter(|(ratio, _)| (ratio / median - 1.0).abs() <= UNIFORM_BAND)
        .map(|v| v.1)
        .sum();
    let uniform_pct = if a_total > 0.0 {
        100.0 * alike / a_total
    } else {
        0.0
    };
    let change_pct = crate::diff::change(a.host_us, b.host_us);
    let uniform = uniform_pct >= UNIFORM_SHARE_PCT
        && (100.0 * (median - 1.0)).abs() >= MIN_HOST_CHANGE_PCT
        && change_pct.abs() >= MIN_HOST_CHANGE_PCT;
    let growth: f64 = rows.iter().map(|r| r.delta_us).sum();
    let concentrated_in = (!uniform && growth.abs() > 0.0)
        .then(|| {
            rows.iter()
                .filter(|r| r.delta_us.signum() == growth.signum())
                .max_by(|x, y| x.delta_us.abs().total_cmp(&y.delta_us.abs()))
                .filter(|r| r.delta_us.abs() >= CONCENTRATED_SHARE * growth.abs())
                .map(|r| r.name.clone())
        })
        .flatten();
    HostChange {
        a_us: a.host_us,
        b_us: b.host_us,
        change_pct,
        median_ratio: median,
        uniform_pct,
        uniform,
        concentrated_in,
    }
}

/// Whether B's step time rise is explained by a uniformly slower host: B
/// is bound by its host, and every op of it took alike longer.
pub fn slower_host(b: &Bound, h: &HostChange) -> bool {
    b.by == StepBound::Host && h.uniform && h.median_ratio > 1.0
}
