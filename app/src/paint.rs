//! Drawing timelines on a Canvas 2D: the slices fetched for a track, the
//! ruler and the bands. One implementation, used by the timeline tab and by
//! the stacked views (a diff's two runs, every rank of a run), so a slice
//! looks and merges the same everywhere.

use crate::timeline::{busy_alpha, color_of, matches, tick_label, tick_step, View, BAND_H, GUTTER};
use kinetoscope_types::{TimelineColumns, TimelineSlice};
use web_sys::CanvasRenderingContext2d as Ctx;

/// The stroke of line tracks (counters, memory).
pub const LINE: &str = "#2f7bd8";
/// Colour of highlighted slices (search matches, a chosen name): a yellow
/// that no name's colour has (`timeline::RESERVED_HUES`).
pub use crate::timeline::HIGHLIGHT;
/// Its dark edge: the outline of a hit, the search strip's marks, marked
/// labels (yellow alone is faint on the light theme).
pub const HIGHLIGHT_EDGE: &str = "hsl(62, 100%, 26%)";
/// The arrow from a selected GPU op to its launch.
pub const LINK: &str = "#e45756";

/// A distinct name of a fetched window, with what drawing needs of it.
pub struct NameInfo {
    /// The name as the trace has it.
    pub name: String,
    /// Lower-cased, for matching.
    pub lower: String,
    /// Its colour.
    pub color: String,
}

/// One slice as drawn: the window's slice with its name interned.
pub struct DrawSlice {
    /// Start, ns (trace clock).
    pub start_ns: i64,
    /// First start to last end, ns.
    pub dur_ns: i64,
    /// Row in its track.
    pub row: u32,
    /// Events merged.
    pub count: u32,
    /// Total duration of the merged events, ns.
    pub busy_ns: i64,
    /// The event (or the longest merged one).
    pub event: u32,
    /// Index into [`Fetched::names`].
    pub name: u32,
}

/// Slices fetched for one track: names interned and coloured once, when
/// they arrive, so a frame allocates nothing per slice.
pub struct Fetched {
    /// Resolution asked for, ns per bucket.
    pub res: f64,
    /// Window start, ns.
    pub start: i64,
    /// Window end, ns.
    pub end: i64,
    /// Distinct names.
    pub names: Vec<NameInfo>,
    /// The slices, by start within each row.
    pub slices: Vec<DrawSlice>,
}

impl Fetched {
    /// From the columns form of a window: names coloured once.
    pub fn from_columns(res: f64, start: i64, end: i64, c: TimelineColumns) -> Fetched {
        let names = c
            .names
            .into_iter()
            .map(|n| NameInfo {
                lower: n.to_lowercase(),
                color: color_of(&n),
                name: n,
            })
            .collect();
        let slices = (0..c.start_ns.len())
            .map(|k| DrawSlice {
                start_ns: c.start_ns[k],
                dur_ns: c.dur_ns[k],
                row: c.row[k],
                count: c.count[k],
                busy_ns: c.busy_ns[k],
                event: c.event[k],
                name: c.name[k],
            })
            .collect();
        Fetched {
            res,
            start,
            end,
            names,
            slices,
        }
    }

    /// A drawn slice in the API's form.
    pub fn slice(&self, s: &DrawSlice) -> TimelineSlice {
        TimelineSlice {
            start_ns: s.start_ns,
            dur_ns: s.dur_ns,
            row: s.row,
            name: self.names[s.name as usize].name.clone(),
            count: s.count,
            busy_ns: s.busy_ns,
            event: s.event,
        }
    }

    /// The slice of `row` under time `t` (within `tol` ns), the shortest
    /// where several are: what a pointer at `t` points at.
    pub fn at(&self, row: u32, t: f64, tol: f64) -> Option<&DrawSlice> {
        self.slices
            .iter()
            .filter(|s| {
                s.row == row
                    && (s.start_ns as f64) <= t + tol
                    && ((s.start_ns + s.dur_ns) as f64) >= t - tol
            })
            .min_by_key(|s| s.dur_ns)
    }

