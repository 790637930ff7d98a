//! Pure logic of the timeline view: the time axis, zoom and pan, what to
//! fetch at which resolution, colours. No DOM here, so it is unit-tested.

use kinetoscope_types::stats::Change;

/// Width of the label gutter on the left of the canvas, px.
pub const GUTTER: f64 = 170.0;
/// Height of one row of slices, px.
pub const ROW_H: f64 = 16.0;
/// Height of the ruler, the steps band and the layers band, px.
pub const RULER_H: f64 = 22.0;
/// Height of a band (steps, layers) and of the search density strip, px.
pub const BAND_H: f64 = 14.0;
/// Height of a track's header line, px.
pub const HEADER_H: f64 = 14.0;
/// Shortest view, ns: a single 2 µs kernel must still fill the screen.
pub const MIN_SPAN_NS: f64 = 200.0;

/// The visible time span, ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    /// Left edge, ns.
    pub start: f64,
    /// Right edge, ns.
    pub end: f64,
}

impl View {
    /// The span, ns.
    pub fn span(&self) -> f64 {
        (self.end - self.start).max(1.0)
    }

    /// Zooms by `factor` (< 1 zooms in) around time `at`, kept within
    /// `[lo, hi]` and never narrower than [`MIN_SPAN_NS`].
    pub fn zoom(&self, factor: f64, at: f64, lo: f64, hi: f64) -> View {
        let span = (self.span() * factor).clamp(MIN_SPAN_NS, (hi - lo).max(MIN_SPAN_NS));
        let frac = ((at - self.start) / self.span()).clamp(0.0, 1.0);
        let start = at - frac * span;
        View {
            start,
            end: start + span,
        }
        .clamped(lo, hi)
    }

    /// Moves by `dt` ns, kept within `[lo, hi]`.
    pub fn pan(&self, dt: f64, lo: f64, hi: f64) -> View {
        View {
            start: self.start + dt,
            end: self.end + dt,
        }
        .clamped(lo, hi)
    }

    /// The same span moved inside `[lo, hi]` (or the whole of it).
    pub fn clamped(&self, lo: f64, hi: f64) -> View {
        let span = self.span().min((hi - lo).max(MIN_SPAN_NS));
        let start = self.start.max(lo).min(hi - span);
        View {
            start,
            end: start + span,
        }
    }

    /// Time at an x of the plot (x from the plot's left edge).
    pub fn time_at(&self, x: f64, width: f64) -> f64 {
        self.start + x / width.max(1.0) * self.span()
    }

    /// x in the plot of a time.
    pub fn x_of(&self, t: f64, width: f64) -> f64 {
        (t - self.start) / self.span() * width
    }
}

/// What to fetch for a view: the resolution (ns per bucket: the power of
/// two at or above the view's ns per pixel, so a bucket is one or two
/// pixels), and a padded window one screen on each side, as (start, end,
/// px).
pub fn fetch_plan(v: View, width: f64) -> (f64, i64, i64, u32) {
    let per_px = (v.span() / width.max(1.0)).max(1.0);
    let res = 2f64.powf(per_px.log2().ceil());
    let start = (v.start - v.span()).floor();
    let end = (v.end + v.span()).ceil();
    let px = ((end - start) / res).ceil().clamp(1.0, 16384.0) as u32;
    (res, start as i64, end as i64, px)
}

/// Whether data fetched for `[start, end)` at resolution `res` still serves
/// a view: it covers the view, and its resolution is the one the view wants.
pub fn covers(fetched: (f64, i64, i64), v: View, width: f64) -> bool {
    let (res, start, end) = fetched;
    let want = fetch_plan(v, width).0;
    start as f64 <= v.start && end as f64 >= v.end && res == want
}

/// A time for the ruler and tooltips: `850 ns`, `12.5 µs`, `4.56 ms`, `1.23 s`.
pub fn time_label(ns: f64) -> String {
    kinetoscope_types::units::time_us(ns / 1e3)
}

