//! Who device time belongs to: the one rule every table charges GPU time
//! by. A GPU op's time is its launching op's (the innermost `cpu_op` around
//! the launch), or its graph replay's context when a graph launch ran it
//! (the op or annotation around the launch, else the Python code that
//! called it). A GPU op whose launch is missing or made outside any op is
//! counted as unattributed. Each GPU op has at most one owner: [`Owner`].

use super::links::{Links, RowIds, NO};
use super::steps::{StepCursor, StepSpan};
use super::{replay_row_name, us, Context};
use crate::import::store::{CpuKind, IntColumn, Sym, Tables};
use hashbrown::HashMap;
use kinetoscope_types::TimeBasis;

/// What a GPU op's device time is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Owner {
    /// The innermost `cpu_op` around its launch (by name).
    Op(Sym),
    /// The context of the graph replay that ran it (by name).
    Replay(Sym),
}

/// Per-slice sums only the op table reads: kept apart from [`Context`] so
/// they are freed as soon as that table is built (three `i64` per CPU slice
/// are the largest arrays of the analysis).
pub(crate) struct OpSums {
    /// Per CPU slice: device time of GPU ops it launched directly (graph
    /// replays excepted: they have rows of their own), ns.
    pub self_dev: IntColumn,
    /// Per CPU slice: device time of GPU ops launched in its subtree,
    /// graph replays included, ns.
    pub total_dev: IntColumn,
    /// Per CPU slice: time of its direct children (clamped to its span), ns.
    pub child_ns: IntColumn,
}

/// The device time pass's output.
pub(crate) struct DeviceTime {
    /// What the op table sums.
    pub sums: OpSums,
    /// Per GPU slice: the graph replay context it is attributed to, or [`NO`].
    pub replay: RowIds,
    /// Per GPU slice: index of the step its launch falls in, or [`NO`].
    pub gpu_step: RowIds,
    /// Total GPU-op time, ns.
    pub gpu_op_ns: i64,
    /// The time the tables rank by ([`TimeBasis::of`]).
    pub basis: TimeBasis,
}

/// Charges every GPU op's time to its owner and its step, and adds up each
/// op's own and subtree device time. Takes the op tree's child times
/// (nothing reads them again).
pub(crate) fn attribute(
    t: &Tables,
    links: &mut Links,
    steps: &[StepSpan],
    replay_frame: &HashMap<u32, Sym>,
) -> DeviceTime {
    let (cpu, gpu) = (&t.cpu, &t.gpu);
    let mut self_dev = IntColumn::zeros(cpu.len());
    // Graph replays first; each slice's own launches are added below.
    let mut total_dev = IntColumn::zeros(cpu.len());
    let mut replay = RowIds::new(gpu.len());
    let mut gpu_op_ns = 0i64;
    let a = &mut links.attribution;
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if !gpu.kind()[g].is_gpu_op() {
            continue;
        }
        let d = gpu.dur().get(g);
        gpu_op_ns += d;
        let r = links.launch.get(g);
        let op = links.op.get(g);
        if links.graph[g] {
            // A replay belongs to its context: the op or annotation around
            // the launch, else the Python code that called it.
            let ctx = if op != NO {
                total_dev.add(op as usize, d);
                cpu.name()[op as usize]
            } else {
                replay_frame.get(&r).copied().unwrap_or(NO)
            };
            replay.set(g, ctx);
            if ctx == NO {
                a.unattributed_us += d as f64 / 1e3;
            } else {
                a.graph_replay_us += d as f64 / 1e3;
            }
        } else if op != NO {
            self_dev.add(op as usize, d);
        } else if r != NO {
            a.unattributed_us += d as f64 / 1e3;
        }
    }
    let (gpu_step, basis) = steps_of(t, links, steps, gpu_op_ns);
    for (i, own) in self_dev.iter().enumerate() {
        if own != 0 {
            total_dev.add(i, own);
        }
    }
    for op in links.preorder(t).rev() {
        let p = links.parent.get(op as usize);
        let below = total_dev.get(op as usize);
        if p != NO && below != 0 {
            total_dev.add(p as usize, below);
        }
    }
    DeviceTime {
        sums: OpSums {
            self_dev,
            total_dev,
            child_ns: std::mem::take(&mut links.child_ns),
        },
        replay,
        gpu_step,
        gpu_op_ns,
        basis,
    }
}

/// Each GPU op's step (the step its launch falls in, or [`NO`]), and the
/// time the tables rank by, given the steps: [`attribute`] finds them with
/// the owners; a trace whose steps are its forward passes, found after the
/// owners, finds them again.
pub(crate) fn steps_of(
    t: &Tables,
    links: &Links,
    steps: &[StepSpan],
    gpu_op_ns: i64,
) -> (RowIds, TimeBasis) {
    let (cpu, gpu) = (&t.cpu, &t.gpu);
    let mut gpu_step = RowIds::new(gpu.len());
    // GPU-op time launched within steps: against the steps' time, whether
    // they are bound by the host.
    let mut step_gpu_ns = 0i64;
    let mut step = StepCursor::new(steps);
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        let r = links.launch.get(g);
        if r == NO || !gpu.kind()[g].is_gpu_op() {
            continue;
        }
        if let Some(s) = step.at(cpu.ts().get(r as usize)) {
            gpu_step.set(g, s as u32);
            step_gpu_ns += gpu.dur().get(g);
        }
    }
    let step_ns: i64 = steps.iter().map(|s| s.end - s.ts).sum();
    let basis = TimeBasis::of(us(gpu_op_ns), us(step_ns), us(step_gpu_ns));
    (gpu_step, basis)
}

impl Context<'_> {
    /// What GPU op `g`'s device time is charged to, or `None` when neither
    /// an op nor a replay context owns it.
    pub fn owner(&self, g: usize) -> Option<Owner> {
        if self.replay.get(g) != NO {
            return Some(Owner::Replay(self.replay.get(g)));
        }
        let mut op = self.links.op.get(g);
        while op != NO {
            if self.t.cpu.kind()[op as usize] == CpuKind::Op {
                return Some(Owner::Op(self.t.cpu.name()[op as usize]));
            }
            op = self.links.parent.get(op as usize);
        }
        None
    }

    /// The op-table name of an [`owner`](Self::owner).
    pub fn owner_name(&self, owner: Owner) -> String {
        match owner {
            Owner::Replay(ctx) => replay_row_name(self.t.name(ctx)),
            Owner::Op(op) => self.t.name(op).to_string(),
        }
    }
}
