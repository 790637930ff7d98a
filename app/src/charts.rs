//! SVG charts drawn from the summary. Each bar carries a `<title>`, which
//! browsers show on hover.

use crate::logic::{category_color, step_outliers, CATEGORIES};
use kinetoscope_types::units::{calls, pct, time_us};
use kinetoscope_types::{CategoryTime, LayerRow, RankStats, StepRow};
use leptos::prelude::*;

/// A bar per step: the step's time (CPU side) and its GPU work; steps of at
/// least 1.5x the median are marked.
pub fn step_chart(steps: &[StepRow]) -> impl IntoView {
    let n = steps.len().max(1) as f64;
    let tallest = steps
        .iter()
        .map(|s| s.time().max(s.device_us))
        .fold(0.0, f64::max)
        .max(1e-9);
    // Headroom: the tallest bar stops below the top edge.
    let max = tallest * HEADROOM;
    let out = step_outliers(steps);
    let (w, h) = (1000.0, 220.0);
    let slot = w / n;
    let bw = (slot * 0.4).max(0.5);
    let bars = steps
        .iter()
        .zip(out)
        .enumerate()
        .map(|(i, (s, outlier))| {
            let x = i as f64 * slot + slot * 0.1;
            let hc = h * s.time() / max;
            let hd = h * s.device_us / max;
            let cls = if outlier { "bar-cpu outlier" } else { "bar-cpu" };
            view! {
                <g>
                    <rect class=cls x=x y=h - hc width=bw height=hc>
                        <title>{format!("{}: step {}{}", s.name, time_us(s.time()), if outlier { " (slow)" } else { "" })}</title>
                    </rect>
                    <rect class="bar-device" x=x + bw y=h - hd width=bw height=hd>
                        <title>{format!("{}: GPU work {}, {} GPU ops", s.name, time_us(s.device_us), s.kernels)}</title>
                    </rect>
                </g>
            }
        })
        .collect_view();
    let (grid, labels) = y_scale(max, w, h, time_us);
    view! {
        <figure class="chart">
            <div class="chart-plot">
                <div class="y-axis" id="steps-y-axis" title="time per step">{labels}</div>
                <svg viewBox=format!("0 0 {w} {}", h + 2.0) preserveAspectRatio="none" class="steps-chart" role="img" aria-label="Time per step">{grid}{bars}</svg>
            </div>
            {x_axis("steps-x-axis", "step", steps.len(), |i| step_number(&steps[i], i))}
            <figcaption>
                <span class="axis-unit">"y: time per step, x: step  · "</span>
                <span class="key key-cpu"></span>"step time  "
                <span class="key key-device"></span>"GPU work  "
                <span class="key key-outlier"></span>"≥ 1.5× median  · max " {time_us(tallest)}
            </figcaption>
        </figure>
    }
}

/// A chart's y axis up to `max` over a plot `w` by `h` (its SVG is `h + 2`
/// high): grid lines across the plot, and round values as labels beside
/// it (text inside a stretched SVG would stretch with it).
fn y_scale(
    max: f64,
    w: f64,
    h: f64,
    label: impl Fn(f64) -> String,
) -> (impl IntoView, impl IntoView) {
    let ticks = crate::logic::nice_ticks(max, 4);
    let grid = ticks
        .iter()
        .map(|v| {
            let y = h - h * v / max;
            view! { <line class="grid" x1="0" x2=w y1=y y2=y vector-effect="non-scaling-stroke"/> }
        })
        .collect_view();
    let labels = ticks
        .iter()
        .map(|v| view! { <span class="tick" style=format!("bottom: {:.2}%", 100.0 * v / max * h / (h + 2.0))>{label(*v)}</span> })
        .collect_view();
    (grid, labels)
}

/// The top of a bar chart's axis over its tallest bar: room above it, so
/// no bar touches the plot's edge.
const HEADROOM: f64 = 1.1;
/// Most labels an x axis shows: every k-th bar past that.
const MAX_X_LABELS: usize = 16;

/// A step's number as the trace names it (`ProfilerStep#12` -> 12), else
/// its place from 1.
fn step_number(s: &StepRow, i: usize) -> String {
    let digits: String = s
        .name
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if digits.is_empty() {
        (i + 1).to_string()
    } else {
        digits
    }
}

/// An x axis under a bar chart of `n` bars: each labelled bar's label
/// centred under its slot, at most [`MAX_X_LABELS`] of them.
fn x_axis(
    id: &'static str,
    what: &'static str,
    n: usize,
    label: impl Fn(usize) -> String,
) -> impl IntoView {
    let every = n.div_ceil(MAX_X_LABELS).max(1);
    let ticks = (0..n)
        .step_by(every)
        .map(|i| {
            let at = 100.0 * (i as f64 + 0.5) / n.max(1) as f64;
            view! { <span class="tick" style=format!("left: {at:.2}%")>{label(i)}</span> }
        })
        .collect_view();
    view! { <div class="x-axis" id=id title=what>{ticks}</div> }
}

