//! Stacked timelines: several runs or ranks one above the other on one
//! clock, panned and zoomed together, drawn on one `<canvas>` from the same
//! window queries as the timeline tab (no trace is re-parsed).
//!
//! - The diff page's timeline view ([`DiffTimeline`], `/diff/{a}/{b}?view=timeline`):
//!   baseline over patch, each drawn so its anchor (a step, or a layer of
//!   the median step; the median step by default) starts at x = 0 of the
//!   shared clock, with a strip between them colouring each layer by its
//!   change, and a name highlighted in both with its per-step totals.
//! - A run's every-rank view ([`RanksTimeline`], `?tab=timeline&ranks=all`):
//!   every rank's GPU streams as compact lanes, on the trace clock or
//!   aligned by step, the straggler marked, collectives highlighted at once.
//!
//! The view (`start_ns`, `end_ns` on the shared clock), the anchor or the
//! alignment, and the highlight (`hl`) are in the URL.

use crate::api;
use crate::paint::{self, Place};
use crate::timeline::{
    change_color, fetch_plan, layer_changes, step_offsets, terms, time_label, View, BAND_H, GUTTER,
    HEADER_H, ROW_H, RULER_H,
};
use crate::viewport::{Viewport, WindowCache};
use crate::widgets::UrlState;
use kinetoscope_types::units::change_pct;
use kinetoscope_types::*;
use leptos::html::Canvas;
use leptos::prelude::*;
use leptos::task::spawn_local;
use std::collections::HashMap;
use std::sync::Arc;

/// One run and rank of a stacked view.
#[derive(Clone)]
pub struct Side {
    /// The run.
    pub run: String,
    /// Its rank drawn.
    pub rank: i64,
    /// A label for people (`A · baseline`, `rank 3`).
    pub label: String,
    /// Its timeline's tracks and bands.
    pub info: Arc<TimelineInfo>,
    /// The trace time drawn at 0 of the shared clock (the anchor's start).
    pub offset: f64,
    /// Marked for attention (the straggler rank).
    pub marked: bool,
}

/// How the sides are drawn.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stacking {
    /// Two runs with their steps and layers bands, GPU streams, and a
    /// layer-change strip between them.
    Diff,
    /// Every rank of a run: GPU streams only, as compact lanes.
    Ranks,
}

/// Height of a row of a compact lane, px.
const COMPACT_ROW_H: f64 = 6.0;

/// One GPU stream of a side, where it is drawn.
#[derive(Clone, Copy, Debug)]
struct Lane {
    track: u32,
    top: f64,
    rows: u32,
}

/// Where one side is drawn.
#[derive(Clone, Debug)]
struct SideBox {
    /// Its header line.
    top: f64,
    /// The steps band's y (the layers band below it), diff only.
    bands: Option<f64>,
    lanes: Vec<Lane>,
    row_h: f64,
}

/// Lays the sides out under the ruler: boxes, the layer strip's y (diff:
/// between the first two sides), and the canvas height.
fn stack(sides: &[Side], how: Stacking) -> (Vec<SideBox>, Option<f64>, f64) {
    let row_h = match how {
        Stacking::Diff => ROW_H,
        Stacking::Ranks => COMPACT_ROW_H,
    };
    let mut y = RULER_H;
    let mut strip = None;
    let mut boxes = Vec::new();
    for (k, s) in sides.iter().enumerate() {
        if how == Stacking::Diff && k == 1 {
            strip = Some(y);
            y += BAND_H + 4.0;
        }
        let top = y;
        y += HEADER_H;
        let bands = (how == Stacking::Diff).then(|| {
            let b = y;
            y += BAND_H * 2.0;
            b
        });
        let mut lanes = Vec::new();
        for t in s
            .info
            .tracks
            .iter()
            .filter(|t| t.kind == TrackKind::Gpu && t.events > 0)
        {
            lanes.push(Lane {
                track: t.id,
                top: y,
                rows: t.rows.max(1),
            });
            y += t.rows.max(1) as f64 * row_h + 2.0;
        }
        y += 6.0;
        boxes.push(SideBox {
            top,
            bands,
            lanes,
            row_h,
        });
    }
    (boxes, strip, y)
}

