//! The streaming parser fed arbitrary bytes split into arbitrary chunks, as
//! the decompressor hands them over: whatever it answers, it must not
//! panic, and the same bytes in one piece must give the same verdict.
#![no_main]

use kinetoscope_trace::import::parse::Parser;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn parse(data: &[u8], cuts: &[usize]) -> Result<u64, String> {
    let limits = common::limits();
    let mut p = Parser::new(limits);
    let mut pending: Vec<u8> = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        let cut = cut.clamp(at, data.len());
        pending.extend_from_slice(&data[at..cut]);
        at = cut;
        let eof = at == data.len();
        let used = p.feed(&pending, eof).map_err(|e| e.to_string())?;
        assert!(used <= pending.len(), "consumed more than it was given");
        pending.drain(..used);
        if eof {
            break;
        }
    }
    p.finish()
        .map(|t| t.counters.events)
        .map_err(|e| e.to_string())
}

/// Cut points from the last 8 bytes (so seeds stay plain JSON and the
/// fuzzer still steers the chunking): up to 8 cuts, a splitmix64 stream.
fn cuts_of(data: &[u8]) -> Vec<usize> {
    let mut tail = [0u8; 8];
    let n = data.len().min(8);
    tail[..n].copy_from_slice(&data[data.len() - n..]);
    let mut x = u64::from_le_bytes(tail);
    let mut cuts: Vec<usize> = (0..(x % 9))
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as usize % (data.len() + 1)
        })
        .collect();
    cuts.sort_unstable();
    cuts
}

fuzz_target!(|data: &[u8]| {
    let chunked = parse(data, &cuts_of(data));
    let whole = parse(data, &[]);
    // Chunk boundaries never change what was read.
    assert_eq!(chunked.is_ok(), whole.is_ok(), "{chunked:?} vs {whole:?}");
    if let (Ok(a), Ok(b)) = (&chunked, &whole) {
        assert_eq!(a, b);
    }
});
