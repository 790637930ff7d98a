//! Kinetoscope's dashboard: a Leptos client-side app.
//!
//! - [`logic`]: sorting, filtering, grouping, colours, URLs (pure, tested).
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
pub mod logic;
pub mod pages;
pub mod paint;
pub mod timeline;
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
