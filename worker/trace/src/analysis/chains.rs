//! Launch chains: the ops around a launch, outermost first, interned so
//! the op and kernel tables count calls by chain without copying names.

use super::links::{MemoIds, NO};
use super::{steps, Context};
use crate::import::store::{Sym, Tables};
use hashbrown::HashMap;

/// Interned op chains: id 0 is the empty chain; each id is (parent id, name).
pub(crate) struct Chains {
    ids: HashMap<(u32, Sym), u32>,
    nodes: Vec<(u32, Sym)>,
    /// Per CPU slice: its chain id once known, else [`NO`].
    of_op: MemoIds,
    /// Scratch: the slices walked up from an op.
    path: Vec<u32>,
}

/// Stands for any `ProfilerStep#N` in a chain.
const ANY_STEP: Sym = Sym::MAX;

impl Chains {
    /// Chains of a trace with `slices` CPU slices.
    pub fn new(slices: usize) -> Self {
        Chains {
            ids: HashMap::new(),
            nodes: vec![(0, 0)],
            of_op: MemoIds::new(slices),
            path: Vec::new(),
        }
    }

    /// The chain id of an op slice (memoized; walks up the op tree).
    pub fn of(&mut self, cx: &Context, op: u32) -> u32 {
        if self.of_op.get(op as usize) != NO {
            return self.of_op.get(op as usize);
        }
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        path.push(op);
        let mut base = 0u32;
        let mut p = cx.links.parent.get(op as usize);
        while p != NO {
            if self.of_op.get(p as usize) != NO {
                base = self.of_op.get(p as usize);
                break;
            }
            path.push(p);
            p = cx.links.parent.get(p as usize);
        }
        for &o in path.iter().rev() {
            let name = cx.t.cpu.name()[o as usize];
            let name = if steps::is_profiler_step(cx.t.name(name)) {
                ANY_STEP
            } else {
                name
            };
            let next = self.nodes.len() as u32;
            let id = *self.ids.entry((base, name)).or_insert(next);
            if id == next {
                self.nodes.push((base, name));
            }
            self.of_op.set(o as usize, id);
            base = id;
        }
        self.path = path;
        base
    }

    /// The names of a chain, outermost first (`ProfilerStep#*` for any step).
    pub fn names(&self, t: &Tables, mut id: u32) -> Vec<String> {
        let mut out = Vec::new();
        while id != 0 {
            let (parent, name) = self.nodes[id as usize];
            out.push(if name == ANY_STEP {
                "ProfilerStep#*".to_string()
            } else {
                t.name(name).to_string()
            });
            id = parent;
        }
        out.reverse();
        out
    }
}