/// A ruler label with as many decimals as the tick step needs:
/// `16.02 ms` for 10 µs ticks, `1.2345 s` for 100 µs ticks over seconds.
pub fn tick_label(t_ns: f64, step_ns: f64) -> String {
    let (div, unit) = if t_ns.abs() >= 1e9 {
        (1e9, "s")
    } else if t_ns.abs() >= 1e6 {
        (1e6, "ms")
    } else if t_ns.abs() >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    let decimals = (-(step_ns / div).log10()).ceil().clamp(0.0, 9.0) as usize;
    format!("{:.*} {unit}", decimals, t_ns / div)
}

/// Tick spacing for the ruler: a 1-2-5 step giving about `target` px apart.
pub fn tick_step(span_ns: f64, width: f64, target_px: f64) -> f64 {
    let raw = span_ns / (width / target_px).max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= raw {
            return m * mag;
        }
    }
    10.0 * mag
}

/// The hues (degrees) names never get: search hits and highlights have
/// them to themselves ([`HIGHLIGHT`]), so a hit never looks like a slice.
pub const RESERVED_HUES: (u32, u32) = (48, 78);

/// The colour of search hits and highlighted names: a yellow no name's
/// colour has ([`RESERVED_HUES`]).
pub const HIGHLIGHT: &str = "hsl(62, 100%, 50%)";

/// A stable colour for a name (hue from a hash, outside
/// [`RESERVED_HUES`]), as `hsl(...)`.
pub fn color_of(name: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(16777619);
    }
    let (lo, hi) = RESERVED_HUES;
    let mut hue = h % (360 - (hi - lo));
    if hue >= lo {
        hue += hi - lo;
    }
    format!("hsl({hue}, 55%, 52%)")
}

/// The shade of a merged block: how busy its span is, 0.25 (idle) to 1.
pub fn busy_alpha(busy_ns: i64, dur_ns: i64) -> f64 {
    if dur_ns <= 0 {
        return 1.0;
    }
    0.25 + 0.75 * (busy_ns as f64 / dur_ns as f64).clamp(0.0, 1.0)
}

/// The view after a wheel event at plot x `x`: shift, or a mostly sideways
/// wheel, pans; otherwise it zooms around the time under the pointer.
#[allow(clippy::too_many_arguments)]
pub fn wheel(v: View, dx: f64, dy: f64, shift: bool, x: f64, width: f64, lo: f64, hi: f64) -> View {
    if shift || dx.abs() > dy.abs() {
        let d = if shift { dy } else { dx };
        v.pan(d / width * v.span(), lo, hi)
    } else {
        v.zoom(1.0015f64.powf(dy), v.time_at(x, width), lo, hi)
    }
}

/// The view after a navigation key, as in Perfetto: W/S zoom in and out
/// around the middle, A/D pan; `None` for any other key.
pub fn key(v: View, key: &str, lo: f64, hi: f64) -> Option<View> {
    let mid = (v.start + v.end) / 2.0;
    Some(match key {
        "w" | "W" => v.zoom(0.8, mid, lo, hi),
        "s" | "S" => v.zoom(1.25, mid, lo, hi),
        "a" | "A" => v.pan(-0.15 * v.span(), lo, hi),
        "d" | "D" => v.pan(0.15 * v.span(), lo, hi),
        _ => return None,
    })
}