/// A time axis under a chart spanning `span_ns` from its left edge: round
/// times from 0, as the timeline's ruler labels them.
fn time_axis(id: &'static str, span_ns: f64) -> impl IntoView {
    let ticks = crate::logic::nice_ticks(span_ns.max(1.0), 6)
        .into_iter()
        .map(|v| {
            let at = 100.0 * v / span_ns.max(1.0);
            view! { <span class="tick" style=format!("left: {at:.2}%")>{crate::timeline::time_label(v)}</span> }
        })
        .collect_view();
    view! { <div class="x-axis" id=id title="time from the first event shown">{ticks}</div> }
}

/// Per-layer stacked bars of device time by kernel category, on a given
/// scale (so two runs can share one).
pub fn stacked_layers(items: &[LayerRow], max: f64, label: &str) -> impl IntoView {
    let n = items.len().max(1) as f64;
    let (w, h) = (1000.0, 220.0);
    let slot = w / n;
    let bw = (slot * 0.8).max(0.5);
    let tallest = max.max(1e-9);
    let max = tallest * HEADROOM;
    let bars = items
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let x = i as f64 * slot;
            let mut y = h;
            let segs = CATEGORIES
                .iter()
                .filter_map(|c| l.by_category.get(c.as_str()).map(|v| (*c, *v)))
                .filter(|(_, v)| *v > 0.0)
                .map(|(c, v)| {
                    let sh = h * v / max;
                    y -= sh;
                    view! {
                        <rect x=x y=y width=bw height=sh style=format!("fill:{}", category_color(c))>
                            <title>{format!("layer {} · {c}: {} (layer total {})", l.index, time_us(v), time_us(l.device_us))}</title>
                        </rect>
                    }
                })
                .collect_view();
            view! { <g class="layer" data-layer=l.index>{segs}</g> }
        })
        .collect_view();
    let (grid, labels) = y_scale(max, w, h, time_us);
    let index: Vec<i64> = items.iter().map(|l| l.index).collect();
    view! {
        <figure class="chart">
            <div class="chart-plot">
                <div class="y-axis" id="layers-y-axis" title=label.to_string()>{labels}</div>
                <svg viewBox=format!("0 0 {w} {}", h + 2.0) preserveAspectRatio="none" class="layers-chart" role="img" aria-label=label.to_string()>{grid}{bars}</svg>
            </div>
            {x_axis("layers-x-axis", "layer", index.len(), move |i| index[i].to_string())}
            <figcaption>{legend()} " · y: " {label.to_string()} ", x: layer · tallest " {time_us(tallest)}</figcaption>
        </figure>
    }
}

/// The category colour legend.
pub fn legend() -> impl IntoView {
    CATEGORIES
        .iter()
        .map(|c| view! { <span class="legend"><span class="key" style=format!("background:{}", category_color(*c))></span>{c.as_str()}</span> })
        .collect_view()
}

/// Busy against idle over the window.
pub fn busy_bar(busy_pct: f64, busy_us: f64, idle_us: f64) -> impl IntoView {
    let b = busy_pct.clamp(0.0, 100.0);
    view! {
        <div class="busy">
            <div class="busy-fill" style=format!("width:{b:.1}%")>
                <span>{format!("busy {} ({})", pct(busy_pct), time_us(busy_us))}</span>
            </div>
            <span class="busy-idle">{format!("idle {}", time_us(idle_us))}</span>
        </div>
    }
}

/// Horizontal bars of GPU time by category.
pub fn category_bars(cats: &[CategoryTime]) -> impl IntoView {
    cats.iter()
        .map(|c| {
            view! {
                <div class="hbar">
                    <span class="hbar-label">{c.category.as_str()}</span>
                    <span class="hbar-track">
                        <span class="hbar-fill" style=format!("width:{:.1}%;background:{}", c.pct.clamp(0.0, 100.0), category_color(c.category))></span>
                    </span>
                    <span class="hbar-value">{format!("{} · {} · {}", pct(c.pct), time_us(c.us), calls(c.calls as f64))}</span>
                </div>
            }
        })
        .collect_view()
}

/// A bar per rank (mean step time, or window without steps); the slowest
/// rank is marked.
pub fn rank_bars(ranks: &[RankStats], slowest: Option<i64>) -> impl IntoView {
    let value = |r: &RankStats| {
        if r.steps > 0 {
            r.mean_step_us
        } else {
            r.span_us
        }
    };
    let max = ranks.iter().map(value).fold(0.0, f64::max).max(1e-9);
    ranks
        .iter()
        .map(|r| {
            let v = value(r);
            let straggler = Some(r.rank) == slowest;
            view! {
                <div class="hbar" class:straggler=straggler data-rank=r.rank>
                    <span class="hbar-label">{format!("rank {}", r.rank)}</span>
                    <span class="hbar-track">
                        <span class="hbar-fill" style=format!("width:{:.1}%", 100.0 * v / max)></span>
                    </span>
                    <span class="hbar-value">
                        {format!("{} {} · collectives {} · busy {}", if r.steps > 0 { "step" } else { "window" }, time_us(v), time_us(r.collective_us), pct(r.busy_pct))}
                        {straggler.then_some(" ← slowest")}
                    </span>
                </div>
            }
        })
        .collect_view()
}

