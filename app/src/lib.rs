//! Kinetoscope's dashboard: a Leptos client-side app.
//!
//! - [`logic`] and [`timeline`]: the pure view logic (sorting, filtering,
//!   grouping, colours, URLs, axes; the timeline's zoom and fetch plan), in
//!   the `kinetoscope-view` crate so it is tested without building Leptos.
//! - [`api`]: calls to the server, the upload with progress.
//! - [`widgets`]: small shared pieces (bars, badges, sortable headers).
//! - [`charts`]: SVG charts drawn from the summary.
//! - [`pages`]: the runs list, a run, a diff.
//!
//! Every view's state is in its URL (`?tab=ops&sort=self_device&q=copy`), so
//! any view can be pasted to a teammate. Names from traces are only ever
//! inserted as text, never as HTML.

pub mod api;
pub mod charts;
pub use kinetoscope_view::logic;
pub mod pages;
pub mod paint;
pub use kinetoscope_view::timeline;
pub mod viewport;
pub mod widgets;

use leptos::prelude::*;
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

/// Mounts the app on the page's body.
pub fn start() {
    console_error_panic_hook::set_once();
    // When the WASM started, for the page-timing benchmark.
    if let Some(w) = web_sys::window() {
        if let Some(p) = w.performance() {
            let _ = js_sys::Reflect::set(&w, &"__kinetoscopeStart".into(), &p.now().into());
        }
    }
    leptos::mount::mount_to_body(App);
}

/// The app: a header and the routed pages.
#[component]
pub fn App() -> impl IntoView {
    view! {
        <Router>
            <header class="top">
                <a class="brand" href="/">"Kinetoscope"</a>
                <span class="tagline">"PyTorch profiler traces, read in seconds"</span>
                <span class="spacer"></span>
                <TokenField/>
                <ThemeToggle/>
            </header>
            <main>
                <Routes fallback=|| view! { <p class="empty">"No such page. " <a href="/">"Back to the runs"</a></p> }>
                    <Route path=path!("/") view=pages::runs::RunsPage/>
                    <Route path=path!("/runs/:id") view=pages::run::RunPage/>
                    <Route path=path!("/diff/:a/:b") view=pages::diff::DiffPage/>
                </Routes>
            </main>
        </Router>
    }
}

/// The token field: on a server in tokens mode (or a private one) the
/// dashboard sends the token given here with each request. Kept in the
/// tab's session storage; empty forgets it.
#[component]
fn TokenField() -> impl IntoView {
    let initial = api::token().unwrap_or_default();
    let saved = RwSignal::new(!initial.is_empty());
    let on_change = move |ev: leptos::ev::Event| {
        let value = event_target_value(&ev);
        api::set_token(&value);
        saved.set(!value.trim().is_empty());
    };
    view! {
        <label class="token" title="A token from `kinetoscope token create`, for a server that needs one; kept in this tab only">
            <span class="muted">{move || if saved.get() { "Token ✓" } else { "Token" }}</span>
            <input id="token" type="password" autocomplete="off" aria-label="Access token" placeholder="kst_…" value=initial on:change=on_change/>
        </label>
    }
}

/// Switches between light and dark, remembered in local storage.
#[component]
fn ThemeToggle() -> impl IntoView {
    let toggle = move |_| {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        let Some(root) = doc.document_element() else {
            return;
        };
        // index.html always sets the attribute (saved choice or system preference).
        let next = if root.get_attribute("data-theme").as_deref() == Some("dark") {
            "light"
        } else {
            "dark"
        };
        let _ = root.set_attribute("data-theme", next);
        if let Some(s) = web_sys::window().and_then(|w| w.local_storage().ok().flatten()) {
            let _ = s.set_item("kinetoscope-theme", next);
        }
    };
    view! { <button class="ghost" title="Light or dark theme" on:click=toggle>"◐ Theme"</button> }
}
