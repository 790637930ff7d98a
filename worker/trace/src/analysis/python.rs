//! Python frames (`python_function`, traces made with `with_stack=True`):
//! the model code above the ops.
//!
//! Frames nest by time on their thread, like ops. For a set of query points
//! (the start of each outermost op, each graph launch outside any op) this
//! finds the innermost frame around the point, and turns the frames above it
//! into a short, readable stack: innermost frames kept (they name the model
//! code), bounded depth, consecutive repeats folded.

use crate::import::store::{sort_by_start, Sym, Trace};
use hashbrown::HashMap;

use super::links::NO;

/// Frames kept per stack (the innermost ones).
pub const MAX_DEPTH: usize = 12;

/// The frame tree of a trace.
pub struct Frames {
    /// Per frame: the innermost frame around it on its thread, or [`NO`].
    parent: Vec<u32>,
    /// Per track: frame indices by start, longer first.
    by_track: HashMap<u32, Vec<u32>>,
}

impl Frames {
    /// Builds the frame tree (empty when the trace has no Python frames).
    pub fn new(t: &Trace) -> Frames {
        let py = &t.python;
        let mut by_track: HashMap<u32, Vec<u32>> = HashMap::new();
        for i in 0..py.len() {
            by_track.entry(py.track[i]).or_default().push(i as u32);
        }
        let mut parent = vec![NO; py.len()];
        let mut stack: Vec<u32> = Vec::new();
        for frames in by_track.values_mut() {
            // Start, then longer first, then row (pushed in row order).
            sort_by_start(frames, &py.ts, &py.dur, |_, _| std::cmp::Ordering::Equal);
            stack.clear();
            for &f in frames.iter() {
                let ts = py.ts.get(f as usize);
                while let Some(&top) = stack.last() {
                    let top = top as usize;
                    if ts < py.ts.get(top) + py.dur.get(top) || ts == py.ts.get(top) {
                        break;
                    }
                    stack.pop();
                }
                parent[f as usize] = stack.last().copied().unwrap_or(NO);
                stack.push(f);
            }
        }
        Frames { parent, by_track }
    }

    /// Whether the trace has Python frames.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// For each query `(track, ts)`: the innermost frame whose span holds
    /// `ts` on that track, or [`NO`].
    pub fn innermost(&self, t: &Trace, queries: &[(u32, i64)]) -> Vec<u32> {
        let mut out = vec![NO; queries.len()];
        if self.is_empty() {
            return out;
        }
        let py = &t.python;
        let mut order: Vec<u32> = (0..queries.len() as u32).collect();
        order.sort_by_key(|&q| queries[q as usize]);
        let mut k = 0;
        let mut stack: Vec<u32> = Vec::new();
        while k < order.len() {
            let track = queries[order[k] as usize].0;
            let frames = self.by_track.get(&track).map(Vec::as_slice).unwrap_or(&[]);
            let mut next = 0;
            stack.clear();
            while k < order.len() && queries[order[k] as usize].0 == track {
                let q = order[k] as usize;
                let ts = queries[q].1;
                while next < frames.len() && py.ts.get(frames[next] as usize) <= ts {
                    let f = frames[next] as usize;
                    while let Some(&top) = stack.last() {
                        let top = top as usize;
                        if py.ts.get(f) < py.ts.get(top) + py.dur.get(top)
                            || py.ts.get(f) == py.ts.get(top)
                        {
                            break;
                        }
                        stack.pop();
                    }
                    stack.push(frames[next]);
                    next += 1;
                }
                // The innermost open frame that still holds `ts`.
                out[q] = stack
                    .iter()
                    .rev()
                    .find(|&&f| {
                        let f = f as usize;
                        ts < py.ts.get(f) + py.dur.get(f) || ts == py.ts.get(f)
                    })
                    .copied()
                    .unwrap_or(NO);
                k += 1;
            }
        }
        out
    }

    /// The names of the frames from `frame` outwards, outermost first:
    /// the innermost [`MAX_DEPTH`] after folding consecutive repeats.
    pub fn stack(&self, t: &Trace, mut frame: u32) -> Vec<Sym> {
        let mut out: Vec<Sym> = Vec::new();
        let mut guard = 0;
        while frame != NO && out.len() < MAX_DEPTH && guard < 10_000 {
            let name = t.python.name[frame as usize];
            if out.last() != Some(&name) {
                out.push(name);
            }
            frame = self.parent[frame as usize];
            guard += 1;
        }
        out.reverse();
        out
    }

    /// The innermost frame from `frame` outwards that is model or engine
    /// code rather than torch's own machinery or a built-in.
    pub fn innermost_user(&self, t: &Trace, mut frame: u32) -> Option<Sym> {
        let first = (frame != NO).then(|| t.python.name[frame as usize]);
        let mut guard = 0;
        while frame != NO && guard < 10_000 {
            let sym = t.python.name[frame as usize];
            if is_user_frame(t.name(sym)) {
                return Some(sym);
            }
            frame = self.parent[frame as usize];
            guard += 1;
        }
        first
    }
}

/// A frame name without its install prefix: everything up to
/// `site-packages/` or `dist-packages/` is cut.
pub fn short_frame(name: &str) -> &str {
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(k) = name.rfind(marker) {
            return &name[k + marker.len()..];
        }
    }
    name
}

/// A frame of the user's or the engine's code: not torch's own Python, not
/// a built-in, not an `nn.Module` marker.
pub fn is_user_frame(name: &str) -> bool {
    !(name.starts_with('<')
        || name.starts_with("torch/")
        || name.contains("/torch/")
        || name.starts_with("nn.Module: ")
        || name.starts_with("threading.py")
        || name.contains("/contextlib.py"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_frames() {
        assert!(is_user_frame("vllm/compilation/backends.py(608): __call__"));
        assert!(!is_user_frame("torch/cuda/graphs.py(86): replay"));
        assert!(!is_user_frame("<built-in method replay of object at 0x7f>"));
        assert!(!is_user_frame(
            "/opt/conda/lib/python3.12/site-packages/torch/_ops.py(723): __call__"
        ));
        assert_eq!(
            short_frame("/opt/conda/lib/python3.12/site-packages/vllm/x.py(1): f"),
            "vllm/x.py(1): f"
        );
    }
}
