//! The timeline tab: every CPU thread and GPU stream of a rank on one time
//! axis, drawn on a `<canvas>` from window queries (no DOM node per event),
//! with the steps and layers bands, zoom and pan (wheel, drag, W/A/S/D),
//! busy shading of merged pixels, details with the launch chain, search
//! with a density strip, and the view in the URL (`start_ns`, `end_ns`,
//! `event`, `q`).

use crate::api;
use crate::paint::{self, Place};
use crate::timeline::{fetch_plan, time_label, View, BAND_H, GUTTER, HEADER_H, ROW_H, RULER_H};
use crate::viewport::{Viewport, WindowCache};
use crate::widgets::UrlState;
use kinetoscope_types::names::short_name;
use kinetoscope_types::*;
use leptos::html::Canvas;
use leptos::prelude::*;
use leptos::task::spawn_local;
use std::collections::HashSet;
use std::sync::Arc;

/// Where a track is drawn.
#[derive(Clone, Copy)]
struct Lane {
    track: u32,
    top: f64,
    rows: u32,
    collapsed: bool,
}

/// Lays the tracks out under the ruler and bands.
fn lanes(info: &TimelineInfo, collapsed: &HashSet<u32>, top: f64) -> (Vec<Lane>, f64) {
    let mut y = top;
    let mut out = Vec::new();
    for t in info.tracks.iter().filter(|t| t.events > 0) {
        let c = collapsed.contains(&t.id);
        out.push(Lane {
            track: t.id,
            top: y,
            rows: t.rows,
            collapsed: c,
        });
        y += HEADER_H + if c { 0.0 } else { t.rows as f64 * ROW_H } + 4.0;
    }
    (out, y)
}

/// A line track under the slices: a counter series, or a device's
/// allocated memory, drawn as a step line with its value at the cursor.
#[derive(Clone)]
struct LineTrack {
    label: String,
    unit: Option<String>,
    /// `(t_ns, value)` in time order.
    points: Vec<(i64, f64)>,
    max: f64,
    /// The value at the plot's bottom: zero, or near the lowest value when
    /// the line moves little against its level (memory at 71 GB).
    floor: f64,
}

/// A line track's plot height, px.
const LINE_H: f64 = 36.0;

impl LineTrack {
    /// The value at a time: the last point at or before it.
    fn at(&self, t: f64) -> Option<f64> {
        let k = self.points.partition_point(|p| (p.0 as f64) <= t);
        (k > 0).then(|| self.points[k - 1].1)
    }

    /// Sets the floor from the points.
    fn fitted(mut self) -> LineTrack {
        let low = self
            .points
            .iter()
            .map(|p| p.1)
            .fold(f64::INFINITY, f64::min)
            .max(0.0);
        if low.is_finite() && self.max - low < 0.5 * self.max {
            self.floor = (low - 0.1 * (self.max - low)).max(0.0);
        }
        self
    }

    fn text(&self, v: f64) -> String {
        match self.unit.as_deref() {
            Some("bytes") => kinetoscope_types::units::bytes(v),
            Some("%") => format!("{v:.1}%"),
            Some(u) => format!("{v:.3} {u}"),
            None => format!("{v:.3}"),
        }
    }
}

/// The counter tracks and the memory curves of a rank, asked for only where
/// the rank has them (`memory`, `counters`).
async fn line_tracks(id: &str, rank: i64, memory: bool, counters: bool) -> Vec<LineTrack> {
    let mut out = Vec::new();
    let m = match memory {
        true => api::get::<MemoryReport>(&format!("/api/runs/{id}/memory?rank={rank}"))
            .await
            .ok(),
        false => None,
    };
    if let Some(m) = m {
        for d in m.devices {
            out.push(
                LineTrack {
                    label: format!("memory {} allocated", d.device),
                    unit: Some("bytes".into()),
                    max: d.series.iter().map(|p| p[1]).max().unwrap_or(1).max(1) as f64,
                    points: d.series.iter().map(|p| (p[0], p[1] as f64)).collect(),
                    floor: 0.0,
                }
                .fitted(),
            );
        }
    }
    let c = match counters {
        true => api::get::<CounterReport>(&format!("/api/runs/{id}/counters?rank={rank}"))
            .await
            .ok(),
        false => None,
    };
    if let Some(c) = c {
        for t in c.tracks {
            let label = match t.device {
                Some(d) => format!("GPU {d} · {}", t.label),
                None => format!("{} · {}", t.process, t.label),
            };
            out.push(LineTrack {
                label,
                unit: t.unit,
                max: if t.max > 0.0 { t.max } else { 1.0 },
                points: t.points,
                floor: 0.0,
            });
        }
    }
    out
}

