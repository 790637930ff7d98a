//! The margin test: each limit of the pattern rules
//! (`kinetoscope_trace::analysis::limits`) moved down and then up by the
//! margin its table states, one at a time, and the real-capture family
//! (three seeds: every architecture and execution mode, `common/family.rs`),
//! the Hugging Face models (`tests/captures/hf/`), the six shared H200
//! captures and windows of generations cut inside their passes
//! (`family::UNMARKED_WINDOWS`) must still come out right: their
//! steps, step kinds, layers and layer kinds, casts per step, and no share
//! over 100%. The shared third-party traces (other models, engines and
//! GPUs, with no truth of their own) must keep the steps, step kinds,
//! layers and layer kinds the limits give them: a decision that flips when
//! a limit moves by its margin sat too close to it. A limit that sits close
//! to what some trace measures fails here, not on the next trace a user
//! uploads.
//!
//! A test binary of its own: [`limits::scale`] moves a limit for the whole
//! process, and no other test may run beside it.

#[path = "common/family.rs"]
mod family;

use kinetoscope_trace::analysis::limits::{self, LIMITS};

/// Every trace the limits are checked on, each parsed once, with what the
/// limits at their values decide on the third-party ones.
struct Corpus {
    family: Vec<family::Capture>,
    /// Hugging Face models (`tests/captures/hf/`).
    hf: Vec<family::Capture>,
    h200: Vec<family::Capture>,
    /// Windows of generations without step marks, cut inside passes.
    windows: Vec<family::Windowed>,
    others: Vec<family::Capture>,
    decided: Vec<String>,
}

impl Corpus {
    fn read() -> Corpus {
        let others = family::third_party();
        Corpus {
            family: family::names().iter().map(|n| family::read(n)).collect(),
            hf: family::names_in(&family::dir().join("hf"))
                .iter()
                .map(|n| family::read_from(&family::dir().join("hf"), n))
                .collect(),
            h200: family::H200.iter().map(|c| family::read_h200(c)).collect(),
            windows: family::unmarked_windows(),
            decided: others.iter().map(family::decided).collect(),
            others,
        }
    }

    /// What comes out wrong under the limits as they are now set.
    fn wrong(&self) -> Vec<String> {
        let mut bad = family::wrong(&self.family, false);
        bad.extend(family::wrong_in(
            &family::dir().join("hf"),
            &self.hf,
            family::KNOWN_HF,
        ));
        bad.extend(family::h200_wrong(&self.h200));
        bad.extend(family::windows_wrong(&self.windows));
        for (c, was) in self.others.iter().zip(&self.decided) {
            let now = family::decided(c);
            if now != *was {
                bad.push(format!("{}: {now}, where the limits give {was}", c.name));
            }
        }
        bad
    }
}

#[test]
fn every_limit_keeps_its_margin() {
    let corpus = Corpus::read();
    let at_the_limits = corpus.wrong();
    assert!(at_the_limits.is_empty(), "{}", at_the_limits.join("\n"));
    let mut bad = Vec::new();
    for e in &LIMITS {
        for factor in [1.0 - e.margin[0], 1.0 + e.margin[1]] {
            limits::scale(e.limit, factor);
            let moved = corpus.wrong();
            limits::scale(e.limit, 1.0);
            for w in moved {
                bad.push(format!(
                    "{:?} at {:.3} ({factor:.2}x): {w}",
                    e.limit,
                    e.value * factor
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// How far each limit really goes, both ways, before some capture comes
/// out wrong: how the table's margins were measured. Run by hand:
/// `cargo test -p kinetoscope-trace --test margins -- --ignored --nocapture`
/// (`KINETOSCOPE_LIMIT=StepCoverage` explores that limit alone).
#[test]
#[ignore]
fn how_far_each_limit_goes() {
    let corpus = Corpus::read();
    let only = std::env::var("KINETOSCOPE_LIMIT").ok();
    for e in LIMITS
        .iter()
        .filter(|e| only.as_ref().is_none_or(|l| *l == format!("{:?}", e.limit)))
    {
        for factor in [0.1, 0.25, 0.5, 0.67, 0.8, 1.2, 1.25, 1.5, 2.0, 3.0] {
            limits::scale(e.limit, factor);
            let moved = corpus.wrong();
            limits::scale(e.limit, 1.0);
            let first = moved
                .first()
                .map_or(String::new(), |w| w.chars().take(160).collect());
            println!(
                "{:?} {:.3} ({factor}x): {} wrong {first}",
                e.limit,
                e.value * factor,
                moved.len()
            );
        }
    }
}
