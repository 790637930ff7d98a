//! Profiler steps: `ProfilerStep#N` annotations, or the step annotations that
//! serving frameworks write when they drive the profiler themselves.

use crate::trace::store::{CpuKind, Sym, Trace};

/// What marks steps, in order of preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StepMarker {
    /// `ProfilerStep#N` (torch.profiler's schedule).
    ProfilerStep,
    /// SGLang's `step[EXTEND bs=.. toks=..]` / `step[DECODE ...]`.
    ServingStep,
    /// vLLM's `execute_<tokens>_context_<n>(...)_generation_<n>(...)`.
    Execute,
    /// vLLM's graph capture `capture_<batch>_<mode>`.
    Capture,
}

impl StepMarker {
    fn of(name: &str) -> Option<StepMarker> {
        if let Some(rest) = name.strip_prefix("ProfilerStep#") {
            return rest.parse::<i64>().is_ok().then_some(StepMarker::ProfilerStep);
        }
        if name.starts_with("step[") && name.ends_with(']') {
            return Some(StepMarker::ServingStep);
        }
        if name.starts_with("execute_") && (name.contains("context") || name.contains("generation")) {
            return Some(StepMarker::Execute);
        }
        if let Some(rest) = name.strip_prefix("capture_") {
            return rest.starts_with(|c: char| c.is_ascii_digit()).then_some(StepMarker::Capture);
        }
        None
    }

    /// The word stored in `steps_stats.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepMarker::ProfilerStep => "ProfilerStep",
            StepMarker::ServingStep => "step[...]",
            StepMarker::Execute => "execute_...",
            StepMarker::Capture => "capture_...",
        }
    }
}

/// One step's span.
#[derive(Clone, Copy, Debug)]
pub struct StepSpan {
    pub slice: u32,
    pub name: Sym,
    pub ts: i64,
    pub end: i64,
}

/// Finds the steps: slices of the most preferred marker kind present, not
/// nested in another step, in time order.
pub fn find_steps(t: &Trace) -> (Vec<StepSpan>, Option<StepMarker>) {
    let cpu = &t.cpu;
    // Classify each distinct name once.
    let mut class: Vec<u8> = vec![0; t.names.len()];
    let mut found: Vec<(StepMarker, u32)> = Vec::new();
    for i in 0..cpu.len() {
        if !matches!(cpu.kind[i], CpuKind::Annotation | CpuKind::Op) {
            continue;
        }
        let sym = cpu.name[i] as usize;
        if class[sym] == 0 {
            class[sym] = match StepMarker::of(t.name(sym as Sym)) {
                None => 1,
                Some(m) => 2 + m as u8,
            };
        }
        if class[sym] >= 2 {
            let marker = match class[sym] - 2 {
                0 => StepMarker::ProfilerStep,
                1 => StepMarker::ServingStep,
                2 => StepMarker::Execute,
                _ => StepMarker::Capture,
            };
            found.push((marker, i as u32));
        }
    }
    let Some(best) = found.iter().map(|f| f.0).min() else {
        return (Vec::new(), None);
    };
    let mut steps: Vec<StepSpan> = found
        .iter()
        .filter(|f| f.0 == best)
        .map(|&(_, i)| {
            let i = i as usize;
            StepSpan {
                slice: i as u32,
                name: cpu.name[i],
                ts: cpu.ts[i],
                end: cpu.ts[i] + cpu.dur[i],
            }
        })
        .collect();
    steps.sort_by_key(|s| (s.ts, std::cmp::Reverse(s.end)));
    let mut kept: Vec<StepSpan> = Vec::with_capacity(steps.len());
    for s in steps {
        match kept.last() {
            Some(prev) if s.ts < prev.end => {} // nested or overlapping: keep the outer
            _ => kept.push(s),
        }
    }
    (kept, Some(best))
}

/// Index of the step whose span holds `ts`, if any (steps sorted, disjoint).
pub fn step_at(steps: &[StepSpan], ts: i64) -> Option<usize> {
    let k = steps.partition_point(|s| s.ts <= ts);
    if k == 0 {
        return None;
    }
    let s = &steps[k - 1];
    (ts < s.end || (ts == s.ts)).then_some(k - 1)
}

/// The step number in a marker name (`ProfilerStep#12` -> 12).
pub fn step_number(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#").and_then(|n| n.parse().ok())
}

/// Percentile (0-100) of sorted values by linear interpolation.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        assert_eq!(StepMarker::of("ProfilerStep#5"), Some(StepMarker::ProfilerStep));
        assert_eq!(StepMarker::of("ProfilerStep#x"), None);
        assert_eq!(StepMarker::of("step[EXTEND bs=15 toks=15360]"), Some(StepMarker::ServingStep));
        assert_eq!(StepMarker::of("capture_32_FULL"), Some(StepMarker::Capture));
        assert_eq!(StepMarker::of("aten::mm"), None);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.5);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
    }
}