/// The shared clock's bounds: every side's trace, moved by its offset.
fn bounds(sides: &[Side]) -> (f64, f64) {
    let lo = sides
        .iter()
        .map(|s| s.info.start_ns as f64 - s.offset)
        .fold(f64::INFINITY, f64::min);
    let hi = sides
        .iter()
        .map(|s| s.info.end_ns as f64 - s.offset)
        .fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

fn parse_f64(s: Option<String>) -> Option<f64> {
    s.and_then(|v| v.parse::<i64>().ok()).map(|v| v as f64)
}

/// What the highlight drew on one side, for the layout record.
#[derive(Default)]
struct HitStats {
    slices: u32,
    events: u32,
    longest_ns: i64,
    names: Vec<String>,
}

/// Several sides on one clock. `initial` is the view when the URL has
/// none; `origin` is the clock's 0 for the ruler's labels.
#[component]
fn Stacked(
    sides: Arc<Vec<Side>>,
    how: Stacking,
    hl: RwSignal<String>,
    url: UrlState,
    initial: View,
    origin: f64,
    /// Each layer index's change in device time per step (the diff's
    /// `layers`), for the layer strip; without it the strip measures the
    /// layers' wall spans, and says so.
    #[prop(optional)]
    device_changes: Option<Arc<HashMap<i64, f64>>>,
) -> impl IntoView {
    let (lo, hi) = bounds(&sides);
    let (boxes, strip, height) = stack(&sides, how);
    let boxes = Arc::new(boxes);
    let start = View {
        start: parse_f64(url.get_untracked("start_ns")).unwrap_or(initial.start),
        end: parse_f64(url.get_untracked("end_ns")).unwrap_or(initial.end),
    };
    let canvas: NodeRef<Canvas> = NodeRef::new();
    let view = Viewport::new(canvas);
    view.set_bounds(lo, hi);
    view.set(View {
        start: start.start,
        end: start.end.max(start.start + 1.0),
    });
    let windows = WindowCache::<(usize, u32)>::new();
    let data = windows.data;
    let width = view.width;
    let tooltip = view.tooltip;
    let plot_w = move || view.plot_w();
    let device_changes = device_changes.filter(|m| !m.is_empty());
    let strip_label = if device_changes.is_some() {
        "layer change (device time)"
    } else {
        "layer change (wall span)"
    };
    let changes = device_changes.unwrap_or_else(|| {
        Arc::new(match how {
            Stacking::Diff if sides.len() == 2 => {
                layer_changes(&sides[0].info.layers, &sides[1].info.layers)
            }
            _ => HashMap::new(),
        })
    });

    // Fetch what the view needs for every lane of every side; the old
    // picture stays until the new one arrives.
    let window_error = windows.error;
    let fetch = {
        let sides = sides.clone();
        let boxes = boxes.clone();
        move |v: View| {
            let w = plot_w();
            for (k, (s, b)) in sides.iter().zip(boxes.iter()).enumerate() {
                // The same span on this side's trace clock.
                let abs = View {
                    start: v.start + s.offset,
                    end: v.end + s.offset,
                };
                let (res, start, end, px) = fetch_plan(abs, w);
                for lane in &b.lanes {
                    let key = (k, lane.track);
                    if windows.covers(&key, abs, w) {
                        continue;
                    }
                    let target = format!(
                        "/api/runs/{}/timeline/window?rank={}&track={}&start_ns={start}&end_ns={end}&px={px}&format=columns",
                        s.run, s.rank, lane.track
                    );
                    windows.request(key, target, res, start, end);
                }
            }
        }
    };
    // Every settled view: fetch; the URL follows the view.
    view.when_settled(|| (), fetch);
    view.follow_in_url(url);

    let draw = {
        let sides = sides.clone();
        let boxes = boxes.clone();
        let changes = changes.clone();
        move || {
            let Some(cv) = canvas.get() else { return };
            let v = view.get();
            let d = data.get();
            let q = terms(&hl.get());
            let w = width.get();
            let Some(ctx) = paint::context(&cv, w, height.max(80.0)) else {
                return;
            };
            let pw = w - GUTTER;
            paint::ruler(&ctx, v, pw, RULER_H, origin);
            let mut stats: Vec<HitStats> = Vec::new();
            let mut anchor_x = Vec::new();
            for (k, (s, b)) in sides.iter().zip(boxes.iter()).enumerate() {
                let place = |top: f64| Place {
                    view: v,
                    width: pw,
                    top,
                    row_h: b.row_h,
                    offset: s.offset,
                };
                ctx.set_fill_style_str(
                    if s.marked {
                        paint::HIGHLIGHT_EDGE.to_string()
                    } else {
                        paint::ink()
                    }
                    .as_str(),
                );
                let _ = ctx.fill_text(&s.label, 4.0, b.top + 11.0);
                ctx.set_fill_style_str("rgba(128,128,128,0.25)");
                ctx.fill_rect(0.0, b.top + HEADER_H - 1.0, w, 1.0);
                let p = place(0.0);
                // The step that starts at the anchor, as drawn.
                anchor_x.push(
                    s.info
                        .steps
                        .iter()
                        .find(|st| st.start_ns as f64 == s.offset)
                        .map(|st| p.x(st.start_ns as f64)),
                );
                if let Some(y) = b.bands {
                    paint::steps_and_layers(&ctx, &s.info, &p, y);
                }
                let mut st = HitStats::default();
                for lane in &b.lanes {
                    if how == Stacking::Diff {
                        let label = &s.info.tracks[lane.track as usize].label;
                        ctx.set_fill_style_str("#666");
                        let _ = ctx.fill_text(label, 12.0, lane.top + 11.0);
                    }
                    let Some(f) = d.get(&(k, lane.track)) else {
                        continue;
                    };
                    let hits = f.hits(&q);
                    paint::slices(&ctx, f, &place(lane.top), lane.rows, &hits, None, |h| {
                        st.slices += 1;
                        st.events += h.count;
                        if h.count == 1 {
                            st.longest_ns = st.longest_ns.max(h.dur_ns);
                        }
                        let name = &f.names[h.name as usize].name;
                        if st.names.len() < 8 && !st.names.contains(name) {
                            st.names.push(name.clone());
                        }
                    });
                }
                stats.push(st);
            }
            // The layer strip: each of run b's layers coloured by its
            // index's change from run a.
            let mut strip_drawn = Vec::new();
            if let (Some(y), Some(b)) = (strip, sides.get(1)) {
                ctx.set_fill_style_str(&paint::muted());
                let _ = ctx.fill_text(strip_label, 4.0, y + 11.0);
                let p = Place {
                    view: v,
                    width: pw,
                    top: y,
                    row_h: BAND_H,
                    offset: b.offset,
                };
                for l in &b.info.layers {
                    let Some(c) = changes.get(&l.index) else {
                        continue;
                    };
                    let (x0, x1) = (p.x(l.start_ns as f64), p.x(l.end_ns as f64));
                    if x1 < 0.0 || x0 > pw {
                        continue;
                    }
                    let (x0, x1) = (x0.max(0.0), x1.min(pw));
                    let color = change_color(*c);
                    ctx.set_fill_style_str(color);
                    ctx.fill_rect(GUTTER + x0, y + 1.0, (x1 - x0).max(1.0), BAND_H - 2.0);
                    if x1 - x0 > 70.0 {
                        ctx.set_fill_style_str("#fff");
                        let _ = ctx.fill_text(
                            &format!("L{} {}", l.index, change_pct(c * 100.0)),
                            GUTTER + x0 + 2.0,
                            y + 11.0,
                        );
                    }
                    if strip_drawn.len() < 400 {
                        strip_drawn.push(serde_json::json!({"index": l.index, "x0": x0, "color": color, "change": c}));
                    }
                }
            }
            // The anchor: x = 0 of the shared clock.
            if how == Stacking::Diff {
                let x = v.x_of(0.0, pw);
                if (0.0..=pw).contains(&x) {
                    ctx.set_fill_style_str("rgba(0,0,0,0.45)");
                    ctx.fill_rect(GUTTER + x, RULER_H, 1.0, height - RULER_H);
                }
            }
            // Where things are, for scripted tests and benchmarks.
            if let Some(win) = web_sys::window() {
                let layout = serde_json::json!({
                    "start": v.start, "end": v.end, "gutter": GUTTER, "width": pw,
                    "fetched": d.len(),
                    "lanes": boxes.iter().map(|b| b.lanes.len()).sum::<usize>(),
                    "sides": sides.iter().zip(boxes.iter()).zip(stats.iter()).zip(anchor_x.iter()).map(|(((s, b), st), ax)| {
                        serde_json::json!({
                            "run": s.run, "rank": s.rank, "label": s.label, "offset": s.offset,
                            "marked": s.marked, "top": b.top,
                            "lanes": b.lanes.iter().map(|l| serde_json::json!({"track": l.track, "top": l.top, "rows": l.rows})).collect::<Vec<_>>(),
                            "anchor_step_x": ax,
                            "hits": {"slices": st.slices, "events": st.events, "longest_ns": st.longest_ns, "names": st.names},
                        })
                    }).collect::<Vec<_>>(),
                    "strip": strip_drawn,
                    "at": win.performance().map_or(0.0, |p| p.now()),
                });
                let _ = js_sys::Reflect::set(
                    &win,
                    &"__stackedLayout".into(),
                    &layout.to_string().into(),
                );
            }
        }
    };
    Effect::new(move |_| draw());

    // What is under the pointer: the side, and the slice.
    let hit = {
        let sides = sides.clone();
        let boxes = boxes.clone();
        move |x: f64, y: f64| -> Option<(usize, TimelineSlice)> {
            let v = view.get_untracked();
            let pw = plot_w();
            let (k, lane, row_h) = boxes.iter().enumerate().find_map(|(k, b)| {
                b.lanes
                    .iter()
                    .find(|l| y >= l.top && y < l.top + l.rows as f64 * b.row_h)
                    .map(|l| (k, *l, b.row_h))
            })?;
            let row = ((y - lane.top) / row_h) as u32;
            let t = v.time_at(x - GUTTER, pw) + sides[k].offset;
            let tol = v.span() / pw * 2.0;
            data.with_untracked(|d| {
                let f = d.get(&(k, lane.track))?;
                f.at(row, t, tol).map(|s| (k, f.slice(s)))
            })
        }
    };
    let on_click = {
        let hit = hit.clone();
        let sides = sides.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
            if view.dragged(x) || x < GUTTER {
                return;
            }
            let Some((k, s)) = hit(x, y) else { return };
            if s.count > 1 {
                // A merged block: zoom into it.
                let off = sides[k].offset;
                let pad = s.dur_ns as f64 * 0.1;
                view.set(View {
                    start: s.start_ns as f64 - off - pad,
                    end: (s.start_ns + s.dur_ns) as f64 - off + pad,
                });
            } else {
                // A single event: highlight its name on every side.
                hl.set(s.name.clone());
            }
        }
    };
    let on_wheel = move |ev: web_sys::WheelEvent| view.on_wheel(&ev);
    let on_down = move |ev: web_sys::MouseEvent| view.on_down(&ev);
    let on_move = {
        let sides = sides.clone();
        move |ev: web_sys::MouseEvent| {
            let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
            if view.on_move(&ev) {
                return;
            }
            tooltip.set(hit(x, y).map(|(k, s)| {
                let text = if s.count > 1 {
                    format!(
                        "{}: {} events, busy {:.0}% (longest: {})",
                        sides[k].label,
                        s.count,
                        100.0 * s.busy_ns as f64 / s.dur_ns.max(1) as f64,
                        kinetoscope_types::names::short_name(&s.name)
                    )
                } else {
                    format!(
                        "{}: {} · {}",
                        sides[k].label,
                        kinetoscope_types::names::short_name(&s.name),
                        time_label(s.dur_ns as f64)
                    )
                };
                (x, y, text)
            }));
        }
    };
    let on_up = move |_| view.on_up();
    let on_key = move |ev: web_sys::KeyboardEvent| view.on_key(&ev);
    view! {
        <div class="toolbar">
            <span class="hint">"wheel: zoom · shift+wheel or drag: pan · W/A/S/D · click a block to zoom in, an event to highlight its name"</span>
            <span class="spacer"></span>
            <button class="ghost" id="stacked-reset" on:click=move |_| view.set(initial.clamped(lo, hi))>"Reset view"</button>
            <button class="ghost" on:click=move |_| view.set(View { start: lo, end: hi })>"Whole traces"</button>
        </div>
        {move || window_error.get().map(|e| view! { <p class="error" id="window-error" role="alert">{e}</p> })}
        <div class="timeline-canvas-wrap">
            <canvas node_ref=canvas id="stacked-canvas" tabindex="0" role="img" aria-label="Stacked timelines: drag or use A and D to pan, the wheel or W and S to zoom"
                on:wheel=on_wheel on:mousedown=on_down on:mousemove=on_move on:mouseup=on_up
                on:mouseleave=move |_| tooltip.set(None) on:click=on_click on:keydown=on_key></canvas>
            {move || tooltip.get().map(|(x, y, text)| view! {
                <div class="timeline-tooltip" style=format!("left:{}px;top:{}px", x + 12.0, y + 12.0)>{text}</div>
            })}
        </div>
    }
}

