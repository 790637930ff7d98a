//! Where GPU time went: busy versus idle over the window, by kernel
//! category, per stream.

use crate::import::store::Tables;
use hashbrown::HashMap;
use kinetoscope_types::{CategoryTime, GpuTime, KernelCategory, KernelRow, StreamTime};

/// A running union of intervals handed over in order of start.
#[derive(Clone, Copy, Default)]
struct Union {
    cur: Option<(i64, i64)>,
    total: i64,
}

impl Union {
    fn add(&mut self, a: i64, b: i64) {
        match self.cur {
            Some((s, e)) if a <= e => self.cur = Some((s, e.max(b))),
            Some((s, e)) => {
                self.total += e - s;
                self.cur = Some((a, b));
            }
            None => self.cur = Some((a, b)),
        }
    }

    fn total(&self) -> i64 {
        self.total + self.cur.map_or(0, |(s, e)| e - s)
    }
}

/// Length of the union of intervals, which must be sorted by start.
#[cfg(test)]
fn union_ns(intervals: impl Iterator<Item = (i64, i64)>) -> i64 {
    let mut u = Union::default();
    for (a, b) in intervals {
        u.add(a, b);
    }
    u.total()
}

/// How long the GPUs were busy: from the trace alone, so the job finds it
/// beside the op tree, and [`compute`] adds the kernel table's part.
pub struct Busy {
    /// Per stream, in (device, stream) order.
    streams: Vec<StreamTime>,
    /// Devices with GPU ops.
    devices: usize,
    /// The union of GPU-op intervals on each device, summed over devices.
    busy_ns: i64,
}

/// Finds how long each stream and device was busy.
pub fn busy(t: &Tables) -> Busy {
    let gpu = &t.gpu;
    // The GPU ops in order of start, once (the trace's own sort, a scan
    // when they already are: two comparison sorts on three columns took
    // 21 ms of the realistic trace's critical path), then one pass keeping
    // a running union per stream and per device: each one's ops arrive in
    // order of start.
    let mut idx: Vec<u32> = (0..gpu.len() as u32)
        .filter(|&g| gpu.kind()[g as usize].is_gpu_op())
        .collect();
    crate::import::store::sort_by_time(&mut idx, gpu.ts());
    let mut per_stream: HashMap<(i64, i64), (Union, u64)> = HashMap::new();
    let mut per_device: HashMap<i64, Union> = HashMap::new();
    for &g in &idx {
        let g = g as usize;
        let key = (gpu.device().get(g), gpu.stream().get(g));
        let (a, b) = (gpu.ts().get(g), gpu.ts().get(g) + gpu.dur().get(g));
        let stream = per_stream.entry(key).or_default();
        stream.0.add(a, b);
        stream.1 += 1;
        per_device.entry(key.0).or_default().add(a, b);
    }
    drop(idx);
    let mut streams: Vec<StreamTime> = per_stream
        .into_iter()
        .map(|((device, stream), (busy, ops))| StreamTime {
            device,
            stream,
            busy_us: busy.total() as f64 / 1e3,
            gpu_ops: ops,
        })
        .collect();
    streams.sort_by_key(|s| (s.device, s.stream));
    Busy {
        streams,
        devices: per_device.len(),
        busy_ns: per_device.values().map(Union::total).sum(),
    }
}

/// Computes the GPU time breakdown. `span_us` is the trace window; busy time
/// is the union of GPU-op intervals on each device, summed over devices, so
/// `busy_pct` is the mean busy share of the active devices. `left_out_us`
/// is the time of the GPU ops the kernel table leaves out: the GPU-op total
/// counts them (a share of it otherwise went past 100% on a trace of more
/// names than the table lists), the categories do not.
pub fn compute(busy: Busy, kernels: &[KernelRow], left_out_us: f64, span_us: f64) -> GpuTime {
    let Busy {
        streams,
        devices,
        busy_ns,
    } = busy;
    let gpu_op_us: f64 = kernels.iter().map(|r| r.total_us).sum::<f64>() + left_out_us;
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
        ..GpuTime::default()
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
