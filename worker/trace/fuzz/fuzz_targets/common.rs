//! What the fuzz targets share: the parser with the small limits they run
//! under.

use kinetoscope_trace::import::parse::{Limits, Parser};
use kinetoscope_trace::{read_trace, sniff, Encoding, ReadOptions, Trace};

/// The limits every target parses under: small, so a run stays fast.
pub fn limits() -> Limits {
    Limits {
        max_json_bytes: 1 << 20,
        max_depth: 64,
        max_value_bytes: 64 << 10,
    }
}

/// The trace in `data` (one piece), when the parser accepts it.
#[allow(dead_code)]
pub fn parse_whole(data: &[u8]) -> Option<Trace> {
    let mut p = Parser::new(limits());
    p.feed(data, true).ok()?;
    p.finish().ok()
}

/// How much JSON a compressed input may expand to in the `analyze` target:
/// room for the staircase seed (`seeds.py`: 80,000 nested ops, 7 MB of
/// JSON from 70 KB of zstd), on which the old quadratic op fold took over
/// 14 s for the target's two analyses, past the 10 s `FUZZ_TIMEOUT`, where
/// the linear one takes about 4 s under ASan.
#[allow(dead_code)]
pub const UPLOAD_JSON_BYTES: u64 = 16 << 20;

/// The trace in `data` read as an upload is: a gzip or zstd input is
/// decompressed under `UPLOAD_JSON_BYTES`, plain JSON parsed in one piece
/// under the small limits.
#[allow(dead_code)]
pub fn read_upload(data: &[u8]) -> Option<Trace> {
    let compressed = matches!(sniff(data), Ok(Encoding::Gzip | Encoding::Zstd));
    if !compressed {
        return parse_whole(data);
    }
    let opts = ReadOptions {
        limits: Limits { max_json_bytes: UPLOAD_JSON_BYTES, ..limits() },
        progress: None,
        cancel: None,
    };
    read_trace(data, &opts).ok()
}