/// The highlight box: a name (or `a|b`), kept in the URL as `hl`.
fn highlight_box(hl: RwSignal<String>, placeholder: &'static str) -> impl IntoView {
    let draft = RwSignal::new(hl.get_untracked());
    Effect::new(move |_| draft.set(hl.get()));
    view! {
        <form class="timeline-search" on:submit=move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            hl.set(draft.get_untracked());
        }>
            <input type="search" id="stacked-highlight" aria-label="Highlight a name in both" placeholder=placeholder
                prop:value=move || draft.get() on:input=move |ev| draft.set(event_target_value(&ev))/>
            <button type="submit">"Highlight"</button>
            <button type="button" class="ghost" on:click=move |_| hl.set(String::new())>"Clear"</button>
        </form>
    }
}

/// The highlight, two-way with the URL's `hl`.
fn highlight_signal(url: UrlState) -> RwSignal<String> {
    let hl = RwSignal::new(url.get_untracked("hl").unwrap_or_default());
    Effect::new(move |prev: Option<String>| {
        let q = hl.get();
        if prev.is_some_and(|p| p != q) {
            url.set(&[("hl", q.clone())], true);
        }
        q
    });
    hl
}

/// The diff page's timeline view: run a over run b, aligned on an anchor.
#[component]
pub fn DiffTimeline(
    /// The baseline run.
    a: String,
    /// The patch run.
    b: String,
    /// Their diff (names and per-step totals of a highlight).
    diff: Arc<Diff>,
    /// The page's URL state.
    url: UrlState,
) -> impl IntoView {
    let rank: i64 = url
        .get_untracked("rank")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let anchor = Memo::new(move |_| url.get("anchor").unwrap_or_default());
    let hl = highlight_signal(url);
    // The layer strip's measure: each layer's device time per step, from
    // the diff (a fix that cut every layer's device time 10x reads as
    // -90%, where their wall spans, bound by the host, barely moved).
    let device_changes: Arc<HashMap<i64, f64>> = Arc::new(
        diff.layers
            .iter()
            .filter(|l| l.a_us > 0.0)
            .map(|l| (l.index, l.b_us / l.a_us - 1.0))
            .collect(),
    );
    let infos = RwSignal::new(None::<Result<(Arc<TimelineInfo>, Arc<TimelineInfo>), String>>);
    {
        let (a, b) = (a.clone(), b.clone());
        spawn_local(async move {
            let got = async {
                let ia = api::get::<TimelineInfo>(&format!("/api/runs/{a}/timeline?rank={rank}"))
                    .await?;
                let ib = api::get::<TimelineInfo>(&format!("/api/runs/{b}/timeline?rank={rank}"))
                    .await?;
                Ok::<_, String>((Arc::new(ia), Arc::new(ib)))
            }
            .await;
            infos.set(Some(got));
        });
    }
    // (sides, initial view, what the alignment is, whether it fell back)
    type Aligned = (Arc<Vec<Side>>, View, String, bool);
    let aligned = RwSignal::new(None::<Aligned>);
    let (na, nb) = (diff.a.name.clone(), diff.b.name.clone());
    Effect::new({
        let (a, b) = (a.clone(), b.clone());
        move |_| {
            let anchor = anchor.get();
            let Some(Ok((ia, ib))) = infos.get() else {
                return;
            };
            let (a, b, na, nb) = (a.clone(), b.clone(), na.clone(), nb.clone());
            spawn_local(async move {
                let q = if anchor.is_empty() {
                    String::new()
                } else {
                    format!("&anchor={}", js_sys::encode_uri_component(&anchor))
                };
                let side =
                    |run: &str, name: &str, letter: &str, info: &Arc<TimelineInfo>, offset: f64| {
                        Side {
                            run: run.to_string(),
                            rank,
                            label: format!("{letter} · {name}"),
                            info: info.clone(),
                            offset,
                            marked: false,
                        }
                    };
                let got = match api::get::<DiffAlign>(&format!(
                    "/api/diff/{a}/{b}/align?rank={rank}{q}"
                ))
                .await
                {
                    Ok(al) => {
                        let len =
                            (al.a.end_ns - al.a.start_ns).max(al.b.end_ns - al.b.start_ns) as f64;
                        (
                            Arc::new(vec![
                                side(&a, &na, "A", &ia, al.a.start_ns as f64),
                                side(&b, &nb, "B", &ib, al.b.start_ns as f64),
                            ]),
                            View {
                                start: -0.05 * len,
                                end: 1.05 * len,
                            },
                            format!(
                                "Aligned on the {} of each run.",
                                al.anchor.replace(':', " ")
                            ),
                            false,
                        )
                    }
                    Err(e) => {
                        let len = (ia.end_ns - ia.start_ns).max(ib.end_ns - ib.start_ns) as f64;
                        (
                            Arc::new(vec![
                                side(&a, &na, "A", &ia, ia.start_ns as f64),
                                side(&b, &nb, "B", &ib, ib.start_ns as f64),
                            ]),
                            View { start: 0.0, end: len },
                            format!("Can't align on that anchor ({e}); the runs' starts are aligned instead."),
                            true,
                        )
                    }
                };
                aligned.set(Some(got));
            });
        }
    });
    // The anchors both runs have: their steps and the median step's layers.
    let choices = move || -> Vec<(String, String)> {
        let Some(Ok((ia, ib))) = infos.get() else {
            return Vec::new();
        };
        let mut out = vec![(String::new(), "median step".to_string())];
        for k in 0..ia.steps.len().min(ib.steps.len()) {
            out.push((
                format!("step:{k}"),
                format!("step {k} ({})", ia.steps[k].name),
            ));
        }
        let mut layers: Vec<i64> = ia.layers.iter().map(|l| l.index).collect();
        layers.sort_unstable();
        layers.dedup();
        for l in layers
            .into_iter()
            .filter(|l| ib.layers.iter().any(|x| x.index == *l))
        {
            out.push((
                format!("layer:{l}"),
                format!("layer {l} of the median step"),
            ));
        }
        out
    };
    let totals = {
        let diff = diff.clone();
        move || crate::logic::highlight_totals(&diff, &hl.get())
    };
    view! {
        <div class="panel stacked" id="diff-timeline">
            <div class="toolbar">
                <label>"Anchor "
                    <select id="anchor-select" prop:value=move || anchor.get()
                        on:change=move |ev| url.set(&[("anchor", event_target_value(&ev)), ("start_ns", String::new()), ("end_ns", String::new())], false)>
                        {move || choices().into_iter().map(|(v, l)| { let sel = v == anchor.get_untracked(); view! { <option value=v selected=sel>{l}</option> } }).collect_view()}
                    </select>
                </label>
                {highlight_box(hl, "Highlight a kernel or op in both runs")}
            </div>
            <p id="highlight-totals" class="hint">{totals}</p>
            {host_line(&diff)}
            {move || match infos.get() {
                None => view! { <p class="empty">"Loading both timelines…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" id="stacked-error">{e}</p> }.into_any(),
                Some(Ok(_)) => ().into_any(),
            }}
            {move || aligned.get().map(|(sides, initial, note, fell_back)| view! {
                <p id="align-note" class:error=fell_back>{note}</p>
                <Stacked sides=sides how=Stacking::Diff hl=hl url=url initial=initial origin=0.0 device_changes=device_changes.clone()/>
            })}
        </div>
    }
}

