//! Ranks: their order from file names, and the cross-rank summary of a
//! multi-rank run from each rank's summary.

use kinetoscope_types::units::{pct, time_us};
use kinetoscope_types::{
    Finding, FindingKind, FindingTab, RankOpShare, RankStats, RanksSummary, Summary,
};
use std::collections::HashMap;

/// A rank's file: its place among the ranks, from its name: the data,
/// pipeline and expert parallel indices, then the tensor parallel one
/// (missing ones are 0), then the name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RankKey([i64; 4], String);

/// Parses `…-TP-3-DP-1.trace.json.gz` or `rank3.….pt.trace.json.gz` into
/// the order of ranks (files of several ranks are sorted by it).
pub fn rank_key(file: &str) -> RankKey {
    let mut idx = [0i64; 4];
    let mut found = false;
    let toks: Vec<&str> = file.split(['-', '_', '.']).collect();
    for w in toks.windows(2) {
        let slot = match w[0] {
            "DP" => 0,
            "PP" => 1,
            "EP" => 2,
            "TP" => 3,
            _ => continue,
        };
        if let Ok(n) = w[1].parse::<i64>() {
            idx[slot] = n;
            found = true;
        }
    }
    if !found {
        let lower = file.to_ascii_lowercase();
        if let Some(k) = lower.find("rank") {
            let digits: String = lower[k + 4..]
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let Ok(n) = digits.parse() {
                idx[3] = n;
            }
        }
    }
    RankKey(idx, file.to_string())
}

/// The rank a trace file's name gives, and the name with its rank numbers
/// replaced by `*` (the same for every rank of one profiling cycle):
/// `1712-TP-3.trace.json.gz` is rank 3 of `1712-TP-*.trace.json.gz`, and
/// `step40.rank12.pt.trace.json` rank 12 of `step40.rank*.pt.trace.json`.
/// A name with data- and tensor-parallel indices (`-DP-1-TP-3`) is rank
/// `dp * 32 + tp` (tensor parallelism beyond 32 is unheard of). `None` for a
/// name without a rank, or one past 1023 (the most ranks of one run).
pub fn rank_in_name(file: &str) -> Option<(i64, String)> {
    let bytes = file.as_bytes();
    let mut pattern = String::with_capacity(file.len());
    let (mut dp, mut tp, mut other): (Option<i64>, Option<i64>, Option<i64>) = (None, None, None);
    let mut i = 0;
    while i < bytes.len() {
        // A marker at a word's start: `TP-3`, `DP_1`, `rank12`, `rank-2`.
        let at_word = i == 0 || matches!(bytes[i - 1], b'-' | b'_' | b'.' | b'/');
        let marker = ["TP", "DP", "PP", "EP", "rank", "RANK", "Rank"]
            .into_iter()
            .find(|m| at_word && file[i..].starts_with(m));
        if let Some(m) = marker {
            let mut j = i + m.len();
            if j < bytes.len() && matches!(bytes[j], b'-' | b'_') {
                j += 1;
            }
            let start = j;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            let ends_word = j == bytes.len() || matches!(bytes[j], b'-' | b'_' | b'.');
            if j > start && j - start <= 6 && ends_word {
                let n: i64 = file[start..j].parse().ok()?;
                match m {
                    "TP" => tp = Some(n),
                    "DP" => dp = Some(n),
                    _ => other = other.or(Some(n)),
                }
                pattern.push_str(&file[i..start]);
                pattern.push('*');
                i = j;
                continue;
            }
        }
        let c = file[i..].chars().next()?;
        pattern.push(c);
        i += c.len_utf8();
    }
    let rank = match (dp, tp, other) {
        (Some(d), Some(t), _) if t < 32 => d * 32 + t,
        (Some(_), Some(_), _) => return None,
        (None, Some(t), _) => t,
        (Some(d), None, _) => d,
        (None, None, Some(r)) => r,
        (None, None, None) => return None,
    };
    (0..1024).contains(&rank).then_some((rank, pattern))
}

/// How many ops the per-rank share table keeps.
const TOP_OPS: usize = 10;

use kinetoscope_types::stats::median;

