//! CUDA/HIP graphs: how much of the device time graph replays run, what
//! runs eagerly beside them, and the host time between replays.

use super::steps::step_at;
use super::{names, pct, us, Context};
use crate::import::store::Sym;
use hashbrown::HashMap;
use kinetoscope_types::{GraphMode, GraphStats, NameTime};

/// How much of the device time graph replays run, and what runs between them.
pub(crate) fn stats(cx: &Context) -> GraphStats {
    let t = cx.t;
    let gpu = &t.gpu;
    let a = &cx.links.attribution;
    if a.graph_launches == 0 {
        return GraphStats {
            mode: GraphMode::Eager,
            eager_us: us(cx.gpu_op_ns),
            ..Default::default()
        };
    }
    let (mut graph_ns, mut eager_ns, mut unlaunched_ns) = (0i64, 0i64, 0i64);
    let mut eager: HashMap<Sym, i64> = HashMap::new();
    let mut launches: Vec<u32> = Vec::new();
    for g in 0..gpu.len() {
        crate::cancel::point(g);
        if !gpu.kind()[g].is_gpu_op() {
            continue;
        }
        if cx.links.graph[g] {
            graph_ns += gpu.dur().get(g);
            launches.push(cx.links.launch.get(g));
        } else if cx.links.launch.get(g) == super::links::NO {
            // Launched before the window opened (the end of a replay queued
            // in the step before): neither a replay's nor eager, as far as
            // the file tells.
            unlaunched_ns += gpu.dur().get(g);
        } else {
            eager_ns += gpu.dur().get(g);
            *eager.entry(gpu.name()[g]).or_default() += gpu.dur().get(g);
        }
    }
    // Host time between consecutive replays on a thread, within a step.
    launches.sort_unstable();
    launches.dedup();
    let cpu = &t.cpu;
    launches.sort_by_key(|&r| (cpu.track().get(r as usize), cpu.ts().get(r as usize)));
    let mut between = 0i64;
    for w in launches.windows(2) {
        let (x, y) = (w[0] as usize, w[1] as usize);
        if cpu.track().get(x) != cpu.track().get(y) {
            continue;
        }
        let same_step = match (
            step_at(&cx.steps, cpu.ts().get(x)),
            step_at(&cx.steps, cpu.ts().get(y)),
        ) {
            (Some(p), Some(q)) => p == q,
            (None, None) => cx.steps.is_empty(),
            _ => false,
        };
        if same_step {
            between += (cpu.ts().get(y) - (cpu.ts().get(x) + cpu.dur().get(x))).max(0);
        }
    }
    let mut top: Vec<(Sym, i64)> = eager.into_iter().collect();
    top.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let total = cx.gpu_op_ns.max(1) as f64;
    GraphStats {
        mode: if (eager_ns as f64) < 0.1 * total {
            GraphMode::Graph
        } else {
            GraphMode::Piecewise
        },
        replays: a.graph_launches,
        gpu_ops: a.graph_gpu_ops,
        device_us: us(graph_ns),
        pct: pct(graph_ns as f64, total),
        eager_us: us(eager_ns),
        unlaunched_us: us(unlaunched_ns),
        top_eager: top
            .into_iter()
            .take(3)
            .map(|(s, ns)| NameTime {
                name: names::short_name(t.name(s)),
                us: us(ns),
            })
            .collect(),
        host_between_us: us(between),
    }
}
