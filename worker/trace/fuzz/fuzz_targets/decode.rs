//! Format detection and decompression (plain, gzip, zstd) with the size
//! limits: arbitrary bytes end in a trace or a clear error, never a panic,
//! and a decompression bomb stops at the limit.
#![no_main]

use kinetoscope_trace::import::parse::Limits;
use kinetoscope_trace::{read_trace, sniff, ReadOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    let _ = kinetoscope_trace::import::head_needs_more(data);
    let opts = ReadOptions {
        limits: Limits {
            max_json_bytes: 1 << 20,
            max_depth: 64,
            max_value_bytes: 64 << 10,
        },
        progress: None,
    };
    if let Ok(t) = read_trace(data, &opts) {
        assert!(t.counters.events > 0);
    }
});
