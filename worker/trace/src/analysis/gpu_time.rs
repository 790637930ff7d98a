//! Where GPU time went: busy versus idle over the window, by kernel
//! category, per stream.

use crate::import::store::Tables;
use hashbrown::HashMap;
use kinetoscope_types::{CategoryTime, GpuTime, KernelCategory, KernelRow, StreamTime};

/// Length of the union of intervals, which must be sorted by start.
fn union_ns(intervals: impl Iterator<Item = (i64, i64)>) -> i64 {
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (a, b) in intervals {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((s, e)) = cur {
        total += e - s;
    }
    total
}

/// Computes the GPU time breakdown. `span_us` is the trace window; busy time
/// is the union of GPU-op intervals on each device, summed over devices, so
/// `busy_pct` is the mean busy share of the active devices.
pub fn compute(t: &Tables, kernels: &[KernelRow], span_us: f64) -> GpuTime {
    let gpu = &t.gpu;
    let mut idx: Vec<u32> = (0..gpu.len() as u32)
        .filter(|&g| gpu.kind()[g as usize].is_gpu_op())
        .collect();
    // Per stream.
    idx.sort_by_key(|&g| {
        let g = g as usize;
        (gpu.device().get(g), gpu.stream().get(g), gpu.ts().get(g))
    });
    let mut streams: Vec<StreamTime> = Vec::new();
    let mut k = 0;
    while k < idx.len() {
        let g0 = idx[k] as usize;
        let key = (gpu.device().get(g0), gpu.stream().get(g0));
        let mut j = k;
        while j < idx.len()
            && (
                gpu.device().get(idx[j] as usize),
                gpu.stream().get(idx[j] as usize),
            ) == key
        {
            j += 1;
        }
        let busy = union_ns(idx[k..j].iter().map(|&g| {
            let g = g as usize;
            (gpu.ts().get(g), gpu.ts().get(g) + gpu.dur().get(g))
        }));
        streams.push(StreamTime {
            device: key.0,
            stream: key.1,
            busy_us: busy as f64 / 1e3,
            gpu_ops: (j - k) as u64,
        });
        k = j;
    }
    // Per device.
    idx.sort_by_key(|&g| {
        let g = g as usize;
        (gpu.device().get(g), gpu.ts().get(g))
    });
    let mut busy_ns = 0i64;
    let mut devices = 0usize;
    let mut k = 0;
    while k < idx.len() {
        let dev = gpu.device().get(idx[k] as usize);
        let mut j = k;
        while j < idx.len() && gpu.device().get(idx[j] as usize) == dev {
            j += 1;
        }
        busy_ns += union_ns(idx[k..j].iter().map(|&g| {
            let g = g as usize;
            (gpu.ts().get(g), gpu.ts().get(g) + gpu.dur().get(g))
        }));
        devices += 1;
        k = j;
    }
    let gpu_op_us: f64 = kernels.iter().map(|r| r.total_us).sum();
    let mut by_cat: HashMap<KernelCategory, (f64, u64)> = HashMap::new();
    for r in kernels {
        let e = by_cat.entry(r.category).or_insert((0.0, 0));
        e.0 += r.total_us;
        e.1 += r.calls;
    }
    let mut by_category: Vec<CategoryTime> = by_cat
        .into_iter()
        .map(|(c, (us, calls))| CategoryTime {
            category: c,
            us,
            pct: if gpu_op_us > 0.0 {
                100.0 * us / gpu_op_us
            } else {
                0.0
            },
            calls,
        })
        .collect();
    by_category.sort_by(|a, b| {
        b.us.total_cmp(&a.us)
            .then(a.category.as_str().cmp(b.category.as_str()))
    });
    let busy_us = busy_ns as f64 / 1e3;
    let capacity = span_us * devices.max(1) as f64;
    GpuTime {
        span_us,
        busy_us,
        idle_us: if devices > 0 {
            (capacity - busy_us).max(0.0)
        } else {
            0.0
        },
        busy_pct: if devices > 0 && capacity > 0.0 {
            100.0 * busy_us / capacity
        } else {
            0.0
        },
        gpu_op_us,
        by_category,
        streams,
    }
}

#[cfg(test)]
mod tests {
    use super::union_ns;

    #[test]
    fn union_merges_overlaps_and_touching() {
        assert_eq!(
            union_ns([(0, 10), (5, 15), (15, 20), (30, 40)].into_iter()),
            30
        );
        assert_eq!(union_ns(std::iter::empty()), 0);
    }
}
