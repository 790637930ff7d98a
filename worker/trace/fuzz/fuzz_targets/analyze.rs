//! Analysis of whatever the parser accepts: the summary, every artifact the
//! job stores (summary JSON, the timeline index written and read back), and
//! the invariants the tests hold on real traces.
#![no_main]

use kinetoscope_trace::import::parse::{Limits, Parser};
use kinetoscope_trace::timeline::TimelineIndex;
use kinetoscope_trace::{analyze_all, AnalysisOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = Parser::new(Limits {
        max_json_bytes: 1 << 20,
        max_depth: 64,
        max_value_bytes: 64 << 10,
    });
    if p.feed(data, true).is_err() {
        return;
    }
    let Ok(trace) = p.finish() else { return };
    let a = analyze_all(&trace, &AnalysisOptions::default());
    let json = serde_json::to_vec(&a.summary).expect("a summary serializes");
    let back: kinetoscope_types::Summary =
        serde_json::from_slice(&json).expect("a stored summary reads back");
    assert_eq!(back.ops.len(), a.summary.ops.len());
    let mut blob = Vec::new();
    a.timeline.write(&mut blob).expect("the index writes");
    let read = TimelineIndex::read(&blob[..]).expect("the index reads back");
    assert_eq!(read, a.timeline);
});
