//! One viewport controller for every canvas timeline: the timeline tab and
//! the stacked views (the diff's aligned timeline, every rank of a run)
//! pan, zoom, follow keys, drag, show tooltips and write their view into
//! the URL through it, so the two behave alike and a fix lands in both.
//! The geometry it applies is the pure `timeline` module's (`wheel`, `key`,
//! `View::pan`); what each page draws and hit-tests stays its own.

use crate::paint;
use crate::timeline::{key, wheel, View, GUTTER};
use crate::widgets::UrlState;
use leptos::prelude::*;
use std::time::Duration;

/// How far (px) the pointer may move between press and release for the
/// release to count as a click rather than a drag.
const CLICK_SLOP_PX: f64 = 3.0;

/// How long the view must rest before its windows are fetched: a wheel
/// burst sends an event every 8-16 ms, and fetching for each asked for the
/// same lanes 2-3 times per event (issue 45); 60 ms is under a frame pair,
/// so a settled view still fills in at once.
const SETTLE: Duration = Duration::from_millis(60);

/// How often at most the view is written into the URL: writing it on every
/// frame of a zoom would make the router work each frame.
const URL_EVERY: Duration = Duration::from_millis(300);

/// The pan and zoom state of one canvas over one clock; see the module
/// docs. Cheap to copy: every part is an arena handle.
#[derive(Clone, Copy)]
pub struct Viewport {
    /// The span shown; `None` until the clock is known.
    pub view: RwSignal<Option<View>>,
    /// The canvas's CSS width, fitted to the box that holds it.
    pub width: RwSignal<f64>,
    /// What the pointer is over: (x, y, text).
    pub tooltip: RwSignal<Option<(f64, f64, String)>>,
    /// The clock's bounds, which the view is kept inside.
    bounds: StoredValue<(f64, f64)>,
    /// A press's x and the view then, until just after its release.
    drag: StoredValue<Option<(f64, View)>>,
    /// Whether a write of the view into the URL is waiting.
    url_pending: StoredValue<bool>,
}

impl Viewport {
    /// A viewport with no view yet, its canvas fitted to the box that holds
    /// it (now and on every resize, for as long as the calling component
    /// lives).
    pub fn new(canvas: NodeRef<leptos::html::Canvas>) -> Viewport {
        let vp = Viewport {
            view: RwSignal::new(None),
            width: RwSignal::new(1200.0),
            tooltip: RwSignal::new(None),
            bounds: StoredValue::new((0.0, 1.0)),
            drag: StoredValue::new(None),
            url_pending: StoredValue::new(false),
        };
        paint::fit_to_container(vp.width, canvas);
        vp
    }

    /// Sets the clock's bounds.
    pub fn set_bounds(&self, lo: f64, hi: f64) {
        self.bounds.set_value((lo, hi));
    }

    /// The clock's bounds.
    pub fn bounds(&self) -> (f64, f64) {
        self.bounds.get_value()
    }

    /// The view (tracked), or the whole clock before there is one.
    pub fn get(&self) -> View {
        let (lo, hi) = self.bounds();
        self.view.get().unwrap_or(View { start: lo, end: hi })
    }

    /// The view, untracked.
    pub fn get_untracked(&self) -> View {
        let (lo, hi) = self.bounds();
        self.view
            .get_untracked()
            .unwrap_or(View { start: lo, end: hi })
    }

    /// Shows `v`, kept inside the clock.
    pub fn set(&self, v: View) {
        let (lo, hi) = self.bounds();
        self.view.set(Some(v.clamped(lo, hi)));
    }

    /// The plot's width: the canvas less its label gutter, px.
    pub fn plot_w(&self) -> f64 {
        (self.width.get_untracked() - GUTTER).max(100.0)
    }

    /// The wheel zooms around the time under the pointer; shift, or a
    /// mostly sideways wheel, pans.
    pub fn on_wheel(&self, ev: &web_sys::WheelEvent) {
        ev.prevent_default();
        let Some(v) = self.view.get_untracked() else {
            return;
        };
        let (lo, hi) = self.bounds();
        let x = ev.offset_x() as f64 - GUTTER;
        self.view.set(Some(wheel(
            v,
            ev.delta_x(),
            ev.delta_y(),
            ev.shift_key(),
            x,
            self.plot_w(),
            lo,
            hi,
        )));
    }

    /// A press starts a drag.
    pub fn on_down(&self, ev: &web_sys::MouseEvent) {
        if let Some(v) = self.view.get_untracked() {
            self.drag.set_value(Some((ev.offset_x() as f64, v)));
        }
    }

    /// Pans while the button is held: true then; false when the pointer
    /// only moves (the page then hit-tests for its tooltip).
    pub fn on_move(&self, ev: &web_sys::MouseEvent) -> bool {
        if ev.buttons() & 1 != 1 {
            return false;
        }
        if let Some((x0, v0)) = self.drag.get_value() {
            let (lo, hi) = self.bounds();
            let dt = (x0 - ev.offset_x() as f64) / self.plot_w() * v0.span();
            self.view.set(Some(v0.pan(dt, lo, hi)));
        }
        true
    }

