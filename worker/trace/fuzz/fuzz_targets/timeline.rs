//! Timeline queries: window, search, event lookups and alignment on the
//! index of whatever the parser accepts, with any arguments; and reading a
//! damaged stored index.
#![no_main]

use arbitrary::Arbitrary;
use kinetoscope_trace::diff::align;
use kinetoscope_trace::timeline::TimelineIndex;
use kinetoscope_trace::{analyze_all, AnalysisOptions};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

#[derive(Arbitrary, Debug)]
struct Query {
    track: u32,
    start: i64,
    end: i64,
    px: u16,
    needle: String,
    event: u32,
    anchor: String,
}

fuzz_target!(|data: &[u8]| {
    // The query from the last 64 bytes, so seeds stay plain JSON.
    let tail = &data[data.len().saturating_sub(64)..];
    let Ok(q) = Query::arbitrary(&mut arbitrary::Unstructured::new(tail)) else {
        return;
    };
    if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        // A stored index that is not one: an error, never a panic.
        let _ = TimelineIndex::read(data);
        return;
    }
    let Some(trace) = common::parse_whole(data) else {
        return;
    };
    let ix = analyze_all(&trace, &AnalysisOptions::default()).timeline;
    let px = u32::from(q.px) % 16385;
    for track in [q.track, 0, 1] {
        let w = ix.window(track, q.start, q.end, px);
        // At most one slice per pixel bucket per row.
        if let Some(t) = ix.tracks.get(track as usize) {
            let rows = t.rows as usize;
            assert!(
                w.len() <= (px.max(1) as usize + 1) * rows,
                "{} slices",
                w.len()
            );
            let whole = ix.window(track, ix.start_ns, ix.end_ns, px.max(1));
            assert!(whole.len() <= (px.max(1) as usize + 1) * rows);
        }
    }
    let _ = ix.search(&q.needle, px.max(1));
    if let Some(r) = ix.locate(q.event) {
        let _ = ix.event(r);
        let _ = ix.linked_to(q.event);
        let _ = ix.python_of(q.event);
        let _ = ix.details(q.event);
    }
    let _ = align(&ix, &ix, Some(&q.anchor));
});
