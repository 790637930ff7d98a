//! Summaries and run listings stored before the JSON contract was typed
//! (written by the build just before it: `kinetoscope analyze --json` on
//! shared and generated traces, and `GET /api/runs`, `GET /api/runs/{id}` of
//! a server with uploaded, multi-rank, zstd and failed runs) read back into
//! the typed contract and serialize byte-for-byte the same.

use kinetoscope_types::{RunInfo, RunList, Summary};
use std::io::Read;
use std::path::PathBuf;

fn fixtures(prefix: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stored");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with(prefix) {
            continue;
        }
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        out.push((name, text.trim_end().to_string()));
    }
    out.sort();
    assert!(!out.is_empty(), "no {prefix} fixtures in {}", dir.display());
    out
}

#[test]
fn stored_summaries_read_back_byte_for_byte() {
    let all = fixtures("summary-");
    assert!(all.len() >= 9);
    for (name, text) in all {
        let s: Summary = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serde_json::to_string(&s).unwrap(), text, "{name}");
    }
}

#[test]
fn stored_run_listings_read_back_byte_for_byte() {
    for (name, text) in fixtures("run-") {
        let r: RunInfo = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(serde_json::to_string(&r).unwrap(), text, "{name}");
    }
    let (name, text) = &fixtures("runlist")[0];
    let l: RunList = serde_json::from_str(text).unwrap();
    assert_eq!(&serde_json::to_string(&l).unwrap(), text, "{name}");
    let statuses: Vec<&str> = l.runs.iter().map(|r| r.status.as_str()).collect();
    assert!(
        statuses.contains(&"done") && statuses.contains(&"failed"),
        "{statuses:?}"
    );
}
