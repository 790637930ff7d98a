//! The diff and the cross-rank summary of arbitrary summaries: two to eight
//! summaries as JSON (every field optional, as stored summaries of older
//! versions are), any numbers, any names.
#![no_main]

use kinetoscope_trace::diff::{diff, rank_deltas, rank_findings, Side};
use kinetoscope_trace::ranks::cross_rank;
use kinetoscope_types::Summary;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Summaries separated by a 0 byte.
    let summaries: Vec<Summary> = data
        .split(|&b| b == 0)
        .take(8)
        .filter_map(|part| serde_json::from_slice(part).ok())
        .collect();
    if summaries.len() < 2 {
        return;
    }
    let side = |k: usize| Side {
        id: "a",
        name: "run",
        summary: &summaries[k],
    };
    let d = diff(&side(0), &side(1));
    serde_json::to_vec(&d).expect("a diff serializes");
    let ranks: Vec<(i64, Summary)> = summaries
        .iter()
        .enumerate()
        .map(|(k, s)| (k as i64, s.clone()))
        .collect();
    let half = ranks.len() / 2;
    let (a, b) = (
        cross_rank(&ranks[..half.max(1)]),
        cross_rank(&ranks[half..]),
    );
    serde_json::to_vec(&a).expect("a cross-rank summary serializes");
    let _ = rank_findings(&a, &b, &rank_deltas(&a, &b));
    let _ = rank_deltas(&a, &b);
});
