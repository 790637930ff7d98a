//! The regression gate: whether run B (a patch) is slower than run A (the
//! baseline) by more than a budget. Step time is compared kind against
//! kind (decode against decode, by the median step of each kind), so a
//! patch run with an extra prefill is not judged by it; each op budget by
//! the op's time per step, measured as the diff measures it.
//!
//! Pure: two summaries and the budgets in, a [`Gate`] out. The CLI turns
//! the verdict into an exit status (0 pass, 1 fail, 2 incomparable).

use crate::diff::op_basis;
use kinetoscope_types::units::{change_pct, pct, time_us};
use kinetoscope_types::{Gate, GateCheck, GateVerdict, StepKind, Summary};

/// What B may cost more than A.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budgets {
    /// The most the median step (of each kind both runs have) may grow, %.
    pub step_pct: Option<f64>,
    /// Per op name, the most its time per step may grow, %.
    pub ops: Vec<(String, f64)>,
    /// Judge a step-time rise even when a uniformly slower host explains
    /// it (`--strict`); without it such a rise is not comparable (exit 2).
    pub strict: bool,
}

impl Budgets {
    /// Whether any budget is set.
    pub fn is_empty(&self) -> bool {
        self.step_pct.is_none() && self.ops.is_empty()
    }
}

/// Reads an op budget as written on the command line: `aten::copy_=10%`
/// (the `%` may be left out).
pub fn parse_op_budget(text: &str) -> Result<(String, f64), String> {
    let (name, pct) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("an op budget is NAME=PCT%, not {text:?}"))?;
    let name = name.trim();
    let pct = parse_pct(pct)?;
    if name.is_empty() {
        return Err(format!("an op budget needs an op name: {text:?}"));
    }
    Ok((name.to_string(), pct))
}

/// Reads a percentage: `5`, `5%`, `2.5 %`; 0 or more.
pub fn parse_pct(text: &str) -> Result<f64, String> {
    let t = text.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{text:?} is not a percentage (a number, 0 or more)"
        )),
    }
}

/// The median step of each kind, or of all steps where no step has a kind.
fn medians(s: &Summary) -> Vec<(Option<StepKind>, f64)> {
    let st = &s.steps_stats;
    if st.count == 0 {
        return Vec::new();
    }
    if st.by_kind.is_empty() {
        return vec![(None, st.p50_us)];
    }
    st.by_kind
        .iter()
        .map(|k| (Some(k.kind), k.p50_us))
        .collect()
}

/// The diff's change, except that something new in B (nothing in A) is an
/// infinite growth: no budget covers it.
fn change(a: f64, b: f64) -> f64 {
    if a == 0.0 && b > 0.0 {
        f64::INFINITY
    } else {
        crate::diff::change(a, b)
    }
}

/// Checks B against A within the budgets.
pub fn gate(a: &Summary, b: &Summary, budgets: &Budgets) -> Gate {
    let mut checks = Vec::new();
    let mut reasons = Vec::new();
    let mut incomparable = false;
    if let Some(budget) = budgets.step_pct {
        let (ma, mb) = (medians(a), medians(b));
        let common: Vec<_> = ma
            .iter()
            .filter_map(|(k, a_us)| {
                mb.iter()
                    .find(|(kb, _)| kb == k)
                    .map(|(_, b_us)| (*k, *a_us, *b_us))
            })
            .collect();
        if common.is_empty() {
            incomparable = true;
            reasons.push(match (ma.is_empty(), mb.is_empty()) {
                (true, _) => "cannot compare step time: A has no steps".to_string(),
                (_, true) => "cannot compare step time: B has no steps".to_string(),
                _ => "cannot compare step time: A and B have no step kind in common".to_string(),
            });
        }
        for (kind, a_us, b_us) in common {
            let what = match kind {
                Some(k) => format!("{k} step time (median)"),
                None => "step time (median)".to_string(),
            };
            let c = change(a_us, b_us);
            let ok = c <= budget;
            if !ok {
                reasons.push(format!(
                    "{what} {} ({} -> {}), over the {} budget",
                    change_pct(c),
                    time_us(a_us),
                    time_us(b_us),
                    pct(budget)
                ));
            }
            checks.push(GateCheck {
                what,
                a_us,
                b_us,
                change_pct: finite(c),
                budget_pct: budget,
                ok,
            });
        }
    }
    let basis = op_basis(a, b);
    let per_step = a.steps_stats.count > 0 && b.steps_stats.count > 0;
    let op_us = |s: &Summary, name: &str| -> Option<f64> {
        let n = if per_step {
            s.steps_stats.count as f64
        } else {
            1.0
        };
        let rows: Vec<_> = s.ops.iter().filter(|o| o.name == name).collect();
        (!rows.is_empty()).then(|| {
            rows.iter()
                .map(|o| basis.pick(o.self_device_us, o.self_cpu_us))
                .sum::<f64>()
                / n
        })
    };
    for (name, budget) in &budgets.ops {
        let (oa, ob) = (op_us(a, name), op_us(b, name));
        if oa.is_none() && ob.is_none() {
            incomparable = true;
            reasons.push(format!("no op {name} in either trace"));
            continue;
        }
        let (a_us, b_us) = (oa.unwrap_or(0.0), ob.unwrap_or(0.0));
        let c = change(a_us, b_us);
        let ok = c <= *budget;
        if !ok {
            reasons.push(format!(
                "{name} {} {}({} -> {}), over its {} budget",
                if c.is_finite() {
                    change_pct(c)
                } else {
                    "is new".to_string()
                },
                if per_step { "per step " } else { "" },
                time_us(a_us),
                time_us(b_us),
                pct(*budget)
            ));
        }
        checks.push(GateCheck {
            what: name.clone(),
            a_us,
            b_us,
            change_pct: finite(c),
            budget_pct: *budget,
            ok,
        });
    }
    // A step-time rise that a uniformly slower host explains (B bound by
    // its host, every host op alike slower) is not the patch's: not
    // comparable unless `--strict`. One concentrated in an op names it.
    let step_failed = checks
        .iter()
        .any(|c| !c.ok && !budgets.ops.iter().any(|(n, _)| *n == c.what));
    let ops_failed = checks
        .iter()
        .any(|c| !c.ok && budgets.ops.iter().any(|(n, _)| *n == c.what));
    if step_failed {
        let (ba, bb) = (crate::host::bound(a), crate::host::bound(b));
        let rows = crate::host::host_rows(a, b);
        let h = crate::host::host_change(&rows, &ba, &bb);
        if crate::host::slower_host(&bb, &h) {
            if !budgets.strict && !ops_failed {
                incomparable = true;
            }
            reasons.push(format!(
                "B's step is bound by its host, which ran uniformly slower: {} of A's host time is in ops that took {:.2}x their time (host time per step {}); another machine, its clock or contention, not the patch{}",
                pct(h.uniform_pct),
                h.median_ratio,
                change_pct(h.change_pct),
                if budgets.strict { "" } else { " (--strict judges it anyway)" }
            ));
        } else if let Some(op) = h
            .concentrated_in
            .filter(|_| h.change_pct >= crate::host::MIN_HOST_CHANGE_PCT)
        {
            let r = rows.iter().find(|r| r.name == op);
            reasons.push(format!(
                "the host's time per step grew {}, most of it in {op}{}",
                change_pct(h.change_pct),
                r.map(|r| format!(" ({} -> {})", time_us(r.a_us), time_us(r.b_us)))
                    .unwrap_or_default()
            ));
        }
    }
    let verdict = if incomparable {
        GateVerdict::Incomparable
    } else if checks.iter().all(|c| c.ok) {
        GateVerdict::Pass
    } else {
        GateVerdict::Fail
    };
    if verdict == GateVerdict::Pass {
        reasons.push(
            checks
                .iter()
                .map(|c| format!("{} {}", c.what, change_pct(c.change_pct)))
                .collect::<Vec<_>>()
                .join(", ")
                + ": within budget",
        );
    }
    Gate {
        verdict,
        checks,
        reasons,
    }
}

