//! Python frames (`python_function`, traces made with `with_stack=True`):
//! the model code above the ops.
//!
//! Frames nest by time on their thread, like ops. For a set of query points
//! (the start of each outermost op, each graph launch outside any op) this
//! finds the innermost frame around the point, and turns the frames above it
//! into a short, readable stack: innermost frames kept (they name the model
//! code), bounded depth, consecutive repeats folded.

use crate::import::store::{sort_by_start, CpuKind, Sym, Tables};
use hashbrown::HashMap;

use super::links::{Links, NO};
use super::Context;

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
    pub fn new(t: &Tables) -> Frames {
        let py = &t.python;
        let mut by_track: HashMap<u32, Vec<u32>> = HashMap::new();
        for i in 0..py.len() {
            crate::cancel::point(i);
            by_track.entry(py.track()[i]).or_default().push(i as u32);
        }
        let mut parent = vec![NO; py.len()];
        let mut stack: Vec<u32> = Vec::new();
        for frames in by_track.values_mut() {
            // Start, then longer first, then row (pushed in row order).
            sort_by_start(frames, py.ts(), py.dur(), |_, _| std::cmp::Ordering::Equal);
            stack.clear();
            for &f in frames.iter() {
                let ts = py.ts().get(f as usize);
                while let Some(&top) = stack.last() {
                    let top = top as usize;
                    if ts < py.ts().get(top) + py.dur().get(top) || ts == py.ts().get(top) {
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
    pub fn innermost(&self, t: &Tables, queries: &[(u32, i64)]) -> Vec<u32> {
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
                while next < frames.len() && py.ts().get(frames[next] as usize) <= ts {
                    let f = frames[next] as usize;
                    while let Some(&top) = stack.last() {
                        let top = top as usize;
                        if py.ts().get(f) < py.ts().get(top) + py.dur().get(top)
                            || py.ts().get(f) == py.ts().get(top)
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
                        ts < py.ts().get(f) + py.dur().get(f) || ts == py.ts().get(f)
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
    pub fn stack(&self, t: &Tables, mut frame: u32) -> Vec<Sym> {
        let mut out: Vec<Sym> = Vec::new();
        let mut guard = 0;
        while frame != NO && out.len() < MAX_DEPTH && guard < 10_000 {
            let name = t.python.name()[frame as usize];
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
    pub fn innermost_user(&self, t: &Tables, mut frame: u32) -> Option<Sym> {
        let first = (frame != NO).then(|| t.python.name()[frame as usize]);
        let mut guard = 0;
        while frame != NO && guard < 10_000 {
            let sym = t.python.name()[frame as usize];
            if is_user_frame(t.name(sym)) {
                return Some(sym);
            }
            frame = self.parent[frame as usize];
            guard += 1;
        }
        first
    }
}

/// The Python stacks the tables read: each distinct stack once, and which
/// query slice (an outermost op, a graph launch outside any op) runs under
/// which. All empty when the trace has no Python frames.
#[derive(Default)]
pub(crate) struct Stacks {
    /// Per CPU slice: the outermost `cpu_op` around it or itself
    /// (annotations such as `ProfilerStep#N` are skipped), or [`NO`]. Empty
    /// when the trace has no Python frames: only read to find stacks.
    pub top_op: Vec<u32>,
    /// The stacks by id: id 0 is the empty stack.
    pub stacks: Vec<Vec<Sym>>,
    /// Stack id per query slice.
    pub stack_of: HashMap<u32, u32>,
    /// Per runtime call among the query slices: the innermost user frame
    /// above it, which names a graph replay launched outside any op.
    pub replay_frame: HashMap<u32, Sym>,
}

impl Stacks {
    /// Resolves the stacks above the outermost ops and above graph launches.
    pub fn resolve(t: &Tables, links: &Links, frames: &Frames) -> Stacks {
        let mut out = Stacks {
            stacks: vec![Vec::new()],
            ..Default::default()
        };
        if frames.is_empty() {
            return out;
        }
        let cpu = &t.cpu;
        out.top_op = outermost_ops(t, links);
        let mut slices: Vec<u32> = (0..cpu.len() as u32)
            .filter(|&i| out.top_op[i as usize] == i)
            .collect();
        for g in 0..t.gpu.len() {
            crate::cancel::point(g);
            let r = links.launch.get(g);
            if r != NO && (links.graph[g] || links.op.get(g) == NO) {
                slices.push(r);
            }
        }
        slices.sort_unstable();
        slices.dedup();
        let queries: Vec<(u32, i64)> = slices
            .iter()
            .map(|&i| (cpu.track().get(i as usize), cpu.ts().get(i as usize)))
            .collect();
        let inner = frames.innermost(t, &queries);
        let mut ids: HashMap<u32, u32> = HashMap::new();
        let mut by_names: HashMap<Vec<Sym>, u32> = HashMap::new();
        for (k, &slice) in slices.iter().enumerate() {
            let f = inner[k];
            if f == NO {
                continue;
            }
            let id = *ids.entry(f).or_insert_with(|| {
                let names = frames.stack(t, f);
                // Most frames' stacks are some earlier frame's (each layer
                // runs the same code): copied only when new.
                if let Some(&id) = by_names.get(&names) {
                    return id;
                }
                let next = out.stacks.len() as u32;
                out.stacks.push(names.clone());
                by_names.insert(names, next);
                next
            });
            out.stack_of.insert(slice, id);
            if cpu.kind()[slice as usize].is_runtime() {
                if let Some(sym) = frames.innermost_user(t, f) {
                    out.replay_frame.insert(slice, sym);
                }
            }
        }
        out
    }
}

/// Per CPU slice: the outermost `cpu_op` around it or itself, or [`NO`]
/// (parents come first in the preorder).
fn outermost_ops(t: &Tables, links: &Links) -> Vec<u32> {
    let mut top_op = vec![NO; t.cpu.len()];
    for o in links.preorder(t) {
        let o = o as usize;
        let p = links.parent.get(o);
        top_op[o] = if p != NO && top_op[p as usize] != NO {
            top_op[p as usize]
        } else if t.cpu.kind()[o] == CpuKind::Op {
            o as u32
        } else {
            NO
        };
    }
    top_op
}

impl Context<'_> {
    /// The Python stack id of the code that issued GPU op `g`: above the
    /// outermost op of its launch, or above a graph launch itself.
    pub fn py_stack_of_gpu(&self, g: usize) -> u32 {
        let s = &self.stacks;
        if s.stacks.len() <= 1 {
            return 0;
        }
        let r = self.links.launch.get(g);
        if r == NO {
            return 0;
        }
        if self.links.graph[g] {
            if let Some(&id) = s.stack_of.get(&r) {
                return id;
            }
        }
        let op = self.links.op.get(g);
        if op == NO {
            return s.stack_of.get(&r).copied().unwrap_or(0);
        }
        self.py_stack_of_op(op as usize)
    }

    /// The Python stack id above CPU slice `i`'s outermost op (0: none).
    pub fn py_stack_of_op(&self, i: usize) -> u32 {
        let top = self.stacks.top_op.get(i).copied().unwrap_or(NO);
        if top == NO {
            return 0;
        }
        self.stacks.stack_of.get(&top).copied().unwrap_or(0)
    }

    /// The Python stack (names) of an id, with install prefixes cut
    /// (`/opt/.../site-packages/vllm/x.py(1): f` -> `vllm/x.py(1): f`).
    pub fn py_names(&self, id: u32) -> Vec<String> {
        self.stacks.stacks[id as usize]
            .iter()
            .map(|&s| short_frame(self.t.name(s)).to_string())
            .collect()
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
