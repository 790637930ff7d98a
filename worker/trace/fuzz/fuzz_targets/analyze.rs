//! Analysis of whatever the parser accepts: the summary, every artifact the
//! job stores (summary JSON, the timeline index written and read back, and
//! as the job stores it: written as it is built), and the invariants the
//! tests hold on real traces.
//!
//! Plain JSON is read under the small fuzz limits; a gzip or zstd input is
//! read as an upload is, under `common::UPLOAD_JSON_BYTES`, so a small
//! compressed input can carry the hundreds of thousands of events that an
//! accidentally quadratic pass needs to pass the fuzz time limit (the
//! staircase seed, `seeds.py`).
#![no_main]

use kinetoscope_trace::timeline::TimelineIndex;
use kinetoscope_trace::{analyze_all, analyze_stored, AnalysisOptions};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some(trace) = common::read_upload(data) else {
        return;
    };
    let a = analyze_all(&trace, &AnalysisOptions::default());
    let json = serde_json::to_vec(&a.summary).expect("a summary serializes");
    let back: kinetoscope_types::Summary =
        serde_json::from_slice(&json).expect("a stored summary reads back");
    assert_eq!(back.ops.len(), a.summary.ops.len());
    let mut blob = Vec::new();
    a.timeline.write(&mut blob).expect("the index writes");
    let read = TimelineIndex::read(&blob[..]).expect("the index reads back");
    assert_eq!(read, a.timeline);
    // The job's path: the same summary, the same index.
    let again = common::read_upload(data).expect("a trace parses twice");
    let stored = analyze_stored(again, &AnalysisOptions::default()).expect("the index builds");
    assert_eq!(serde_json::to_vec(&stored.summary).expect("serializes"), stored.summary_json);
    let cut = stored.summary.trace.notes.iter().any(|n| n.contains("byte budget"));
    if cut {
        assert!(stored.summary_json.len() <= kinetoscope_trace::budget::SUMMARY_BYTES);
    } else {
        assert_eq!(stored.summary_json, json);
    }
    let read = TimelineIndex::read(
        stored
            .artifact(kinetoscope_types::ArtifactName::Timeline)
            .expect("the index is stored"),
    ).expect("the stored index reads back");
    assert_eq!(read, a.timeline);
});