    /// Which of the names a highlight query matches (see [`matches`]).
    pub fn hits(&self, terms: &[String]) -> Vec<bool> {
        self.names
            .iter()
            .map(|n| matches(terms, &n.lower))
            .collect()
    }
}

/// Where a track's slices go on the canvas.
#[derive(Clone, Copy)]
pub struct Place {
    /// The visible span, in the view's clock.
    pub view: View,
    /// Width of the plot (right of the gutter), px.
    pub width: f64,
    /// y of the track's first row, px.
    pub top: f64,
    /// Height of a row, px.
    pub row_h: f64,
    /// Subtracted from a slice's trace time to get the view's clock (the
    /// anchor of a stacked view; 0 on the timeline tab).
    pub offset: f64,
}

impl Place {
    /// x in the plot of a trace time.
    pub fn x(&self, t_ns: f64) -> f64 {
        self.view.x_of(t_ns - self.offset, self.width)
    }
}

/// A slice as drawn, for the stacked views' scripted tests: which, where.
pub struct Drawn {
    /// The slice's event.
    pub event: u32,
    /// Its name index.
    pub name: u32,
    /// Left edge in the plot, px.
    pub x0: f64,
    /// Right edge, px.
    pub x1: f64,
    /// Its duration, ns.
    pub dur_ns: i64,
    /// Events merged.
    pub count: u32,
}

/// Draws a track's slices: merged blocks shaded by how busy they are,
/// `hits` in the highlight colour, `selected` outlined, names where they
/// fit. Calls `on_hit` for each highlighted slice drawn.
pub fn slices(
    ctx: &Ctx,
    f: &Fetched,
    p: &Place,
    rows: u32,
    hits: &[bool],
    selected: Option<u32>,
    mut on_hit: impl FnMut(Drawn),
) {
    let pw = p.width;
    let mut last_x = vec![-1.0f64; rows as usize + 1];
    for s in &f.slices {
        let x0 = p.x(s.start_ns as f64);
        let x1 = p.x((s.start_ns + s.dur_ns.max(1)) as f64);
        if x1 < 0.0 || x0 > pw {
            continue;
        }
        let (x0, x1) = (x0.max(0.0), x1.min(pw));
        let wpx = (x1 - x0).max(1.0);
        // A slice on a pixel already drawn adds nothing.
        let Some(lx) = last_x.get_mut(s.row as usize) else {
            continue;
        };
        let hit = hits.get(s.name as usize).copied().unwrap_or(false);
        if x0 + wpx <= *lx + 1.0 && wpx <= 1.0 && !hit {
            continue;
        }
        *lx = x0 + wpx;
        let name = &f.names[s.name as usize];
        let y = p.top + s.row as f64 * p.row_h;
        let alpha = if s.count > 1 {
            busy_alpha(s.busy_ns, s.dur_ns)
        } else {
            1.0
        };
        ctx.set_global_alpha(alpha);
        ctx.set_fill_style_str(if hit { HIGHLIGHT } else { &name.color });
        ctx.fill_rect(GUTTER + x0, y + 1.0, wpx, p.row_h - 2.0);
        ctx.set_global_alpha(1.0);
        if hit {
            ctx.set_stroke_style_str(HIGHLIGHT_EDGE);
            ctx.stroke_rect(GUTTER + x0, y + 1.0, wpx, p.row_h - 2.0);
            on_hit(Drawn {
                event: s.event,
                name: s.name,
                x0,
                x1: x0 + wpx,
                dur_ns: s.dur_ns,
                count: s.count,
            });
        }
        if selected.is_some_and(|e| e == s.event && s.count == 1) {
            ctx.set_stroke_style_str(&ink());
            ctx.stroke_rect(GUTTER + x0, y + 1.0, wpx, p.row_h - 2.0);
        }
        if wpx > 50.0 && p.row_h >= 12.0 {
            ctx.set_fill_style_str(if hit { "#111" } else { "#fff" });
            let label = if s.count > 1 {
                format!("{} (+{})", name.name, s.count - 1)
            } else {
                name.name.clone()
            };
            let max_chars = (wpx / 6.5) as usize;
            let text: String = label.chars().take(max_chars).collect();
            let _ = ctx.fill_text(&text, GUTTER + x0 + 2.0, y + p.row_h - 5.0);
        }
    }
}

