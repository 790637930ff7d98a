//! Small shared pieces of the pages.

use leptos::prelude::*;
use leptos_router::hooks::{use_location, use_navigate, use_query_map};
use leptos_router::NavigateOptions;

/// A share shown as a bar behind a number (0-100).
#[component]
pub fn ShareBar(
    /// The share, 0-100.
    pct: f64,
    /// The bar's colour (a CSS value); the theme's accent when absent.
    #[prop(optional)]
    color: Option<&'static str>,
) -> impl IntoView {
    let w = pct.clamp(0.0, 100.0);
    let style = match color {
        Some(c) => format!("width:{w:.1}%;background:{c}"),
        None => format!("width:{w:.1}%"),
    };
    view! {
        <span class="share">
            <span class="share-bar" style=style></span>
            <span class="share-text">{kinetoscope_types::units::pct(pct)}</span>
        </span>
    }
}

/// A run's status, with a progress bar while it is being analyzed.
#[component]
pub fn Status(
    /// The run's status word.
    status: String,
    /// Finer progress in words.
    #[prop(optional)]
    stage: String,
    /// Bytes parsed so far.
    #[prop(optional)]
    done: u64,
    /// Bytes to parse.
    #[prop(optional)]
    total: u64,
) -> impl IntoView {
    let busy = matches!(status.as_str(), "queued" | "analyzing" | "capturing");
    let frac = if total > 0 {
        done as f64 / total as f64
    } else {
        0.0
    };
    let label = if stage.is_empty() {
        status.clone()
    } else {
        format!("{status}: {stage}")
    };
    view! {
        <span class=format!("status status-{status}")>
            {label}
            {busy.then(|| view! {
                <span class="progress" title=format!("{:.0}%", frac * 100.0)>
                    <span class="progress-fill" style=format!("width:{:.1}%", frac * 100.0)></span>
                </span>
            })}
        </span>
    }
}

/// Sets the page's `<title>`: what it shows, then the product
/// ("baseline-run · Findings · Kinetoscope"), so tabs and history tell runs
/// apart. Parts that are empty are left out. A trace's text is set as
/// text (`document.title` is never parsed as markup).
pub fn set_title(parts: &[&str]) {
    let mut title: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    title.push("Kinetoscope");
    if let Some(doc) = web_sys::window().and_then(|w| w.document()) {
        doc.set_title(&title.join(" · "));
    }
}

/// Moves between tabs with the arrow keys, Home and End (the ARIA tabs
/// pattern): `keys` are the tabs shown in order, `now` the current one;
/// returns the tab to select, and focuses its button (`[data-tab=KEY]`).
pub fn tab_key(
    ev: &web_sys::KeyboardEvent,
    keys: &[&'static str],
    now: &str,
) -> Option<&'static str> {
    let at = keys.iter().position(|k| *k == now)?;
    let next = match ev.key().as_str() {
        "ArrowRight" => keys[(at + 1) % keys.len()],
        "ArrowLeft" => keys[(at + keys.len() - 1) % keys.len()],
        "Home" => keys[0],
        "End" => keys[keys.len() - 1],
        _ => return None,
    };
    ev.prevent_default();
    if let Some(el) = web_sys::window().and_then(|w| w.document()).and_then(|d| {
        d.query_selector(&format!("[role=tab][data-tab=\"{next}\"]"))
            .ok()
            .flatten()
    }) {
        use wasm_bindgen::JsCast;
        if let Ok(el) = el.dyn_into::<web_sys::HtmlElement>() {
            let _ = el.focus();
        }
    }
    Some(next)
}

/// Reads and updates the query string: every view state lives in the URL.
#[derive(Clone, Copy)]
pub struct UrlState {
    query: Memo<leptos_router::params::ParamsMap>,
    path: Memo<String>,
    navigate: Callback<(String, bool)>,
}

impl UrlState {
    /// Must be called in a component's body (it uses the router's hooks).
    pub fn new() -> Self {
        let navigate = use_navigate();
        UrlState {
            query: use_query_map(),
            path: use_location().pathname,
            navigate: Callback::new(move |(url, replace): (String, bool)| {
                navigate(
                    &url,
                    NavigateOptions {
                        replace,
                        scroll: false,
                        ..Default::default()
                    },
                )
            }),
        }
    }