fn parse_i64(s: Option<String>) -> Option<i64> {
    s.and_then(|v| v.parse().ok())
}

/// The timeline tab of a run.
#[component]
pub fn TimelineTab(
    /// The run's id.
    id: String,
    /// The rank shown.
    rank: i64,
    /// The page's URL state.
    url: UrlState,
    /// The artifacts stored for the rank: the memory curves and counter
    /// tracks are asked for only where they exist (no 404s logged).
    artifacts: Vec<ArtifactName>,
    /// The device's peak memory bandwidth, GB/s: a copy's or cast's
    /// details say what share of it the call reached.
    peak_gbps: Option<f64>,
) -> impl IntoView {
    let info = RwSignal::new(None::<Result<Arc<TimelineInfo>, String>>);
    let canvas: NodeRef<Canvas> = NodeRef::new();
    let vp = Viewport::new(canvas);
    let view = vp.view;
    let windows = WindowCache::<u32>::new();
    let data = windows.data;
    let collapsed: RwSignal<HashSet<u32>> = RwSignal::new(HashSet::new());
    let selected = RwSignal::new(None::<TimelineEvent>);
    let search = RwSignal::new(None::<TimelineSearch>);
    let query = RwSignal::new(url.get("q").unwrap_or_default());
    let tooltip = vp.tooltip;
    let match_cursor = StoredValue::new(0usize);
    let width = vp.width;
    let base = format!("/api/runs/{id}/timeline");
    // Counter tracks and memory curves, drawn under the slices.
    let lines = RwSignal::new(Vec::<LineTrack>::new());
    let cursor_x = RwSignal::new(None::<f64>);
    {
        let id = id.clone();
        let memory = artifacts.contains(&ArtifactName::Memory);
        let counters = artifacts.contains(&ArtifactName::Counters);
        spawn_local(async move { lines.set(line_tracks(&id, rank, memory, counters).await) });
    }

    // The timeline's tracks and bands; then the view from the URL.
    {
        let base = base.clone();
        spawn_local(async move {
            let got = api::get::<TimelineInfo>(&format!("{base}?rank={rank}"))
                .await
                .map(Arc::new);
            if let Ok(i) = &got {
                let (lo, hi) = (i.start_ns as f64, i.end_ns as f64);
                vp.set_bounds(lo, hi);
                let s = parse_i64(url.get("start_ns"))
                    .map(|v| v as f64)
                    .unwrap_or(lo);
                let e = parse_i64(url.get("end_ns")).map(|v| v as f64).unwrap_or(hi);
                view.set(Some(
                    View {
                        start: s,
                        end: e.max(s + 1.0),
                    }
                    .clamped(lo, hi),
                ));
            }
            info.set(Some(got));
        });
    }
    let bounds = move || {
        info.with_untracked(|i| match i {
            Some(Ok(i)) => (i.start_ns as f64, i.end_ns as f64),
            _ => (0.0, 1.0),
        })
    };
    let plot_w = move || (width.get_untracked() - GUTTER).max(100.0);

    // Fetch what the view needs, track by track; the old picture stays on
    // screen until the new one arrives.
    let window_error = windows.error;
    let fetch = {
        let base = base.clone();
        move |v: View| {
            let Some(Ok(i)) = info.get_untracked() else {
                return;
            };
            let w = plot_w();
            let (res, start, end, px) = fetch_plan(v, w);
            let hidden = collapsed.get_untracked();
            for t in i
                .tracks
                .iter()
                .filter(|t| t.events > 0 && !hidden.contains(&t.id))
            {
                if windows.covers(&t.id, v, w) {
                    continue;
                }
                let url_w = format!(
                    "{base}/window?rank={rank}&track={}&start_ns={start}&end_ns={end}&px={px}&format=columns",
                    t.id
                );
                windows.request(t.id, url_w, res, start, end);
            }
        }
    };
    // Every settled view (and every change of the collapsed lanes):
    // fetch; the URL follows the view.
    vp.when_settled(move || collapsed.track(), fetch.clone());
    vp.follow_in_url(url);

    // Search: highlight, count, density, and go to the first match when the
    // URL gave no view.
    let run_search = {
        let base = base.clone();
        move |q: String, jump: bool| {
            url.set(&[("q", q.clone())], true);
            if q.trim().is_empty() {
                search.set(None);
                return;
            }
            let px = plot_w() as u32;
            let target = format!(
                "{base}/search?rank={rank}&px={px}&q={}",
                js_sys::encode_uri_component(&q)
            );
            let pick = url.get_untracked("pick").is_some();
            let event_base = base.clone();
            spawn_local(async move {
                if let Ok(s) = api::get::<TimelineSearch>(&target).await {
                    if let Some(f) = s.longest.as_ref().or(s.first.as_ref()).filter(|_| pick) {
                        // From a finding: select the longest match (the
                        // call that costs the most) and fit the view to it
                        // and its launch.
                        url.set(
                            &[("pick", String::new()), ("event", f.event.to_string())],
                            true,
                        );
                        let target = format!("{event_base}/event/{}?rank={rank}", f.event);
                        if let Ok(e) = api::get::<TimelineEvent>(&target).await {
                            let (lo, hi) = bounds();
                            let end = (e.start_ns + e.dur_ns.max(1)) as f64;
                            let start = e
                                .launch
                                .as_ref()
                                .map_or(e.start_ns, |l| l.start_ns.min(e.start_ns))
                                as f64;
                            let pad = (end - start).max(1_000.0) * 0.15;
                            view.set(Some(
                                View {
                                    start: start - pad,
                                    end: end + pad,
                                }
                                .clamped(lo, hi),
                            ));
                            selected.set(Some(e));
                        }
                        search.set(Some(s));
                        return;
                    }
                    if jump {
                        if let Some(f) = &s.first {
                            let (lo, hi) = bounds();
                            let t = f.start_ns as f64;
                            view.set(Some(
                                View {
                                    start: t - 50_000.0,
                                    end: t + 450_000.0,
                                }
                                .clamped(lo, hi),
                            ));
                        }
                    }
                    search.set(Some(s));
                }
            });
        }
    };
    {
        let run_search = run_search.clone();
        Effect::new(move |done: Option<bool>| {
            if done == Some(true) {
                return true;
            }
            if matches!(info.get(), Some(Ok(_))) {
                let q = query.get_untracked();
                if !q.is_empty() {
                    run_search(q, url.get("start_ns").is_none());
                }
                if let Some(e) = parse_i64(url.get("event")) {
                    select(
                        e as u32,
                        &format!("/api/runs/{id}/timeline"),
                        rank,
                        selected,
                    );
                }
                return true;
            }
            false
        });
    }

    // Drawing.
    let draw = move || {
        let Some(cv) = canvas.get() else { return };
        let Some(Ok(i)) = info.get() else { return };
        let Some(v) = view.get() else { return };
        let d = data.get();
        let hidden = collapsed.get();
        let sel = selected.get();
        let found = search.get();
        let terms = crate::timeline::terms(&query.get_untracked());
        let w = width.get();
        let top = RULER_H + BAND_H * 2.0 + if found.is_some() { BAND_H } else { 0.0 };
        let (lanes, slices_end) = lanes(&i, &hidden, top);
        let line_tracks = lines.get();
        let cursor = cursor_x.get();
        let height = slices_end + line_tracks.len() as f64 * (HEADER_H + LINE_H + 4.0);
        // As tall as its lanes: the details of a pick then sit just below, in
        // view (a canvas as tall as the window left three lanes in 240 of
        // 737 px and the details below the fold).
        let Some(ctx) = paint::context(&cv, w, height.max(paint::MIN_CANVAS_H)) else {
            return;
        };
        let pw = w - GUTTER;
        paint::ruler(&ctx, v, pw, RULER_H, i.start_ns as f64);
        let whole = Place {
            view: v,
            width: pw,
            top: 0.0,
            row_h: ROW_H,
            offset: 0.0,
        };
        paint::steps_and_layers(&ctx, &i, &whole, RULER_H);
        // The search density strip.
        if let Some(s) = &found {
            let y = RULER_H + BAND_H * 2.0;
            ctx.set_fill_style_str(&paint::muted());
            let _ = ctx.fill_text(&format!("{} matches", s.matches), 4.0, y + 11.0);
            let n = s.tracks.first().map_or(0, |t| t.density.len()).max(1);
            let mut total = vec![0u32; n];
            for t in &s.tracks {
                for (k, c) in t.density.iter().enumerate() {
                    total[k] += c;
                }
            }
            let span = (i.end_ns - i.start_ns) as f64;
            ctx.set_fill_style_str(paint::HIGHLIGHT_EDGE);
            for (k, c) in total.iter().enumerate().filter(|(_, c)| **c > 0) {
                let t0 = i.start_ns as f64 + span * k as f64 / n as f64;
                let x = v.x_of(t0, pw);
                if (0.0..=pw).contains(&x) {
                    ctx.fill_rect(
                        GUTTER + x,
                        y + 2.0,
                        2.0,
                        (BAND_H - 4.0) * (1.0 + (*c as f64).ln()).min(1.0),
                    );
                }
            }
        }
        // Tracks.
        let label_ink = paint::ink();
        for lane in &lanes {
            let t = &i.tracks[lane.track as usize];
            // Lane names in the theme's text colour, a size up from slices.
            ctx.set_fill_style_str(&label_ink);
            ctx.set_font("600 12px sans-serif");
            let _ = ctx.fill_text(
                &format!(
                    "{} {}{}",
                    if lane.collapsed { "▸" } else { "▾" },
                    t.label,
                    // Slices past the track's row cap are counted, not drawn.
                    if t.hidden > 0 {
                        format!(" (+{} overlapping, not drawn)", t.hidden)
                    } else {
                        String::new()
                    }
                ),
                4.0,
                lane.top + 11.0,
            );
            ctx.set_font("11px sans-serif");
            ctx.set_fill_style_str("rgba(128,128,128,0.15)");
            ctx.fill_rect(0.0, lane.top + HEADER_H - 1.0, w, 1.0);
            if lane.collapsed {
                continue;
            }
            let Some(f) = d.get(&lane.track) else {
                continue;
            };
            let place = Place {
                view: v,
                width: pw,
                top: lane.top + HEADER_H,
                row_h: ROW_H,
                offset: 0.0,
            };
            // Which of this window's names the search matches, once per frame.
            let hits = f.hits(&terms);
            paint::slices(
                &ctx,
                f,
                &place,
                lane.rows,
                &hits,
                sel.as_ref().map(|e| e.event),
                |_| {},
            );
        }
        // Line tracks: counters and memory, a step line each, with the
        // value at the cursor.
        let pw_lines = w - GUTTER;
        let t_cursor = cursor.map(|x| v.time_at(x - GUTTER, pw_lines));
        for (k, lt) in line_tracks.iter().enumerate() {
            let y0 = slices_end + k as f64 * (HEADER_H + LINE_H + 4.0);
            let value = t_cursor
                .and_then(|t| lt.at(t))
                .map(|x| format!(": {}", lt.text(x)));
            ctx.set_fill_style_str("#555");
            let _ = ctx.fill_text(
                &format!(
                    "{}{} (max {})",
                    lt.label,
                    value.unwrap_or_default(),
                    lt.text(lt.max)
                ),
                4.0,
                y0 + 11.0,
            );
            ctx.set_fill_style_str("rgba(128,128,128,0.15)");
            ctx.fill_rect(0.0, y0 + HEADER_H - 1.0, w, 1.0);
            let base_y = y0 + HEADER_H + LINE_H;
            let y_of = |val: f64| {
                base_y - LINE_H * ((val - lt.floor) / (lt.max - lt.floor).max(1e-9)).clamp(0.0, 1.0)
            };
            // The points in view, and the one before it (the line enters).
            let a = lt
                .points
                .partition_point(|p| (p.0 as f64) < v.start)
                .saturating_sub(1);
            let b = lt.points.partition_point(|p| (p.0 as f64) <= v.end);
            ctx.set_stroke_style_str(paint::LINE);
            ctx.begin_path();
            let mut first = true;
            let mut last_y = base_y;
            for p in lt.points.get(a..b.max(a)).unwrap_or(&[]) {
                let x = GUTTER + v.x_of(p.0 as f64, pw_lines).max(0.0);
                let y = y_of(p.1);
                if first {
                    ctx.move_to(x, y);
                    first = false;
                } else {
                    ctx.line_to(x, last_y);
                    ctx.line_to(x, y);
                }
                last_y = y;
            }
            if !first {
                ctx.line_to(GUTTER + pw_lines, last_y);
            }
            ctx.stroke();
        }
        if let Some(x) = cursor.filter(|x| *x >= GUTTER && !line_tracks.is_empty()) {
            ctx.set_fill_style_str("rgba(128,128,128,0.5)");
            ctx.fill_rect(x, slices_end, 1.0, height - slices_end);
        }
        // The arrow from the selected GPU op's launch to it.
        if let Some(e) = &sel {
            if let Some(l) = &e.launch {
                let lane_of = |track: u32| lanes.iter().find(|x| x.track == track && !x.collapsed);
                if let (Some(a), Some(b)) = (lane_of(l.track), lane_of(e.track)) {
                    let xa = GUTTER + v.x_of(l.start_ns as f64, pw);
                    let xb = GUTTER + v.x_of(e.start_ns as f64, pw);
                    let ya = a.top + HEADER_H + ROW_H / 2.0;
                    let yb = b.top + HEADER_H + e.row as f64 * ROW_H + ROW_H / 2.0;
                    ctx.set_stroke_style_str(paint::LINK);
                    ctx.begin_path();
                    ctx.move_to(xa, ya);
                    ctx.line_to(xb, yb);
                    ctx.stroke();
                }
            }
        }
        // Where things are, for scripted tests and benchmarks: the view, the
        // plot's geometry, each lane, and how many slices were drawn.
        if let Some(win) = web_sys::window() {
            let layout = serde_json::json!({
                "start": v.start, "end": v.end, "gutter": GUTTER, "width": pw,
                "row_h": ROW_H, "header_h": HEADER_H,
                "lanes": lanes.iter().map(|l| serde_json::json!({"track": l.track, "top": l.top, "rows": l.rows, "collapsed": l.collapsed})).collect::<Vec<_>>(),
                "line_tracks": line_tracks.iter().map(|l| l.label.clone()).collect::<Vec<_>>(),
                "fetched": d.len(),
                "at": win.performance().map_or(0.0, |p| p.now()),
            });
            let _ =
                js_sys::Reflect::set(&win, &"__timelineLayout".into(), &layout.to_string().into());
        }
    };
    Effect::new(move |_| draw());

    // What is under the pointer.
    let hit = move |x: f64, y: f64| -> Option<TimelineSlice> {
        let Some(Ok(i)) = info.get_untracked() else {
            return None;
        };
        let v = view.get_untracked()?;
        let pw = plot_w();
        let top = RULER_H
            + BAND_H * 2.0
            + if search.with_untracked(Option::is_some) {
                BAND_H
            } else {
                0.0
            };
        let (lanes, _) = lanes(&i, &collapsed.get_untracked(), top);
        let lane = lanes.iter().find(|l| {
            y >= l.top + HEADER_H && y < l.top + HEADER_H + l.rows as f64 * ROW_H && !l.collapsed
        })?;
        let row = ((y - lane.top - HEADER_H) / ROW_H) as u32;
        let t = v.time_at(x - GUTTER, pw);
        let tol = v.span() / pw * 2.0;
        data.with_untracked(|d| {
            let f = d.get(&lane.track)?;
            f.at(row, t, tol).map(|s| f.slice(s))
        })
    };
    let on_click = {
        let base = base.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
            if vp.dragged(x) {
                return;
            }
            if x < GUTTER {
                // A click on a label collapses or opens its track.
                let Some(Ok(i)) = info.get_untracked() else {
                    return;
                };
                let top = RULER_H
                    + BAND_H * 2.0
                    + if search.with_untracked(Option::is_some) {
                        BAND_H
                    } else {
                        0.0
                    };
                let (lanes, _) = lanes(&i, &collapsed.get_untracked(), top);
                if let Some(l) = lanes.iter().find(|l| y >= l.top && y < l.top + HEADER_H) {
                    let t = l.track;
                    collapsed.update(|c| {
                        if !c.remove(&t) {
                            c.insert(t);
                        }
                    });
                }
                return;
            }
            let Some(s) = hit(x, y) else { return };
            if s.count > 1 {
                // A merged block: zoom into it.
                let (lo, hi) = bounds();
                let pad = s.dur_ns as f64 * 0.1;
                view.set(Some(
                    View {
                        start: s.start_ns as f64 - pad,
                        end: (s.start_ns + s.dur_ns) as f64 + pad,
                    }
                    .clamped(lo, hi),
                ));
            } else {
                url.set(&[("event", s.event.to_string())], true);
                select(s.event, &base, rank, selected);
            }
        }
    };
    let on_wheel = move |ev: web_sys::WheelEvent| vp.on_wheel(&ev);
    let on_down = move |ev: web_sys::MouseEvent| vp.on_down(&ev);
    let on_move = move |ev: web_sys::MouseEvent| {
        let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
        if !lines.with_untracked(Vec::is_empty) {
            cursor_x.set(Some(x));
        }
        if vp.on_move(&ev) {
            return;
        }
        tooltip.set(hit(x, y).map(|s| {
            // What the merged events are: GPU ops on GPU tracks.
            let gpu = info.with_untracked(|i| match i {
                Some(Ok(i)) => i.tracks.iter().any(|t| {
                    t.kind == TrackKind::Gpu
                        && data.with_untracked(|d| {
                            d.get(&t.id)
                                .is_some_and(|f| f.slices.iter().any(|x| x.event == s.event))
                        })
                }),
                _ => false,
            });
            let text = if s.count > 1 {
                format!(
                    "{} {}, busy {:.0}% (longest: {})",
                    s.count,
                    if gpu { "kernels" } else { "events" },
                    100.0 * s.busy_ns as f64 / s.dur_ns.max(1) as f64,
                    short_name(&s.name)
                )
            } else {
                // The short name the tables use; the full one is in the
                // details of a click.
                format!("{} · {}", short_name(&s.name), time_label(s.dur_ns as f64))
            };
            (x, y, text)
        }));
    };
    let on_up = move |_| vp.on_up();
    // Step through the matches: the density buckets that hold one.
    let step_match = move |dir: i64| {
        let Some(s) = search.get_untracked() else {
            return;
        };
        let Some(Ok(i)) = info.get_untracked() else {
            return;
        };
        let n = s.tracks.first().map_or(0, |t| t.density.len());
        let buckets: Vec<usize> = (0..n)
            .filter(|&k| s.tracks.iter().any(|t| t.density[k] > 0))
            .collect();
        if buckets.is_empty() {
            return;
        }
        let k = match_cursor.get_value() as i64 + dir;
        let k = k.rem_euclid(buckets.len() as i64) as usize;
        match_cursor.set_value(k);
        let span = (i.end_ns - i.start_ns) as f64;
        let t0 = i.start_ns as f64 + span * buckets[k] as f64 / n as f64;
        let t1 = t0 + span / n as f64;
        let (lo, hi) = bounds();
        view.set(Some(
            View {
                start: t0 - (t1 - t0),
                end: t1 + (t1 - t0),
            }
            .clamped(lo, hi),
        ));
    };

    let search_box = {
        let run_search = run_search.clone();
        view! {
            <form class="timeline-search" on:submit=move |ev: leptos::ev::SubmitEvent| {
                ev.prevent_default();
                match_cursor.set_value(0);
                run_search(query.get_untracked(), true);
            }>
                <input type="search" id="timeline-search" aria-label="Find on the timeline by name" placeholder="Find by name (case-insensitive)"
                    prop:value=move || query.get() on:input=move |ev| query.set(event_target_value(&ev))/>
                <button type="submit">"Find"</button>
                <button type="button" id="match-prev" on:click=move |_| step_match(-1)>"‹ prev"</button>
                <button type="button" id="match-next" on:click=move |_| step_match(1)>"next ›"</button>
                <span id="timeline-matches">{move || search.get().map(|s| format!("{} matches", s.matches))}</span>
            </form>
        }
    };
    // A chain link: select that event and bring it into view.
    let pick = Callback::new({
        let base = base.clone();
        move |(event, start): (u32, i64)| {
            let (lo, hi) = bounds();
            let span = view.get_untracked().map_or(1e6, |v| v.span()).min(2e6);
            view.set(Some(
                View {
                    start: start as f64 - span * 0.2,
                    end: start as f64 + span * 0.8,
                }
                .clamped(lo, hi),
            ));
            url.set(&[("event", event.to_string())], true);
            select(event, &base, rank, selected);
        }
    });
    // Keyboard selection on the focused canvas: the arrows step from the
    // selected event to its neighbours in its row (left, right), to the op
    // around it (up) and to the first GPU op below it (down); Escape
    // clears the selection. W/A/S/D and the rest are the viewport's.
    let neighbour_in_row = move |dir: i64| -> Option<(u32, i64)> {
        let e = selected.get_untracked()?;
        data.with_untracked(|d| {
            let f = d.get(&e.track)?;
            let row: Vec<&paint::DrawSlice> = f
                .slices
                .iter()
                .filter(|s| s.row == e.row && s.count == 1)
                .collect();
            let k = row.iter().position(|s| s.event == e.event)? as i64 + dir;
            let s = row.get(usize::try_from(k).ok()?)?;
            Some((s.event, s.start_ns))
        })
    };
    let base_k = base.clone();
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let target = match ev.key().as_str() {
            "ArrowLeft" => neighbour_in_row(-1),
            "ArrowRight" => neighbour_in_row(1),
            "ArrowUp" => selected
                .get_untracked()
                .and_then(|e| e.parents.first().map(|p| (p.event, p.start_ns))),
            "ArrowDown" => selected
                .get_untracked()
                .and_then(|e| e.kernels.first().map(|k| (k.event, k.start_ns))),
            "Escape" => {
                ev.prevent_default();
                selected.set(None);
                url.set(&[("event", String::new())], true);
                return;
            }
            _ => return vp.on_key(&ev),
        };
        ev.prevent_default();
        if let Some((event, start)) = target {
            // Within the view the view stays; past it, it moves to the event.
            let inside = view
                .get_untracked()
                .is_some_and(|v| (start as f64) >= v.start && (start as f64) <= v.end);
            if inside {
                url.set(&[("event", event.to_string())], true);
                select(event, &base_k, rank, selected);
            } else {
                pick.run((event, start));
            }
        }
    };
    let reset = move |_| {
        let (lo, hi) = bounds();
        view.set(Some(View { start: lo, end: hi }));
    };
    view! {
        <div class="timeline" id="timeline">
            {move || match info.get() {
                None => view! { <p class="empty">"Loading the timeline…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" id="timeline-error">{e}</p> }.into_any(),
                Some(Ok(_)) => ().into_any(),
            }}
            {move || window_error.get().map(|e| view! { <p class="error" id="window-error" role="alert">{e}</p> })}
            <div class="toolbar">
                {search_box}
                <span class="spacer"></span>
                <span class="hint">"wheel: zoom · shift+wheel or drag: pan · W/A/S/D · click a block to zoom in · arrows: from the selected event to its neighbours, its op, its GPU ops · Esc"</span>
                <button class="ghost" on:click=reset>"Whole trace"</button>
                {move || info.with(|i| matches!(i, Some(Ok(i)) if i.ranks.len() > 1)).then(|| view! {
                    <button class="ghost" id="all-ranks" on:click=move |_| url.set(&[
                        ("ranks", "all".into()), ("start_ns", String::new()),
                        ("end_ns", String::new()), ("event", String::new()),
                    ], false)>"All ranks ›"</button>
                })}
            </div>
            <div class="timeline-main" class:with-details=move || selected.with(Option::is_some)>
            <div class="timeline-canvas-wrap">
                <canvas node_ref=canvas id="timeline-canvas" tabindex="0" role="img" aria-label="Timeline of CPU threads and GPU streams: drag or use A and D to pan, the wheel or W and S to zoom"
                    on:wheel=on_wheel on:mousedown=on_down on:mousemove=on_move on:mouseup=on_up
                    on:mouseleave=move |_| { tooltip.set(None); cursor_x.set(None); } on:click=on_click on:keydown=on_key></canvas>
                {move || tooltip.get().map(|(x, y, text)| view! {
                    <div class="timeline-tooltip" style=format!("left:{}px;top:{}px", x + 12.0, y + 12.0)>{text}</div>
                })}
            </div>
            {move || selected.get().map(|e| {
                let origin = info.with_untracked(|i| match i { Some(Ok(i)) => i.start_ns, _ => 0 });
                details(e, pick, origin, peak_gbps)
            })}
            </div>
        </div>
    }
}