/// A colour of the page's theme: a CSS custom property of the root, as
/// `style/` sets it for the light and the dark theme, so that canvas text
/// reads as the page's text does (a fixed grey was about 1.5:1 on the dark
/// theme's panels).
pub fn theme_color(var: &str, fallback: &str) -> String {
    let read = || -> Option<String> {
        let w = web_sys::window()?;
        let root = w.document()?.document_element()?;
        let v = w
            .get_computed_style(&root)
            .ok()??
            .get_property_value(var)
            .ok()?;
        let v = v.trim();
        (!v.is_empty()).then(|| v.to_string())
    };
    read().unwrap_or_else(|| fallback.to_string())
}

/// The theme's muted text colour (labels, ticks).
pub fn muted() -> String {
    theme_color("--muted", "#888")
}

/// The theme's text colour (the selected slice's outline).
pub fn ink() -> String {
    theme_color("--text", "#000")
}

/// The ruler along the top: ticks 1-2-5 apart, labelled from `origin_ns`
/// (in the view's clock).
pub fn ruler(ctx: &Ctx, v: View, pw: f64, ruler_h: f64, origin_ns: f64) {
    let step = tick_step(v.span(), pw, 110.0);
    // Ticks at round distances from the origin, so labels read 0, 2 ms, ...
    let mut k = ((v.start - origin_ns) / step).ceil();
    ctx.set_fill_style_str(&muted());
    loop {
        let t = origin_ns + k * step;
        if t >= v.end {
            break;
        }
        let x = GUTTER + v.x_of(t, pw);
        ctx.fill_rect(x, ruler_h - 6.0, 1.0, 6.0);
        // k * step, not t - origin (no rounding), and + 0.0 turns -0 into 0.
        let _ = ctx.fill_text(&tick_label(k * step + 0.0, step), x + 2.0, 12.0);
        k += 1.0;
    }
}

/// A band of spans (steps, layers) at `y`: each span from `span(k)` (plot
/// px), coloured by `color(k)`, labelled by `text(k)` where it fits.
#[allow(clippy::too_many_arguments)]
pub fn band(
    ctx: &Ctx,
    pw: f64,
    y: f64,
    label: &str,
    n: usize,
    span: &dyn Fn(usize) -> (f64, f64),
    color: &dyn Fn(usize) -> &'static str,
    text: &dyn Fn(usize) -> String,
) {
    ctx.set_fill_style_str(&muted());
    let _ = ctx.fill_text(label, 4.0, y + 11.0);
    for k in 0..n {
        let (x0, x1) = span(k);
        if x1 < 0.0 || x0 > pw {
            continue;
        }
        let (x0, x1) = (x0.max(0.0), x1.min(pw));
        ctx.set_fill_style_str(color(k));
        ctx.fill_rect(GUTTER + x0, y + 1.0, (x1 - x0).max(1.0), BAND_H - 2.0);
        // Labels are made only for spans wide enough to show one.
        if x1 - x0 > 40.0 {
            ctx.set_fill_style_str("#fff");
            let _ = ctx.fill_text(&text(k), GUTTER + x0 + 2.0, y + 11.0);
        }
    }
}

