//! Counter tracks: the `ph: "C"` events (queue lengths, memory bandwidth,
//! CUPTI PM sampling's DRAM throughput and SM activity in a `GPU N
//! Counters` process) as series the timeline draws, at a bounded
//! resolution; and, where a series measures a GPU, its mean over each
//! kernel group's runs.

use super::resolution::keep_bucket_extremes;
use crate::import::store::{CounterSample, Tables};
use hashbrown::HashMap;
use kinetoscope_types::{CounterMean, CounterReport, CounterTrack, KernelRow};

/// Time buckets per series (each keeps its lowest and highest sample).
const BUCKETS: usize = 2000;
/// Counters kept per kernel.
const MEANS_PER_KERNEL: usize = 8;

/// The GPU a counter's process measures: Kineto's GPU processes are the
/// device's index (a small number), or a name with `GPU N` in it.
fn device_of(process: &str) -> Option<i64> {
    if let Ok(n) = process.parse::<i64>() {
        return (0..64).contains(&n).then_some(n);
    }
    let lower = process.to_ascii_lowercase();
    let at = lower.find("gpu")?;
    lower[at + 3..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|d| d.parse().ok())
}

/// The unit a counter's name says: a share (`pct`, `%`, `utilization`,
/// `active`) or bytes.
fn unit_of(name: &str, key: &str) -> Option<String> {
    let text = format!("{name} {key}").to_ascii_lowercase();
    if [
        "pct",
        "%",
        "percent",
        "utilization",
        "util",
        "active",
        "throughput",
    ]
    .iter()
    .any(|w| text.contains(w))
    {
        Some("%".into())
    } else if ["bytes", "memory"].iter().any(|w| text.contains(w)) {
        Some("bytes".into())
    } else {
        None
    }
}

/// Each series' samples in time order.
fn sorted(t: &Tables) -> Vec<Vec<CounterSample>> {
    let c = &t.counter_samples;
    let mut by: Vec<Vec<CounterSample>> = vec![Vec::new(); c.series.len()];
    for s in &c.samples {
        by[s.series as usize].push(*s);
    }
    for v in &mut by {
        v.sort_by_key(|s| s.ts);
    }
    by
}

/// The counters artifact, and each kernel's mean of its device's counters.
pub(crate) fn apply(t: &Tables, kernels: &mut [KernelRow]) -> CounterReport {
    let c = &t.counter_samples;
    if c.samples.is_empty() {
        return CounterReport::default();
    }
    let samples = sorted(t);
    // Several keys of one counter are told apart by their key.
    let mut keys_of: HashMap<(u32, &str), usize> = HashMap::new();
    for s in &c.series {
        *keys_of.entry((s.track, s.name.as_str())).or_default() += 1;
    }
    let mut tracks: Vec<(CounterTrack, usize)> = Vec::new();
    for (k, s) in c.series.iter().enumerate() {
        let v = &samples[k];
        if v.is_empty() {
            continue;
        }
        let track = &t.tracks[s.track as usize];
        let process = c
            .process_names
            .get(&track.pid)
            .cloned()
            .unwrap_or_else(|| t.track_id_text(track.pid));
        let label = if keys_of[&(s.track, s.name.as_str())] > 1 || s.name.is_empty() {
            format!("{}.{}", s.name, s.key)
                .trim_start_matches('.')
                .to_string()
        } else {
            s.name.clone()
        };
        let (min, max) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                (a.min(x.value), b.max(x.value))
            });
        let mean = v.iter().map(|x| x.value).sum::<f64>() / v.len() as f64;
        tracks.push((
            CounterTrack {
                label,
                name: s.name.clone(),
                key: s.key.clone(),
                device: device_of(&process),
                process,
                unit: unit_of(&s.name, &s.key),
                samples: v.len() as u64,
                min,
                max,
                mean,
                points: points(v),
            },
            k,
        ));
    }
    tracks.sort_by(|a, b| {
        (a.0.device, &a.0.process, &a.0.label).cmp(&(b.0.device, &b.0.process, &b.0.label))
    });
    kernel_means(t, kernels, &tracks, &samples);
    CounterReport {
        tracks: tracks.into_iter().map(|(t, _)| t).collect(),
    }
}