/// Fetches an event's details into `selected`.
fn select(event: u32, base: &str, rank: i64, selected: RwSignal<Option<TimelineEvent>>) {
    let target = format!("{base}/event/{event}?rank={rank}");
    spawn_local(async move {
        if let Ok(e) = api::get::<TimelineEvent>(&target).await {
            selected.set(Some(e));
        }
    });
}

fn chip(r: &TimelineRef, pick: Callback<(u32, i64)>) -> impl IntoView {
    let event = r.event;
    let start = r.start_ns;
    view! {
        <button class="link chain-link" data-event=event.to_string() title=r.name.clone()
            on:click=move |_| pick.run((event, start))>
            {format!("{} ({})", crate::logic::shorten(&r.name, 70), r.kind)}
        </button>
    }
}

/// What a copy or cast moved, how fast, and against the device's peak:
/// `moved 856 MB in 866 µs: 989 GB/s, 20.6% of the device's 4.80 TB/s`.
fn moved_words(e: &TimelineEvent, peak_gbps: Option<f64>) -> Option<String> {
    let b = e.bytes_moved?;
    let mut out = format!("Moved {}", units::bytes(b));
    if let Some(gbps) = e.bandwidth_gbps {
        out.push_str(&format!(
            " in {}: {}",
            time_label(e.dur_ns as f64),
            units::rate_gbps(gbps)
        ));
        if let Some(peak) = peak_gbps.filter(|p| *p > 0.0) {
            out.push_str(&format!(
                ", {} of the device's {}",
                units::pct(100.0 * gbps / peak),
                units::rate_gbps(peak)
            ));
        }
    }
    Some(out)
}

