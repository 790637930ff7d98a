//! What bounds each side of a diff, and the host's change (issue 42): the
//! shared H200 pair of the founding story, and pairs made from it whose
//! host ran uniformly slower, or slower in one op.

use kinetoscope_trace::diff::{diff, Side};
use kinetoscope_trace::gate::{gate, Budgets};
use kinetoscope_trace::import::{read_trace_file, ReadOptions};
use kinetoscope_trace::{analyze, AnalysisOptions};
use kinetoscope_types::{GateVerdict, OpKind, StepBound, Summary};
use std::path::PathBuf;

fn summary(name: &str) -> Summary {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces")
        .join(name);
    analyze(
        &read_trace_file(&p, &ReadOptions::default()).unwrap(),
        &AnalysisOptions::default(),
    )
}

fn side<'a>(name: &'a str, s: &'a Summary) -> Side<'a> {
    Side {
        id: name,
        name,
        summary: s,
    }
}

/// `s` as if its host had taken `factor` times as long: every op's CPU
/// time (or only `only`'s, by the same added time per step), and the
/// steps, which a host-bound step follows.
fn slower(s: &Summary, factor: f64, only: Option<&str>) -> Summary {
    let mut s = s.clone();
    let n = s.steps_stats.count.max(1) as f64;
    let host: f64 = s
        .ops
        .iter()
        .filter(|o| o.kind != OpKind::Graph)
        .map(|o| o.self_cpu_us)
        .sum::<f64>();
    let added = host * (factor - 1.0);
    for o in s.ops.iter_mut().filter(|o| o.kind != OpKind::Graph) {
        match only {
            None => {
                o.self_cpu_us *= factor;
                o.cpu_total_us *= factor;
            }
            Some(name) if o.name == name => {
                o.self_cpu_us += added;
                o.cpu_total_us += added;
            }
            Some(_) => {}
        }
    }
    let step_added = added / n;
    let grow = |us: &mut f64| *us += step_added;
    for r in &mut s.steps {
        grow(&mut r.cpu_us);
        grow(&mut r.time_us);
        grow(&mut r.wall_us);
    }
    let st = &mut s.steps_stats;
    for v in [
        &mut st.mean_us,
        &mut st.p50_us,
        &mut st.p90_us,
        &mut st.min_us,
        &mut st.max_us,
    ] {
        grow(v);
    }
    for k in &mut st.by_kind {
        grow(&mut k.mean_us);
        grow(&mut k.p50_us);
    }
    s
}

/// The shared pair: the whole-pool cast against gather-then-cast, 78
/// layers on an H200. The step improves, the cast leads the findings, A is
/// bound by its GPU, B by its host, and a sentence says what B's host
/// time is made of.
#[test]
fn the_story_pair_says_what_bounds_each_side() {
    let a = summary("torch-h200-decode-fp8cast-78l-5xpool.json.gz");
    let b = summary("torch-h200-decode-gathercast-78l-5xpool.json.gz");
    let d = diff(&side("a", &a), &side("b", &b));
    assert!(d.steps.change_pct < -50.0, "{}", d.steps.change_pct);
    assert_eq!(d.a.bound.as_ref().unwrap().by, StepBound::Gpu);
    assert_eq!(d.b.bound.as_ref().unwrap().by, StepBound::Host);
    let texts: Vec<&str> = d.findings.iter().map(|f| f.text.as_str()).collect();
    assert!(
        texts[1].starts_with("aten::copy_ (Float8_e4m3fn -> BFloat16)"),
        "{texts:#?}"
    );
    let host = texts
        .iter()
        .find(|t| t.starts_with("B's step is bound by its host"))
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(host.contains("aten::_cudnn_attention_forward"), "{host}");
    assert!(!d.host_ops.is_empty());
    eprintln!("{:?}", d.host);
}

/// B's host took 1.25x as long in every op: the diff says the host ran
/// slower, not the patch, and the gate answers "not comparable" (exit 2)
/// unless strict.
#[test]
fn a_uniformly_slower_host_is_not_the_patch() {
    let a = summary("torch-h200-decode-gathercast-78l-5xpool.json.gz");
    let b = slower(&a, 1.25, None);
    let d = diff(&side("a", &a), &side("b", &b));
    let h = d.host.as_ref().unwrap();
    assert!(h.uniform, "{h:?}");
    assert!((h.median_ratio - 1.25).abs() < 0.01, "{h:?}");
    assert!(
        d.findings
            .iter()
            .any(|f| f.text.contains("the host itself ran slower")),
        "{:#?}",
        d.findings
    );
    let budgets = Budgets {
        step_pct: Some(5.0),
        ..Default::default()
    };
    let g = gate(&a, &b, &budgets);
    assert_eq!(g.verdict, GateVerdict::Incomparable, "{:?}", g.reasons);
    assert!(
        g.reasons.iter().any(|r| r.contains("ran uniformly slower")),
        "{:?}",
        g.reasons
    );
    let strict = Budgets {
        strict: true,
        ..budgets
    };
    assert_eq!(gate(&a, &b, &strict).verdict, GateVerdict::Fail);
}