/// Each kernel group's (kernel and launch geometry) mean of every GPU
/// counter of its device over its runs (the samples inside each run).
fn kernel_means(
    t: &Tables,
    kernels: &mut [KernelRow],
    tracks: &[(CounterTrack, usize)],
    samples: &[Vec<CounterSample>],
) {
    let gpu_tracks: Vec<&(CounterTrack, usize)> =
        tracks.iter().filter(|(c, _)| c.device.is_some()).collect();
    if gpu_tracks.is_empty() {
        return;
    }
    type Geometry = (Option<[u32; 3]>, Option<[u32; 3]>);
    let mut group_of: HashMap<(String, Geometry), (usize, usize)> = HashMap::new();
    for (r, row) in kernels.iter().enumerate() {
        for (k, g) in row.groups.iter().enumerate() {
            group_of.insert((row.name.clone(), (g.grid, g.block)), (r, k));
        }
    }
    let geometry = |v: [u32; 3]| (v != [0, 0, 0]).then_some(v);
    // Per (row, group, counter track): sum and count of samples.
    let mut acc: HashMap<(usize, usize, usize), (f64, u64)> = HashMap::new();
    let g = &t.gpu;
    for i in 0..g.len() {
        crate::cancel::point(i);
        let key = (
            t.name(g.name()[i]).to_string(),
            (geometry(g.grid(i)), geometry(g.block(i))),
        );
        let Some(&(row, group)) = group_of.get(&key) else {
            continue;
        };
        let (start, end) = (g.ts().get(i), g.ts().get(i) + g.dur().get(i));
        let device = g.device().get(i);
        for (k, (track, series)) in gpu_tracks.iter().enumerate() {
            if track.device != Some(device) {
                continue;
            }
            let v = &samples[*series];
            let a = v.partition_point(|s| s.ts < start);
            let b = v.partition_point(|s| s.ts <= end);
            if b > a {
                let e = acc.entry((row, group, k)).or_default();
                e.0 += v[a..b].iter().map(|s| s.value).sum::<f64>();
                e.1 += (b - a) as u64;
            }
        }
    }
    let mut by_group: HashMap<(usize, usize), Vec<CounterMean>> = HashMap::new();
    for ((row, group, k), (sum, n)) in acc {
        let track = &gpu_tracks[k].0;
        by_group.entry((row, group)).or_default().push(CounterMean {
            counter: track.label.clone(),
            unit: track.unit.clone(),
            mean: sum / n as f64,
            samples: n,
        });
    }
    for ((row, group), mut means) in by_group {
        means.sort_by(|a, b| a.counter.cmp(&b.counter));
        means.truncate(MEANS_PER_KERNEL);
        kernels[row].groups[group].counters = means;
    }
}

/// A series at a bounded resolution: the first and last samples, and each
/// time bucket's lowest and highest, in time order.
fn points(v: &[CounterSample]) -> Vec<(i64, f64)> {
    if v.len() <= 2 * BUCKETS {
        return v.iter().map(|s| (s.ts, s.value)).collect();
    }
    let mut keep = vec![false; v.len()];
    keep_bucket_extremes(v.len(), BUCKETS, |k| v[k].ts, |k| v[k].value, &mut keep);
    v.iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(s, _)| (s.ts, s.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_units_from_names() {
        assert_eq!(device_of("0"), Some(0));
        assert_eq!(device_of("GPU 3 Counters"), Some(3));
        assert_eq!(device_of("12345"), None);
        assert_eq!(device_of("Host"), None);
        assert_eq!(unit_of("DRAM Throughput", "value").as_deref(), Some("%"));
        assert_eq!(
            unit_of(
                "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
                "value"
            )
            .as_deref(),
            Some("%")
        );
        assert_eq!(unit_of("queue", "length"), None);
    }

    #[test]
    fn a_million_samples_stay_bounded() {
        let v: Vec<CounterSample> = (0..1_000_000)
            .map(|k| CounterSample {
                series: 0,
                ts: k * 100,
                value: (k % 97) as f64,
            })
            .collect();
        let p = points(&v);
        assert!(p.len() <= 2 * BUCKETS + 4, "{}", p.len());
        assert_eq!(p[0].0, 0);
        assert_eq!(p.last().unwrap().0, 99_999_900);
        assert!(p.iter().any(|x| x.1 == 96.0));
    }
}
