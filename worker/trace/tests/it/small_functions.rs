//! The analysis keeps small functions: none in `src/analysis/` runs over
//! [`MAX_LINES`] lines, signature to closing brace. A long pass is split
//! into named steps (`memory.rs`: `device_memory` -> `replay` and
//! `signature_rows`), so each reads on one screen and is tested alone.

use std::path::PathBuf;

/// The longest function the analysis keeps, in lines.
const MAX_LINES: usize = 150;

/// `fn` items (of any visibility) and their length in lines, found by
/// their indentation: rustfmt closes an item's body at its own indentation.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let rest = ["pub(crate) ", "pub(super) ", "pub ", "const ", "unsafe "]
            .iter()
            .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            let n = end + 2;
            if n > MAX_LINES {
                out.push((name, n));
            }
        }
    }
    out
}

#[test]
fn no_analysis_function_runs_over_150_lines() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/analysis");
    let mut long = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for (name, n) in long_functions(&text) {
                long.push(format!("{}: {name} ({n} lines)", path.display()));
            }
        }
    }
    assert!(files > 10, "read {files} files of {}", dir.display());
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines: {long:#?}"
    );
}

#[test]
fn the_measure_finds_a_long_function() {
    let body = "    let x = 1;\n".repeat(MAX_LINES);
    let text = format!("pub(crate) fn long(a: u32) -> u32 {{\n{body}}}\nfn short() {{\n}}\n");
    assert_eq!(
        long_functions(&text),
        vec![("long".to_string(), MAX_LINES + 2)]
    );
}