/// A bar centred on zero for a change: left (faster) or right (slower).
pub fn delta_bar(delta: f64, max_abs: f64) -> impl IntoView {
    let w = if max_abs > 0.0 {
        50.0 * (delta.abs() / max_abs).min(1.0)
    } else {
        0.0
    };
    let (left, cls) = if delta < 0.0 {
        (50.0 - w, "delta-fill faster")
    } else {
        (50.0, "delta-fill slower")
    };
    view! {
        <span class="delta">
            <span class=cls style=format!("left:{left:.1}%;width:{w:.1}%")></span>
        </span>
    }
}

/// One device's memory over time: allocated (a line) and reserved (a
/// dashed line), the steps shaded, the peak marked.
pub fn memory_chart(d: &kinetoscope_types::MemoryDevice) -> impl IntoView {
    use kinetoscope_types::units::bytes;
    let (w, h) = (1000.0, 200.0);
    let (t0, t1) = match (d.series.first(), d.series.last()) {
        (Some(a), Some(b)) => (a[0], b[0].max(a[0] + 1)),
        _ => (0, 1),
    };
    let top = d
        .series
        .iter()
        .map(|p| p[1].max(p[2]))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // The axis starts near the lowest value when the curve moves little
    // against its level (a few hundred MB over 70 GB): from zero it would
    // be a flat line.
    let low = d.series.iter().map(|p| p[1]).min().unwrap_or(0).max(0) as f64;
    let floor = if top - low < 0.5 * top {
        (low - 0.1 * (top - low)).max(0.0)
    } else {
        0.0
    };
    let max = (top - floor).max(1.0);
    let x = move |t: i64| w * (t - t0) as f64 / (t1 - t0) as f64;
    let y = move |v: i64| h - h * ((v.max(0) as f64 - floor).max(0.0)) / max;
    // A step line: each value holds until the next change.
    let path = |col: usize| {
        let mut s = String::new();
        for p in d.series.iter().filter(|p| col != 2 || p[2] >= 0) {
            let (px, py) = (x(p[0]), y(p[col]));
            if s.is_empty() {
                s += &format!("M{px:.1},{py:.1}");
            } else {
                s += &format!("H{px:.1}V{py:.1}");
            }
        }
        s
    };
    let steps = d
        .steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let (a, b) = (x(s.start_ns), x(s.end_ns));
            view! {
                <rect class=if k % 2 == 0 { "mem-step" } else { "mem-step odd" } x=a y="0" width=(b - a).max(0.5) height=h>
                    <title>{format!("{}: peak {}, net {}", s.step, bytes(s.peak_bytes as f64), bytes(s.net_bytes as f64))}</title>
                </rect>
            }
        })
        .collect_view();
    let reserved = d.reserved_peak_bytes >= 0;
    let (grid, labels) = y_scale(max, w, h, |v| bytes(floor + v));
    let (px, py) = (x(d.peak_ns), y(d.peak_bytes));
    view! {
        <figure class="chart memory-chart" data-device=d.device.clone()>
            <div class="chart-plot">
                <div class="y-axis" title="bytes">{labels}</div>
                <svg viewBox=format!("0 0 {w} {}", h + 2.0) preserveAspectRatio="none" class="mem-chart">
                    {steps}{grid}
                    {reserved.then(|| view! { <path class="mem-reserved" d=path(2) vector-effect="non-scaling-stroke"/> })}
                    <path class="mem-allocated" d=path(1) vector-effect="non-scaling-stroke"/>
                    <line class="mem-peak" x1=px x2=px y1="0" y2=h vector-effect="non-scaling-stroke">
                        <title>{format!("peak: {}", bytes(d.peak_bytes as f64))}</title>
                    </line>
                    <circle class="mem-peak-dot" cx=px cy=py r="3" vector-effect="non-scaling-stroke"/>
                </svg>
            </div>
            {time_axis("memory-x-axis", (t1 - t0) as f64)}
            <figcaption>
                <span class="axis-unit">"y: bytes, x: time  · "</span>
                <span class="key key-device"></span>"allocated  "
                {reserved.then(|| view! { <span class="key key-reserved"></span>"reserved  " })}
                <span class="key key-outlier"></span>{format!("peak {}  · {} events, {} points drawn", bytes(d.peak_bytes as f64), d.events, d.series.len())}
            </figcaption>
        </figure>
    }
}