/// A timeline's steps band at `y` and its layers band below, placed by `p`.
pub fn steps_and_layers(ctx: &Ctx, info: &kinetoscope_types::TimelineInfo, p: &Place, y: f64) {
    let (steps, layers) = (&info.steps, &info.layers);
    band(
        ctx,
        p.width,
        y,
        "steps",
        steps.len(),
        &|k| (p.x(steps[k].start_ns as f64), p.x(steps[k].end_ns as f64)),
        &alternate,
        &|k| steps[k].name.clone(),
    );
    band(
        ctx,
        p.width,
        y + BAND_H,
        "layers",
        layers.len(),
        &|k| (p.x(layers[k].start_ns as f64), p.x(layers[k].end_ns as f64)),
        &alternate,
        &|k| format!("L{}", layers[k].index),
    );
}

/// The band colours: alternating so neighbours stay apart.
pub fn alternate(k: usize) -> &'static str {
    if k.is_multiple_of(2) {
        "#4c78a8"
    } else {
        "#72a0cf"
    }
}

/// The 2D context of a canvas `w` x `h` CSS pixels, cleared, with the font
/// set. Its backing store has the screen's device pixels
/// (`devicePixelRatio`), so text and edges are sharp on a high-density
/// screen; drawing is in CSS pixels all the same.
pub fn context(cv: &web_sys::HtmlCanvasElement, w: f64, h: f64) -> Option<Ctx> {
    use wasm_bindgen::JsCast;
    let dpr = web_sys::window()
        .map_or(1.0, |w| w.device_pixel_ratio())
        .clamp(1.0, 4.0);
    cv.set_width((w * dpr).round() as u32);
    cv.set_height((h * dpr).round() as u32);
    let style = cv.style();
    let _ = style.set_property("width", &format!("{w}px"));
    let _ = style.set_property("height", &format!("{h}px"));
    let ctx = cv.get_context("2d").ok()??.dyn_into::<Ctx>().ok()?;
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    ctx.clear_rect(0.0, 0.0, w, h);
    ctx.set_font("11px sans-serif");
    Some(ctx)
}

/// The least height of a timeline canvas, px: room for the ruler, the
/// bands and a few lanes, so a trace with one lane still has a plot to
/// wheel over.
pub const MIN_CANVAS_H: f64 = 160.0;

/// Keeps `width` (a canvas's CSS width) fitted to the box that holds the
/// canvas (its parent, `.timeline-canvas-wrap`), now and whenever that box
/// changes size (a `ResizeObserver`), for as long as the calling component
/// lives. Sized from the box, not the window: at 1920 px the page's
/// `main` is narrower than the window, and a canvas sized from the window
/// hid its last 320 px (issue 45). The timeline tab and the stacked views
/// share it.
pub fn fit_to_container(
    width: leptos::prelude::RwSignal<f64>,
    canvas: leptos::prelude::NodeRef<leptos::html::Canvas>,
) {
    use leptos::prelude::*;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;
    let observer: StoredValue<Option<web_sys::ResizeObserver>, LocalStorage> =
        StoredValue::new_local(None);
    let fit = move |w: f64| {
        if w > 0.0 {
            let w = w.floor().clamp(320.0, 8000.0);
            if (width.get_untracked() - w).abs() >= 1.0 {
                width.set(w);
            }
        }
    };
    Effect::new(move |_| {
        let Some(cv) = canvas.get() else { return };
        let Some(parent) = cv.parent_element() else {
            return;
        };
        if observer.with_value(|o| o.is_some()) {
            return;
        }
        fit(parent.client_width() as f64);
        let cb = Closure::<dyn Fn(js_sys::Array)>::new(move |entries: js_sys::Array| {
            if let Ok(e) = entries.get(0).dyn_into::<web_sys::ResizeObserverEntry>() {
                fit(e.target().client_width() as f64);
            }
        });
        if let Ok(ro) = web_sys::ResizeObserver::new(cb.as_ref().unchecked_ref()) {
            ro.observe(&parent);
            observer.set_value(Some(ro));
        }
        // The observer holds the callback for the page's life.
        cb.forget();
    });
    on_cleanup(move || {
        if let Some(ro) = observer.try_get_value().flatten() {
            ro.disconnect();
        }
    });
}