fn details(
    e: TimelineEvent,
    pick: Callback<(u32, i64)>,
    origin_ns: i64,
    peak_gbps: Option<f64>,
) -> impl IntoView {
    view! {
        <div class="panel timeline-details" id="timeline-details">
            <h3 class="mono" title=e.name.clone()>{kinetoscope_types::names::short_name(&e.name)}</h3>
            <p>{format!("{} · {} · starts at {} · on {} (row {})", e.kind, time_label(e.dur_ns as f64), time_label((e.start_ns - origin_ns) as f64), e.track_label, e.row)}</p>
            {moved_words(&e, peak_gbps).map(|t| view! { <p id="details-bandwidth" class="emph">{t}</p> })}
            {(!e.args.is_empty()).then(|| view! {
                <table class="data small">
                    <tbody>
                        {e.args.iter().map(|(k, v)| view! { <tr><th>{k.clone()}</th><td class="mono small">{v.clone()}</td></tr> }).collect_view()}
                    </tbody>
                </table>
            })}
            {e.launch.as_ref().map(|l| view! { <p id="details-launch">"Launched by " {chip(l, pick)}</p> })}
            {(!e.parents.is_empty()).then(|| view! {
                <p id="details-parents">"Inside (innermost first): "
                    {e.parents.iter().map(|p| chip(p, pick)).collect_view()}
                </p>
            })}
            {(!e.python.is_empty()).then(|| view! {
                <p id="details-python">"Python (innermost last): "
                    <span class="mono small">{e.python.iter().rev().take(6).rev().cloned().collect::<Vec<_>>().join(" › ")}</span>
                </p>
            })}
            {(!e.kernels.is_empty()).then(|| view! {
                <p id="details-kernels">{format!("GPU ops ({}): ", e.kernels.len())}
                    {e.kernels.iter().take(20).map(|k| chip(k, pick)).collect_view()}
                </p>
            })}
        </div>
    }
}