/// JSON has no infinity: an op new in B is written as a 1e9 % change.
fn finite(c: f64) -> f64 {
    if c.is_finite() {
        c
    } else {
        1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinetoscope_types::{OpKind, OpRow, StepKindStats};

    fn run(decode_p50: f64, prefill_p50: Option<f64>, copy_us: f64) -> Summary {
        let mut s = Summary::default();
        s.steps_stats.count = 10;
        s.steps_stats.p50_us = decode_p50;
        s.steps_stats.by_kind.push(StepKindStats {
            kind: StepKind::Decode,
            count: 9,
            p50_us: decode_p50,
            ..Default::default()
        });
        if let Some(p) = prefill_p50 {
            s.steps_stats.by_kind.push(StepKindStats {
                kind: StepKind::Prefill,
                count: 1,
                p50_us: p,
                ..Default::default()
            });
        }
        s.gpu_time.gpu_op_us = 1.0;
        s.ops.push(OpRow {
            name: "aten::copy_".into(),
            kind: OpKind::Op,
            self_device_us: copy_us * 10.0,
            ..Default::default()
        });
        s
    }

    #[test]
    fn kinds_are_compared_with_their_own_kind() {
        let step = |pct| Budgets {
            step_pct: Some(pct),
            ..Default::default()
        };
        // B adds a slow prefill; its decode steps are 3% slower.
        let (a, b) = (run(100.0, None, 50.0), run(103.0, Some(900.0), 50.0));
        let g = gate(&a, &b, &step(5.0));
        assert_eq!(g.verdict, GateVerdict::Pass, "{:?}", g.reasons);
        assert_eq!(g.checks.len(), 1);
        assert_eq!(gate(&a, &b, &step(2.0)).verdict, GateVerdict::Fail);
        // Faster is always within budget.
        assert_eq!(gate(&b, &a, &step(0.0)).verdict, GateVerdict::Pass);
        // No steps: nothing to compare.
        let g = gate(&Summary::default(), &b, &step(5.0));
        assert_eq!(g.verdict, GateVerdict::Incomparable);
        assert!(g.reasons[0].contains("A has no steps"), "{:?}", g.reasons);
    }

    #[test]
    fn op_budgets() {
        let (a, b) = (run(100.0, None, 50.0), run(100.0, None, 56.0));
        let ops = |name: &str, pct| Budgets {
            ops: vec![(name.to_string(), pct)],
            ..Default::default()
        };
        assert_eq!(
            gate(&a, &b, &ops("aten::copy_", 15.0)).verdict,
            GateVerdict::Pass
        );
        let g = gate(&a, &b, &ops("aten::copy_", 10.0));
        assert_eq!(g.verdict, GateVerdict::Fail);
        assert!(
            g.reasons[0].starts_with("aten::copy_ +12.0% per step"),
            "{:?}",
            g.reasons
        );
        assert_eq!(
            gate(&a, &b, &ops("aten::nope", 10.0)).verdict,
            GateVerdict::Incomparable
        );
        assert_eq!(
            parse_op_budget("aten::copy_=10%"),
            Ok(("aten::copy_".into(), 10.0))
        );
        assert_eq!(parse_op_budget("a=b=2.5"), Ok(("a=b".into(), 2.5)));
        assert!(parse_op_budget("aten::copy_").is_err());
        assert!(parse_op_budget("=5").is_err());
        assert!(parse_pct("-1").is_err());
    }
}