/// What bounds each run's step and the host rows that changed most (per
/// step, over every step: the CPU lanes above show where they lie in the
/// aligned one).
fn host_line(d: &Diff) -> Option<impl IntoView> {
    let (a, b) = (d.a.bound.as_ref()?, d.b.bound.as_ref()?);
    let rows: Vec<String> = d
        .host_ops
        .iter()
        .take(3)
        .map(|r| {
            format!(
                "{} {} ({})",
                kinetoscope_types::names::short_name(&r.name),
                units::change_pct(r.change_pct),
                units::time_us(r.delta_us.abs())
            )
        })
        .collect();
    let most = if rows.is_empty() {
        String::new()
    } else {
        format!(" Host ops that changed most per step: {}.", rows.join(", "))
    };
    Some(view! {
        <p id="diff-timeline-host" class="hint">{format!("A is {}; B is {}.{most}", a.words(), b.words())}</p>
    })
}

/// Every rank of a run: GPU streams as compact lanes.
#[component]
pub fn RanksTimeline(
    /// The run.
    id: String,
    /// Its ranks.
    ranks: Vec<i64>,
    /// The straggler, from the cross-rank summary.
    straggler: Option<i64>,
    /// The page's URL state.
    url: UrlState,
) -> impl IntoView {
    let by_step = Memo::new(move |_| url.get("align").as_deref() == Some("step"));
    let hl = highlight_signal(url);
    let infos = RwSignal::new(None::<Result<Vec<Arc<TimelineInfo>>, String>>);
    {
        let id = id.clone();
        spawn_local(async move {
            let mut all = Vec::new();
            for r in &ranks {
                match api::get::<TimelineInfo>(&format!("/api/runs/{id}/timeline?rank={r}")).await {
                    Ok(i) => all.push(Arc::new(i)),
                    Err(e) => {
                        infos.set(Some(Err(format!("rank {r}: {e}"))));
                        return;
                    }
                }
            }
            infos.set(Some(Ok(all)));
        });
    }
    let stacked = move || {
        let Some(Ok(all)) = infos.get() else {
            return None;
        };
        let step = by_step.get();
        let refs: Vec<&TimelineInfo> = all.iter().map(|i| i.as_ref()).collect();
        // By step: the middle step of the first rank, on every rank.
        let k = all.first().map_or(0, |i| i.steps.len() / 2);
        let offsets = if step {
            step_offsets(&refs, k)
        } else {
            vec![0.0; all.len()]
        };
        let sides: Vec<Side> = all
            .iter()
            .zip(offsets)
            .map(|(i, offset)| Side {
                run: id.clone(),
                rank: i.rank,
                label: if Some(i.rank) == straggler {
                    format!("rank {} · straggler", i.rank)
                } else {
                    format!("rank {}", i.rank)
                },
                info: i.clone(),
                offset,
                marked: Some(i.rank) == straggler,
            })
            .collect();
        let (lo, hi) = bounds(&sides);
        let origin = if step { 0.0 } else { lo };
        Some(view! {
            <Stacked sides=Arc::new(sides) how=Stacking::Ranks hl=hl url=url initial=View { start: lo, end: hi } origin=origin/>
        })
    };
    view! {
        <div class="stacked" id="ranks-timeline">
            <div class="toolbar">
                <button class="ghost" id="one-rank" on:click=move |_| url.set(&[("ranks", String::new()), ("start_ns", String::new()), ("end_ns", String::new()), ("hl", String::new())], false)>"‹ One rank"</button>
                <label>"Align "
                    <select id="align-select" prop:value=move || if by_step.get() { "step" } else { "clock" }
                        on:change=move |ev| url.set(&[("align", if event_target_value(&ev) == "step" { "step".into() } else { String::new() }), ("start_ns", String::new()), ("end_ns", String::new())], false)>
                        <option value="clock">"on the trace clock"</option>
                        <option value="step">"by step"</option>
                    </select>
                </label>
                <button class="ghost" id="highlight-collectives" on:click=move |_| hl.set("nccl|rccl".into())>"Highlight collectives"</button>
                {highlight_box(hl, "Highlight a kernel on every rank")}
            </div>
            {move || match infos.get() {
                None => view! { <p class="empty">"Loading every rank's timeline…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" id="stacked-error">{e}</p> }.into_any(),
                Some(Ok(_)) => ().into_any(),
            }}
            {stacked}
        </div>
    }
}