/// One op's CPU time grew (by a quarter of the host's time): still a
/// regression, and its reason names that op.
#[test]
fn a_concentrated_host_rise_is_a_regression_that_names_its_op() {
    let a = summary("torch-h200-decode-gathercast-78l-5xpool.json.gz");
    let op = "aten::mm";
    let b = slower(&a, 1.25, Some(op));
    let d = diff(&side("a", &a), &side("b", &b));
    let h = d.host.as_ref().unwrap();
    assert!(!h.uniform, "{h:?}");
    assert_eq!(h.concentrated_in.as_deref(), Some(op), "{h:?}");
    let g = gate(
        &a,
        &b,
        &Budgets {
            step_pct: Some(5.0),
            ..Default::default()
        },
    );
    assert_eq!(g.verdict, GateVerdict::Fail, "{:?}", g.reasons);
    assert!(g.reasons.iter().any(|r| r.contains(op)), "{:?}", g.reasons);
}

/// Eight ranks of a real job (the shared DLRM ranks): every rank's bound
/// is stored in the cross-rank summary, and the rank diff tells a host
/// slower on every rank alike from one rank's host slower than the rest.
#[test]
fn the_rank_diff_says_what_bounds_each_rank_and_where_the_host_changed() {
    use kinetoscope_trace::diff::{rank_deltas, rank_findings};
    use kinetoscope_trace::ranks::cross_rank;
    let ranks: Vec<(i64, Summary)> = (0..8)
        .map(|r| {
            (
                r,
                summary(&format!("param-dlrm-v100-8rank-rank{r}.json.gz")),
            )
        })
        .collect();
    let a = cross_rank(&ranks);
    assert!(a.ranks.iter().all(|r| r.bound.is_some()));

    // Every rank's host 1.3x: alike.
    let slow: Vec<(i64, Summary)> = ranks
        .iter()
        .map(|(r, s)| (*r, slower(s, 1.3, None)))
        .collect();
    let b = cross_rank(&slow);
    let d = rank_deltas(&a, &b);
    assert_eq!(d.len(), 8);
    for r in &d {
        let c = r.host_change_pct.unwrap();
        assert!((c - 30.0).abs() < 1.0, "rank {}: {c}", r.rank);
    }
    let texts: Vec<String> = rank_findings(&a, &b, &d)
        .into_iter()
        .map(|f| f.text)
        .collect();
    assert!(
        texts.iter().any(|t| t.starts_with("ranks of A: ")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("every rank's host time changed alike")),
        "{texts:?}"
    );

    // Only rank 5's host 1.4x: that rank is named.
    let one: Vec<(i64, Summary)> = ranks
        .iter()
        .map(|(r, s)| {
            (
                *r,
                if *r == 5 {
                    slower(s, 1.4, None)
                } else {
                    s.clone()
                },
            )
        })
        .collect();
    let b = cross_rank(&one);
    let texts: Vec<String> = rank_findings(&a, &b, &rank_deltas(&a, &b))
        .into_iter()
        .map(|f| f.text)
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("rank 5's host time changed +40.0%")),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("changed alike")),
        "{texts:?}"
    );
}

/// Two captures of one workload at different step numbers (a profiler
/// schedule that started later): the diff's op rows fold the steps into
/// `ProfilerStep#*`, as its host rows and torch do, rather than listing
/// every step as removed and added. A CPU capture: its op rows are by
/// self CPU time, which a step's own range has.
#[test]
fn captures_of_other_step_numbers_diff_as_one_step_row() {
    let a = summary("torch-cpu-decode-fp8cast-3dense-moe.json.gz");
    let mut b = a.clone();
    for o in &mut b.ops {
        if let Some(n) = o.name.strip_prefix("ProfilerStep#") {
            o.name = format!("ProfilerStep#{}", n.parse::<u64>().unwrap() + 100);
        }
    }
    assert!(b.ops.iter().any(|o| o.name == "ProfilerStep#101"));
    let d = diff(&side("a", &a), &side("b", &b));
    let step_rows: Vec<&str> = d
        .ops
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| n.starts_with("ProfilerStep"))
        .collect();
    assert_eq!(step_rows, ["ProfilerStep#*"], "{step_rows:?}");
    let row = d.ops.iter().find(|r| r.name == "ProfilerStep#*").unwrap();
    assert!((row.a_us - row.b_us).abs() < 1e-9 && row.a_us > 0.0);
    assert!(
        !d.added_ops
            .iter()
            .chain(&d.removed_ops)
            .any(|n| n.starts_with("ProfilerStep")),
        "{:?} {:?}",
        d.added_ops,
        d.removed_ops
    );
}
