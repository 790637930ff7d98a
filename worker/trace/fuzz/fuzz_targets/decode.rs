//! Format detection and decompression (plain, gzip, zstd) with the size
//! limits: arbitrary bytes end in a trace or a clear error, never a panic,
//! and a decompression bomb stops at the limit.
#![no_main]

use kinetoscope_trace::{read_trace, sniff, ReadOptions};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    let _ = kinetoscope_trace::import::head_needs_more(data);
    let opts = ReadOptions {
        limits: common::limits(),
        progress: None,
        cancel: None,
    };
    if let Ok(t) = read_trace(data, &opts) {
        assert!(t.counters.events > 0);
    }
});