/// Compares the ranks of one run: step time per rank, the straggler, the
/// share of the top ops on each rank, and collective time per rank.
pub fn cross_rank(ranks: &[(i64, Summary)]) -> RanksSummary {
    let stats: Vec<RankStats> = ranks
        .iter()
        .map(|(rank, s)| RankStats {
            rank: *rank,
            steps: s.steps_stats.count,
            mean_step_us: s.steps_stats.mean_us,
            p90_step_us: s.steps_stats.p90_us,
            step_us: s
                .steps
                .iter()
                .map(kinetoscope_types::StepRow::time)
                .collect(),
            span_us: s.trace.span_us,
            busy_pct: s.gpu_time.busy_pct,
            collective_us: s
                .gpu_time
                .by_category
                .iter()
                .filter(|c| c.category == kinetoscope_types::KernelCategory::Communication)
                .map(|c| c.us)
                .sum(),
            gpu_op_us: s.gpu_time.gpu_op_us,
            bound: Some(crate::host::bound(s)),
        })
        .collect();
    let use_steps = stats.iter().all(|r| r.steps > 0);
    let time_of = |r: &RankStats| if use_steps { r.mean_step_us } else { r.span_us };
    let med = median(stats.iter().map(time_of).collect());
    let slowest = stats
        .iter()
        .max_by(|a, b| time_of(a).total_cmp(&time_of(b)).then(b.rank.cmp(&a.rank)));
    let slowest_by_pct = slowest
        .map(|r| {
            if med > 0.0 {
                100.0 * (time_of(r) - med) / med
            } else {
                0.0
            }
        })
        .unwrap_or(0.0);

    // Top ops by self device time summed over ranks.
    let mut totals: HashMap<&str, f64> = HashMap::new();
    for (_, s) in ranks {
        for o in s.ops.iter().filter(|o| o.self_device_us > 0.0) {
            *totals.entry(o.name.as_str()).or_default() += o.self_device_us;
        }
    }
    let mut names: Vec<(&str, f64)> = totals.into_iter().collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    names.truncate(TOP_OPS);
    let top_ops = names
        .iter()
        .map(|(name, _)| {
            let (pct, us): (Vec<f64>, Vec<f64>) = ranks
                .iter()
                .map(|(_, s)| {
                    s.ops
                        .iter()
                        .find(|o| o.name == *name)
                        .map_or((0.0, 0.0), |o| (o.device_pct, o.self_device_us))
                })
                .unzip();
            RankOpShare {
                name: name.to_string(),
                pct,
                us,
            }
        })
        .collect();

    let mut findings = Vec::new();
    if let Some(r) = slowest.filter(|_| stats.len() > 1 && slowest_by_pct >= 1.0) {
        let what = if use_steps {
            "mean step"
        } else {
            "profiled window"
        };
        findings.push(Finding {
            kind: FindingKind::Straggler,
            text: format!(
                "Rank {} is the slowest of {} ranks: {} {}, {} above the median rank ({})",
                r.rank,
                stats.len(),
                what,
                time_us(time_of(r)),
                pct(slowest_by_pct),
                time_us(med)
            ),
            impact_pct: slowest_by_pct,
            tab: Some(FindingTab::Ranks),
            name: Some(r.rank.to_string()),
            cause: None,
        });
    }
    let coll: Vec<(i64, f64)> = stats
        .iter()
        .filter(|r| r.gpu_op_us > 0.0)
        .map(|r| (r.rank, 100.0 * r.collective_us / r.gpu_op_us))
        .collect();
    if let (Some(lo), Some(hi)) = (
        coll.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
        coll.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
    ) {
        if hi.1 >= 10.0 {
            findings.push(Finding {
                kind: FindingKind::Collectives,
                text: format!(
                    "Collectives take {} to {} of GPU time across ranks (least on rank {}, most on rank {}): ranks that wait in collectives are waiting for slower ranks",
                    pct(lo.1),
                    pct(hi.1),
                    lo.0,
                    hi.0
                ),
                impact_pct: hi.1 - lo.1,
                tab: Some(FindingTab::Ranks),
                name: None,
                cause: None,
            });
        }
    }
    findings.sort_by(|a, b| b.impact_pct.total_cmp(&a.impact_pct));
    RanksSummary {
        slowest_rank: slowest.map(|r| r.rank),
        slowest_by_pct,
        ranks: stats,
        top_ops,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_in_file_names() {
        assert_eq!(
            rank_in_name("1712.5-TP-3.trace.json.gz"),
            Some((3, "1712.5-TP-*.trace.json.gz".into()))
        );
        assert_eq!(
            rank_in_name("step40.rank12.pt.trace.json"),
            Some((12, "step40.rank*.pt.trace.json".into()))
        );
        assert_eq!(
            rank_in_name("x-DP-1-TP-3.trace.json.zst"),
            Some((35, "x-DP-*-TP-*.trace.json.zst".into()))
        );
        assert_eq!(rank_in_name("host_123.1712.pt.trace.json.gz"), None);
        assert_eq!(rank_in_name("ranking.json"), None);
        assert_eq!(rank_in_name("rank_2.json"), Some((2, "rank_*.json".into())));
        assert_eq!(rank_in_name("rank5000.json"), None);
    }

    #[test]
    fn ranks_sort_by_parallel_indices() {
        let mut files = [
            "1732-TP-10.trace.json.gz",
            "1732-TP-2.trace.json.gz",
            "1732-TP-1-DP-1.trace.json.gz",
            "1732-TP-0-DP-1.trace.json.gz",
        ];
        files.sort_by_key(|f| rank_key(f));
        assert_eq!(files[0], "1732-TP-2.trace.json.gz");
        assert_eq!(files[1], "1732-TP-10.trace.json.gz");
        assert_eq!(files[2], "1732-TP-0-DP-1.trace.json.gz");
        assert_eq!(rank_key("1732-TP-3-EXTEND.trace.json.gz").0, [0, 0, 0, 3]);
        assert_eq!(rank_key("rank7.1712.pt.trace.json.gz").0, [0, 0, 0, 7]);
    }
}