    /// A release ends the drag, after the click handler has seen it.
    pub fn on_up(&self) {
        let drag = self.drag;
        set_timeout(move || drag.set_value(None), Duration::from_millis(0));
    }

    /// Whether the press that ends at `x` moved far enough to be a drag (a
    /// click handler then does nothing).
    pub fn dragged(&self, x: f64) -> bool {
        self.drag
            .get_value()
            .is_some_and(|(x0, _)| (x0 - x).abs() > CLICK_SLOP_PX)
    }

    /// W/S zoom, A/D pan; other keys are the page's.
    pub fn on_key(&self, ev: &web_sys::KeyboardEvent) {
        let Some(v) = self.view.get_untracked() else {
            return;
        };
        let (lo, hi) = self.bounds();
        if let Some(next) = key(v, &ev.key(), lo, hi) {
            ev.prevent_default();
            self.view.set(Some(next));
        }
    }

    /// Calls `fetch` with the view once it has settled: [`SETTLE`] after
    /// the last change (and after any change of what `track` reads), not on
    /// every wheel event of a burst. The first view is fetched at once.
    pub fn when_settled(&self, track: impl Fn() + 'static, fetch: impl Fn(View) + Clone + 'static) {
        let vp = *self;
        let generation = StoredValue::new(0u64);
        Effect::new(move |_| {
            let Some(v) = vp.view.get() else { return };
            track();
            let g = generation.get_value() + 1;
            generation.set_value(g);
            if g == 1 {
                fetch(v);
                return;
            }
            let fetch = fetch.clone();
            set_timeout(
                move || {
                    if generation.try_get_value() == Some(g) {
                        if let Some(v) = vp.view.get_untracked() {
                            fetch(v);
                        }
                    }
                },
                SETTLE,
            );
        });
    }

    /// Writes the view into the URL (`start_ns`, `end_ns`) as it changes, at
    /// most every [`URL_EVERY`], replacing the history entry.
    pub fn follow_in_url(&self, url: UrlState) {
        let vp = *self;
        Effect::new(move |_| {
            if vp.view.get().is_none() || vp.url_pending.get_value() {
                return;
            }
            vp.url_pending.set_value(true);
            set_timeout(
                move || {
                    vp.url_pending.set_value(false);
                    if let Some(v) = vp.view.get_untracked() {
                        url.set(
                            &[
                                ("start_ns", format!("{}", v.start.round() as i64)),
                                ("end_ns", format!("{}", v.end.round() as i64)),
                            ],
                            true,
                        );
                    }
                },
                URL_EVERY,
            );
        });
    }
}

/// The windows a canvas has fetched, by key (a track; a side and a track),
/// with the rule for what to fetch again and which answers to keep: an
/// answer is kept only while it is the latest request for its key, and a
/// failed fetch is reported (`error`) instead of leaving the old picture
/// silently. Shared by the timeline tab and the stacked views.
pub struct WindowCache<K: 'static> {
    /// The windows drawn, by key.
    pub data: RwSignal<std::collections::HashMap<K, std::sync::Arc<crate::paint::Fetched>>>,
    /// Why the last fetch failed, until one succeeds.
    pub error: RwSignal<Option<String>>,
    requests: StoredValue<crate::timeline::Latest<K>>,
}

impl<K: 'static> Clone for WindowCache<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: 'static> Copy for WindowCache<K> {}

impl<K> WindowCache<K>
where
    K: std::hash::Hash + Eq + Copy + Send + Sync + 'static,
{
    /// An empty cache.
    pub fn new() -> Self {
        WindowCache {
            data: RwSignal::new(std::collections::HashMap::new()),
            error: RwSignal::new(None),
            requests: StoredValue::new(crate::timeline::Latest::default()),
        }
    }

    /// Whether the window held for `key` already serves view `v` at plot
    /// width `w` (`timeline::covers`).
    pub fn covers(&self, key: &K, v: View, w: f64) -> bool {
        self.data.with_untracked(|d| {
            d.get(key)
                .is_some_and(|f| crate::timeline::covers((f.res, f.start, f.end), v, w))
        })
    }

    /// Fetches the window at `target` (its `res`, `start` and `end`) for
    /// `key`, and keeps it if no newer request for `key` was made meanwhile.
    pub fn request(&self, key: K, target: String, res: f64, start: i64, end: i64) {
        let (data, error, requests) = (self.data, self.error, self.requests);
        let mut ticket = 0;
        requests.update_value(|r| ticket = r.ask(key));
        leptos::task::spawn_local(async move {
            let answer = crate::api::get::<kinetoscope_types::TimelineColumns>(&target).await;
            if !requests.with_value(|r| r.is_latest(&key, ticket)) {
                return;
            }
            match answer {
                Ok(win) => {
                    error.set(None);
                    data.update(|d| {
                        d.insert(
                            key,
                            std::sync::Arc::new(crate::paint::Fetched::from_columns(
                                res, start, end, win,
                            )),
                        );
                    });
                }
                Err(e) => error.set(Some(format!(
                    "a part of the timeline could not be loaded: {e}"
                ))),
            }
        });
    }
}

impl<K> Default for WindowCache<K>
where
    K: std::hash::Hash + Eq + Copy + Send + Sync + 'static,
{
    fn default() -> Self {
        WindowCache::new()
    }
}
