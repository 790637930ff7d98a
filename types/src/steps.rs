//! The slow-step rule, once: the findings (`slow_step`) and the app's steps
//! chart and table both ask it which steps are slow and against what.
//!
//! A step is slow when it takes at least [`SLOW_STEP_RATIO`] times the
//! median of the steps it is compared with: the steps of its own kind where
//! any step has a kind (a prefill beside prefills), else all steps. A group
//! of fewer than [`MIN_COMPARED`] steps compares nothing, and steps left out
//! of the statistics (a trailing step without GPU work) are never slow nor
//! counted in a median.

use crate::{StepKind, StepRow};

/// How many times its group's median a slow step takes.
pub const SLOW_STEP_RATIO: f64 = 1.5;
/// Fewest steps a median is taken over.
pub const MIN_COMPARED: usize = 3;

/// Percentile (0-100) of sorted values by linear interpolation: the one
/// median and p90 of the step statistics.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = (p / 100.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Per step: the median step time it is compared with, µs (`None`: left
/// out, or in a group too small to compare).
pub fn compared_medians(steps: &[StepRow]) -> Vec<Option<f64>> {
    let has_kinds = steps.iter().any(|s| !s.left_out && s.kind.is_some());
    let group = |s: &StepRow| -> Option<StepKind> {
        if has_kinds {
            s.kind
        } else {
            None
        }
    };
    let median_of = |kind: Option<StepKind>| -> Option<f64> {
        if has_kinds && kind.is_none() {
            return None;
        }
        let mut d: Vec<f64> = steps
            .iter()
            .filter(|s| !s.left_out && group(s) == kind)
            .map(StepRow::time)
            .collect();
        if d.len() < MIN_COMPARED {
            return None;
        }
        d.sort_by(f64::total_cmp);
        Some(percentile(&d, 50.0))
    };
    let mut medians: Vec<(Option<StepKind>, Option<f64>)> = Vec::new();
    steps
        .iter()
        .map(|s| {
            if s.left_out {
                return None;
            }
            let key = group(s);
            if let Some(m) = medians.iter().find(|m| m.0 == key) {
                return m.1;
            }
            let m = median_of(key);
            medians.push((key, m));
            m
        })
        .collect()
}

/// Per step: whether it is slow beside the steps it is compared with.
pub fn slow_steps(steps: &[StepRow]) -> Vec<bool> {
    steps
        .iter()
        .zip(compared_medians(steps))
        .map(|(s, m)| m.is_some_and(|m| m > 0.0 && s.time() >= SLOW_STEP_RATIO * m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(cpu_us: f64, kind: Option<StepKind>, left_out: bool) -> StepRow {
        StepRow {
            cpu_us,
            kind,
            left_out,
            ..Default::default()
        }
    }

    #[test]
    fn percentiles() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn slow_beside_its_own_kind_only() {
        let d = Some(StepKind::Decode);
        let p = Some(StepKind::Prefill);
        let steps = [
            step(50.0, p, false),
            step(10.0, d, false),
            step(11.0, d, false),
            step(10.5, d, false),
            step(30.0, d, false),
            step(0.1, d, true),
        ];
        assert_eq!(
            slow_steps(&steps),
            [false, false, false, false, true, false]
        );
        let m = compared_medians(&steps);
        assert_eq!(m[0], None, "one prefill compares with nothing");
        assert_eq!(m[1], Some(10.75));
        // Without kinds, all steps; fewer than three, none.
        let plain = [
            step(10.0, None, false),
            step(10.0, None, false),
            step(40.0, None, false),
        ];
        assert_eq!(slow_steps(&plain), [false, false, true]);
        assert_eq!(slow_steps(&plain[1..]), [false, false]);
    }
}