    /// Goes to another page.
    pub fn go(&self, url: &str) {
        self.navigate.run((url.to_string(), false));
    }

    /// A query value, reactively.
    pub fn get(&self, key: &str) -> Option<String> {
        self.query.with(|q| q.get(key)).filter(|v| !v.is_empty())
    }

    /// A query value, without tracking it (read once, when a view starts).
    pub fn get_untracked(&self, key: &str) -> Option<String> {
        self.query
            .with_untracked(|q| q.get(key))
            .filter(|v| !v.is_empty())
    }

    /// The query string as it is now (`?a=1&b=2`, or empty), untracked: to
    /// carry a page's state to another path (the diff's swap).
    pub fn query_untracked(&self) -> String {
        self.query.get_untracked().to_query_string()
    }

    /// Sets query values (empty removes), replacing or pushing history.
    pub fn set(&self, updates: &[(&'static str, String)], replace: bool) {
        let mut q = self.query.get_untracked();
        for (k, v) in updates {
            if v.is_empty() {
                q.remove(k);
            } else {
                q.replace(*k, v.clone());
            }
        }
        let url = format!("{}{}", self.path.get_untracked(), q.to_query_string());
        self.navigate.run((url, replace));
    }
}

impl Default for UrlState {
    fn default() -> Self {
        Self::new()
    }
}

/// A table header that sorts by its column (state in the URL).
#[component]
pub fn SortHeader(
    /// The column's key in the URL (`sort=`).
    key: &'static str,
    /// The header text.
    label: &'static str,
    /// The page's URL state.
    url: UrlState,
    /// The column sorted by when the URL names none.
    default_sort: &'static str,
    /// Numbers sort descending first, text ascending.
    #[prop(optional)]
    numeric: bool,
) -> impl IntoView {
    let active = move || url.get("sort").as_deref().unwrap_or(default_sort) == key;
    let asc = move || url.get("dir").as_deref() == Some("asc");
    let click = move |_| {
        let now_active = url.get("sort").as_deref().unwrap_or(default_sort) == key;
        let now_asc = url.get("dir").as_deref() == Some("asc");
        // A new column sorts descending first (largest first), names ascending.
        let dir = if now_active {
            if now_asc {
                "desc"
            } else {
                "asc"
            }
        } else if key == "name" || key == "category" {
            "asc"
        } else {
            "desc"
        };
        url.set(
            &[
                ("sort", key.to_string()),
                ("dir", dir.to_string()),
                ("page", String::new()),
            ],
            true,
        );
    };
    let arrow = move || match (active(), asc()) {
        (true, true) => " ▲",
        (true, false) => " ▼",
        _ => "",
    };
    view! {
        <th class:num=numeric class:sorted=active data-sort=key on:click=click title="Sort">
            {label}{arrow}
        </th>
    }
}

/// Previous/next page controls.
#[component]
pub fn Pager(
    /// The page's URL state (`page=`).
    url: UrlState,
    /// Number of pages.
    pages: usize,
    /// Number of rows over all pages.
    rows: usize,
) -> impl IntoView {
    let page = move || {
        url.get("page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(1)
            .clamp(1, pages.max(1))
    };
    let at_first = move || page() <= 1;
    let at_last = move || page() >= pages;
    view! {
        <div class="pager">
            <button class="ghost" disabled=at_first
                on:click=move |_| url.set(&[("page", (page() - 1).to_string())], true)>"‹ Prev"</button>
            <span>{move || format!("page {} of {} ({} rows)", page(), pages, rows)}</span>
            <button class="ghost" disabled=at_last
                on:click=move |_| url.set(&[("page", (page() + 1).to_string())], true)>"Next ›"</button>
        </div>
    }
}

/// A monospace name, shortened in the middle, with the full name on hover.
#[component]
pub fn Name(
    /// The name shown (a kernel's short name, or the full name).
    name: String,
    /// Most characters shown; longer names are cut in the middle.
    #[prop(default = 90)]
    max: usize,
    /// The full name, shown on hover where `name` is a short one.
    #[prop(optional, into)]
    full: Option<String>,
) -> impl IntoView {
    let short = crate::logic::shorten(&name, max);
    let title = full.unwrap_or(name);
    view! { <span class="mono name" title=title>{short}</span> }
}
