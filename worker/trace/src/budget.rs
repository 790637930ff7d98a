//! Byte budgets of the stored artifacts: however an upload is made, the
//! summary, memory and counters artifacts the job stores (and so every
//! answer read from them: `/summary`, `/view`, `/ops`, `/memory`,
//! `/counters`, MCP) stay within a few megabytes.
//!
//! Names are cut at [`MAX_TEXT_BYTES`](crate::import::store::MAX_TEXT_BYTES)
//! when parsed, but their number is not bounded: 3,000 counter series with
//! 60 KB names (a 169 KB upload) made a 540 MB counters artifact, and 3,000
//! ops with distinct 60 KB names (94 KB) a 185 MB summary
//! (RELIABILITY.md). An artifact over its budget is cut, a level at a time,
//! until it fits: every string to at most so many bytes, every list to its
//! first so many items (the tables are ranked, so the first rows are the
//! ones that matter). The summary says what was cut in its notes. Real
//! traces never come near: the largest summary of `../shared/traces` is
//! 0.8 MB (`tracelens-mi300x-xdit-sd3.5-infer`, 62 MB of JSON), its memory
//! and counters artifacts smaller still (`tests/it/robustness.rs`,
//! `real_artifacts_are_far_below_their_budgets`).

use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

/// The summary's budget: ten times the largest real summary seen (0.8 MB).
pub const SUMMARY_BYTES: usize = 8 << 20;
/// The memory artifact's: its curves are at a bounded resolution
/// (`analysis/resolution.rs`), so only names and signatures grow it.
pub const MEMORY_BYTES: usize = 8 << 20;
/// The counters artifact's: "a few MB" for any upload (the bound),
/// no shared trace has counter tracks (`ph: "C"`), and the generated ones
/// take a few KB.
pub const COUNTERS_BYTES: usize = 4 << 20;

/// The levels of a cut, mildest first: (longest string kept in bytes, most
/// items a list keeps). The mildest keeps every real name whole (the
/// longest real names, templated kernels and Python frames, are about
/// 5 KB) and more rows than any real table has (2,107 distinct names in the
/// largest shared trace). No level cuts a string below 64 bytes (enum
/// words are shorter, so they read back) or a list below 4 items (the
/// contract's fixed arrays hold 3).
const LEVELS: [(usize, usize); 5] = [(8192, 4096), (1024, 1024), (256, 256), (128, 64), (64, 4)];

/// What a cut did, for the note that says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The artifact's bytes before the cut.
    pub bytes_before: usize,
    /// The longest string kept, bytes.
    pub text: usize,
    /// The most items a list kept.
    pub items: usize,
}

impl Cut {
    /// The note's words, for an artifact called `what`.
    pub fn words(&self, what: &str, budget: usize) -> String {
        format!(
            "The {what} was cut to its byte budget ({} MB; it would have been {:.1} MB): \
             text longer than {} bytes ends in …, and lists keep their first {} items. \
             The trace holds unusually many or long names.",
            budget >> 20,
            self.bytes_before as f64 / 1e6,
            self.text,
            self.items,
        )
    }
}

/// A value as it is stored: within its budget, its JSON, and the cut made.
pub struct Fitted<T> {
    /// The value the JSON reads back as.
    pub value: T,
    /// Its JSON, at most the budget (unless even the last level is over).
    pub json: Vec<u8>,
    /// The cut, when one was made.
    pub cut: Option<Cut>,
}

/// `value` within `budget` bytes of JSON, cut a level at a time until it
/// fits; `mark` writes the cut into the cut value (a note) before it is
/// measured.
pub fn fit<T: Serialize + DeserializeOwned>(
    value: T,
    budget: usize,
    mark: impl Fn(&mut Value, &Cut),
) -> serde_json::Result<Fitted<T>> {
    let json = serde_json::to_vec(&value)?;
    if json.len() <= budget {
        return Ok(Fitted {
            value,
            json,
            cut: None,
        });
    }
    let whole = serde_json::to_value(&value)?;
    drop(value);
    let bytes_before = json.len();
    drop(json);
    let mut last = None;
    for &(text, items) in &LEVELS {
        crate::cancel::check();
        let mut v = whole.clone();
        cut(&mut v, text, items);
        let c = Cut {
            bytes_before,
            text,
            items,
        };
        mark(&mut v, &c);
        let out = serde_json::to_vec(&v)?;
        let fits = out.len() <= budget;
        last = Some((v, out, c));
        if fits {
            break;
        }
    }
    let (v, json, c) = last.expect("at least one level");
    Ok(Fitted {
        value: serde_json::from_value(v)?,
        json,
        cut: Some(c),
    })
}

/// Cuts every string of `v` to at most `text` bytes (on a character
/// boundary, ending in `…`) and every list to its first `items` items.
fn cut(v: &mut Value, text: usize, items: usize) {
    match v {
        Value::String(s) if s.len() > text => {
            let mut end = text.saturating_sub('…'.len_utf8());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push('…');
        }
        Value::Array(a) => {
            a.truncate(items);
            for x in a {
                cut(x, text, items);
            }
        }
        Value::Object(o) => {
            for (_, x) in o.iter_mut() {
                cut(x, text, items);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_over_its_budget_is_cut_until_it_fits_and_reads_back() {
        let names: Vec<String> = (0..3_000)
            .map(|i| format!("{i}{}", "é".repeat(30_000)))
            .collect();
        let f = fit(names.clone(), 1 << 20, |_, _| {}).unwrap();
        let c = f.cut.unwrap();
        assert!(f.json.len() <= 1 << 20, "{}", f.json.len());
        assert!(c.bytes_before > 100 << 20);
        assert!(f.value.len() <= c.items);
        assert!(f
            .value
            .iter()
            .all(|s| s.len() <= c.text && s.ends_with('…')));
        assert!(f.value[0].starts_with('0'));
        // Within the budget: untouched.
        let f = fit(names[..2].to_vec(), 1 << 20, |_, _| panic!("no cut")).unwrap();
        assert!(f.cut.is_none());
        assert_eq!(f.value, names[..2]);
        assert_eq!(f.json, serde_json::to_vec(&names[..2]).unwrap());
    }
}
