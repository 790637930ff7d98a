//! What the fuzz targets share: the parser with the small limits they run
//! under.

use kinetoscope_trace::import::parse::{Limits, Parser};
use kinetoscope_trace::Trace;

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