/// A highlight query's terms: lower-cased, split on `|` (`nccl|rccl`
/// highlights either), blanks dropped.
pub fn terms(q: &str) -> Vec<String> {
    q.split('|')
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Whether a lower-cased name holds any of the terms.
pub fn matches(terms: &[String], lower: &str) -> bool {
    terms.iter().any(|t| lower.contains(t.as_str()))
}

/// Each layer index's change from run a to run b: the mean time of its
/// spans (every step's) in b over a, minus one (`-0.6`: 60% faster).
/// Indexes missing from either run are left out.
pub fn layer_changes(
    a: &[kinetoscope_types::TimelineLayer],
    b: &[kinetoscope_types::TimelineLayer],
) -> std::collections::HashMap<i64, f64> {
    fn means(ls: &[kinetoscope_types::TimelineLayer]) -> std::collections::HashMap<i64, f64> {
        let mut sum: std::collections::HashMap<i64, (f64, f64)> = Default::default();
        for l in ls {
            let e = sum.entry(l.index).or_default();
            e.0 += (l.end_ns - l.start_ns) as f64;
            e.1 += 1.0;
        }
        sum.into_iter().map(|(k, (t, n))| (k, t / n)).collect()
    }
    let (ma, mb) = (means(a), means(b));
    ma.iter()
        .filter_map(|(k, ta)| {
            let tb = mb.get(k)?;
            (*ta > 0.0).then(|| (*k, tb / ta - 1.0))
        })
        .collect()
}

/// Which window request is the latest for each key (a track; a side and a
/// track): a response is drawn only when no newer request for its key was
/// made since, so a slow answer to an old view never replaces a newer one.
/// The timeline tab and the stacked views share it.
#[derive(Debug)]
pub struct Latest<K> {
    next: u64,
    latest: std::collections::HashMap<K, u64>,
}

impl<K> Default for Latest<K> {
    fn default() -> Self {
        Latest {
            next: 0,
            latest: std::collections::HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq> Latest<K> {
    /// A ticket for a new request for `key`, which makes any older one stale.
    pub fn ask(&mut self, key: K) -> u64 {
        self.next += 1;
        self.latest.insert(key, self.next);
        self.next
    }

    /// Whether the response to `ticket` is still the latest for `key`.
    pub fn is_latest(&self, key: &K, ticket: u64) -> bool {
        self.latest.get(key) == Some(&ticket)
    }
}

/// The colour of a layer's change ([`Change::of`], the one rule): green
/// faster, red slower, grey the same.
pub fn change_color(change: f64) -> &'static str {
    match Change::of(change) {
        Change::Faster => "#54a24b",
        Change::Slower => "#e45756",
        Change::Same => "#bab0ac",
    }
}

/// Offsets that put step `k` of every rank at the same x: each rank's
/// step `k` start (its first start when it has fewer steps).
pub fn step_offsets(infos: &[&kinetoscope_types::TimelineInfo], k: usize) -> Vec<f64> {
    infos
        .iter()
        .map(|i| i.steps.get(k).map_or(i.start_ns, |s| s.start_ns) as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_latest_request_of_a_key_is_drawn() {
        let mut l = Latest::default();
        let old = l.ask(3u32);
        let other = l.ask(4u32);
        let new = l.ask(3u32);
        assert!(!l.is_latest(&3, old), "an older view's answer is stale");
        assert!(l.is_latest(&3, new));
        assert!(l.is_latest(&4, other), "another track's answer is not");
        assert!(!l.is_latest(&5, new));
    }

    #[test]
    fn zoom_keeps_the_point_under_the_cursor() {
        let v = View {
            start: 0.0,
            end: 1000.0,
        };
        let z = v.zoom(0.5, 250.0, 0.0, 1000.0);
        assert_eq!((z.start, z.end), (125.0, 625.0));
        let out = z.zoom(10.0, 500.0, 0.0, 1000.0);
        assert_eq!((out.start, out.end), (0.0, 1000.0));
        let tiny = v.zoom(1e-9, 10.0, 0.0, 1000.0);
        assert!(tiny.span() >= MIN_SPAN_NS);
    }

    #[test]
    fn fetches_three_screens_at_a_power_of_two() {
        let v = View {
            start: 1000.0,
            end: 3000.0,
        };
        let (res, s, e, px) = fetch_plan(v, 1000.0);
        assert_eq!((res, s, e), (2.0, -1000, 5000));
        assert_eq!(px, 3000);
        let (wide, _, _, wide_px) = fetch_plan(
            View {
                start: 0.0,
                end: 3000.0,
            },
            1000.0,
        );
        assert_eq!((wide, wide_px), (4.0, 2250));
        assert!(covers((res, s, e), v.pan(500.0, 0.0, 1e9), 1000.0));
        assert!(!covers((res, s, e), v.zoom(0.25, 2000.0, 0.0, 1e9), 1000.0));
        assert_eq!(tick_step(1e6, 1000.0, 100.0), 1e5);
        assert_eq!(time_label(2500.0), "2.50 µs");
        assert_eq!(tick_label(16_020_000.0, 10_000.0), "16.02 ms");
        assert_eq!(tick_label(500.0, 100.0), "500 ns");
    }

    #[test]
    fn layers_compare_by_index_and_ranks_align_by_step() {
        use kinetoscope_types::{TimelineInfo, TimelineLayer, TimelineStep};
        let l = |index, start_ns, end_ns| TimelineLayer {
            index,
            start_ns,
            end_ns,
        };
        // Layer 0: 100 -> 40 ns (two steps each); layer 1: 100 -> 101; layer 2 only in a.
        let a = [
            l(0, 0, 100),
            l(1, 100, 200),
            l(2, 200, 300),
            l(0, 1000, 1100),
            l(1, 1100, 1200),
        ];
        let b = [l(0, 0, 30), l(1, 30, 131), l(0, 500, 550), l(1, 550, 651)];
        let c = layer_changes(&a, &b);
        assert_eq!(c.len(), 2);
        assert!((c[&0] + 0.6).abs() < 1e-9, "{c:?}");
        assert!((c[&1] - 0.01).abs() < 1e-9);
        assert_eq!(change_color(c[&0]), "#54a24b");
        assert_eq!(change_color(c[&1]), "#bab0ac");
        assert_eq!(change_color(0.2), "#e45756");
        let step = |start_ns| TimelineStep {
            name: String::new(),
            start_ns,
            end_ns: start_ns + 10,
        };
        let r0 = TimelineInfo {
            start_ns: 5,
            steps: vec![step(10), step(30)],
            ..Default::default()
        };
        let r1 = TimelineInfo {
            start_ns: 7,
            steps: vec![step(12)],
            ..Default::default()
        };
        assert_eq!(step_offsets(&[&r0, &r1], 1), vec![30.0, 7.0]);
        assert_eq!(step_offsets(&[&r0, &r1], 0), vec![10.0, 12.0]);
    }

    #[test]
    fn wheel_and_keys_zoom_and_pan() {
        let v = View {
            start: 0.0,
            end: 1000.0,
        };
        // Down zooms out (clamped to the bounds), up zooms in around x.
        let z = wheel(v, 0.0, -200.0, false, 250.0, 1000.0, 0.0, 1e6);
        assert!(
            z.span() < v.span() && z.start > 0.0 && z.start < 250.0,
            "{z:?}"
        );
        let p = wheel(v, 0.0, 100.0, true, 0.0, 1000.0, 0.0, 1e6);
        assert_eq!((p.start, p.end), (100.0, 1100.0));
        let side = wheel(v, 50.0, 10.0, false, 0.0, 1000.0, 0.0, 1e6);
        assert_eq!(side.start, 50.0);
        assert_eq!(key(v, "d", 0.0, 1e6).map(|v| v.start), Some(150.0));
        assert_eq!(key(v, "W", 0.0, 1e6).map(|v| v.span()), Some(800.0));
        assert_eq!(key(v, "x", 0.0, 1e6), None);
    }

    /// No name's colour falls in the hues search hits have to themselves.
    #[test]
    fn names_never_take_the_highlight_hue() {
        let (lo, hi) = RESERVED_HUES;
        for k in 0..5000 {
            let c = color_of(&format!("kernel_{k}"));
            let hue: u32 = c["hsl(".len()..]
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(hue < 360 && !(lo..hi).contains(&hue), "{c}");
        }
        let h: u32 = HIGHLIGHT["hsl(".len()..]
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((lo..hi).contains(&h));
    }
}
