//! `/`: the runs, the upload area and the capture form.

use crate::api;
use crate::logic::query_string;
use crate::widgets::{Status, UrlState};
use kinetoscope_types::units::time_us;
use kinetoscope_types::{CaptureRequest, Created, EngineInfo, RunList};
use leptos::prelude::*;
use leptos::task::spawn_local;
use std::time::Duration;
use wasm_bindgen::JsCast;

fn files_of(list: Option<web_sys::FileList>) -> Vec<web_sys::File> {
    match list {
        Some(l) => (0..l.length()).filter_map(|i| l.get(i)).collect(),
        None => Vec::new(),
    }
}

/// The runs page.
#[component]
pub fn RunsPage() -> impl IntoView {
    let url = UrlState::new();
    crate::widgets::set_title(&["Runs"]);
    let list = RwSignal::new(None::<Result<RunList, String>>);
    let tick = RwSignal::new(0u32);
    Effect::new(move |_| {
        tick.track();
        let qs = query_string(&[
            ("q".into(), url.get("q").unwrap_or_default()),
            ("tag".into(), url.get("tag").unwrap_or_default()),
            ("status".into(), url.get("status").unwrap_or_default()),
            ("baseline".into(), url.get("baseline").unwrap_or_default()),
            ("limit".into(), "200".into()),
        ]);
        spawn_local(async move {
            list.set(Some(api::get::<RunList>(&format!("/api/runs{qs}")).await));
        });
    });
    let handle =
        set_interval_with_handle(move || tick.update(|t| *t += 1), Duration::from_secs(3)).ok();
    on_cleanup(move || {
        if let Some(h) = handle {
            h.clear();
        }
    });
    let selected = RwSignal::new(Vec::<String>::new());
    let toggle = move |id: String| {
        selected.update(|s| {
            if let Some(k) = s.iter().position(|x| *x == id) {
                s.remove(k);
            } else {
                s.push(id);
                if s.len() > 2 {
                    s.remove(0);
                }
            }
        })
    };
    let compare = move |_| {
        let s = selected.get_untracked();
        if s.len() == 2 {
            url.go(&format!("/diff/{}/{}", s[0], s[1]));
        }
    };
    let rows = move || {
        match list.get() {
        None => view! { <tr><td colspan="7" class="empty">"Loading…"</td></tr> }.into_any(),
        Some(Err(e)) => view! { <tr><td colspan="7" class="error">{e}</td></tr> }.into_any(),
        Some(Ok(l)) if l.runs.is_empty() => {
            view! { <tr><td colspan="7" class="empty">"No runs yet: upload a trace above."</td></tr> }.into_any()
        }
        Some(Ok(l)) => l
            .runs
            .into_iter()
            .map(|r| {
                let id = r.id.clone();
                let id2 = r.id.clone();
                let checked = move || selected.with(|s| s.contains(&id2));
                view! {
                    <tr data-run=r.id.clone()>
                        <td><input type="checkbox" title="Select two runs to compare" aria-label=format!("Select {} to compare", r.name) prop:checked=checked
                            on:change=move |_| toggle(id.clone())/></td>
                        <td><a href=r.url.clone() class="run-link">{r.name.clone()}</a>
                            {r.baseline_of.iter().map(|b| view! {
                                <span class="tag baseline" title=format!("The current baseline of {b}: kinetoscope upload --compare-to baseline:{b}")>
                                    {format!("baseline: {b}")}
                                </span>
                            }).collect_view()}
                        </td>
                        <td>{r.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}</td>
                        <td class="nowrap">{r.created_at.replace('T', " ").trim_end_matches('Z').to_string()}</td>
                        <td><Status status=r.status.to_string() stage=r.stage.clone() done=r.progress_bytes total=r.total_bytes/></td>
                        <td class="num">{r.mean_step_us.map(time_us).unwrap_or_default()}</td>
                        <td class="finding-cell" title=r.top_finding.clone().unwrap_or_default()>
                            {r.error.clone().or(r.top_finding.clone()).unwrap_or_default()}
                        </td>
                    </tr>
                }
            })
            .collect_view()
            .into_any(),
    }
    };
    view! {
        <div class="grid2">
            <section class="panel"><h2>"Upload a trace"</h2><Uploader/></section>
            <section class="panel"><h2>"Capture from an engine"</h2><CaptureForm/></section>
        </div>
        <section class="panel">
            <div class="toolbar">
                <h2>"Runs"</h2>
                <input type="search" id="runs-search" aria-label="Search run names" placeholder="Search names" prop:value=move || url.get("q").unwrap_or_default()
                    on:input=move |ev| url.set(&[("q", event_target_value(&ev))], true)/>
                <input type="search" id="runs-tag" aria-label="Filter by tag" placeholder="Tag" prop:value=move || url.get("tag").unwrap_or_default()
                    on:input=move |ev| url.set(&[("tag", event_target_value(&ev))], true)/>
                <select id="runs-status" on:change=move |ev| url.set(&[("status", event_target_value(&ev))], true)
                    prop:value=move || url.get("status").unwrap_or_default()>
                    <option value="">"any status"</option>
                    <option value="done">"done"</option>
                    <option value="analyzing">"analyzing"</option>
                    <option value="queued">"queued"</option>
                    <option value="capturing">"capturing"</option>
                    <option value="failed">"failed"</option>
                </select>
                <label class="check" title="Only the runs that are the current baseline of a name">
                    <input type="checkbox" id="runs-baselines" prop:checked=move || url.get("baseline").is_some_and(|b| !b.is_empty())
                        on:change=move |ev| url.set(&[("baseline", if event_target_checked(&ev) { "*".to_string() } else { String::new() })], true)/>
                    " baselines"
                </label>
                <span class="spacer"></span>
                <button id="compare" disabled=move || selected.with(|s| s.len() != 2) on:click=compare>
                    {move || match selected.with(Vec::len) {
                        2 => {
                            // The first picked is the baseline (A), the second the patch (B).
                            let name = |id: &str| list.with(|l| match l {
                                Some(Ok(l)) => l.runs.iter().find(|r| r.id == id).map(|r| r.name.clone()),
                                _ => None,
                            }).unwrap_or_else(|| id.to_string());
                            let s = selected.get();
                            format!("Compare: {} (baseline) → {}", name(&s[0]), name(&s[1]))
                        }
                        n => format!("Select two to compare ({n}/2): the first is the baseline"),
                    }}
                </button>
            </div>
            <table class="runs">
                <thead><tr><th></th><th>"Name"</th><th>"Tags"</th><th>"Uploaded (UTC)"</th><th>"Status"</th><th class="num">"Mean step"</th><th>"Top finding"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </section>
    }
}

/// Drag-and-drop or pick files; shows bytes sent, then opens the new run.
#[component]
fn Uploader() -> impl IntoView {
    let url = UrlState::new();
    let name = RwSignal::new(String::new());
    let progress = RwSignal::new(None::<(f64, f64)>);
    let error = RwSignal::new(None::<String>);
    let dragging = RwSignal::new(false);
    let start = move |files: Vec<web_sys::File>| {
        if files.is_empty() {
            return;
        }
        error.set(None);
        progress.set(Some((0.0, files.iter().map(|f| f.size()).sum())));
        let result = api::upload(
            files,
            &name.get_untracked(),
            move |loaded, total| progress.set(Some((loaded, total))),
            move |r: Result<Created, String>| match r {
                Ok(c) => url.go(&c.url),
                Err(e) => {
                    progress.set(None);
                    error.set(Some(e));
                }
            },
        );
        if let Err(e) = result {
            progress.set(None);
            error.set(Some(e));
        }
    };
    let on_pick = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = ev.target().unwrap().unchecked_into();
        start(files_of(input.files()));
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        start(files_of(ev.data_transfer().and_then(|d| d.files())));
    };
    view! {
        <div id="upload" class="drop" class:dragging=move || dragging.get()
            on:dragover=move |ev| { ev.prevent_default(); dragging.set(true); }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop>
            <p>"Drop " <code>".json"</code> ", " <code>".json.gz"</code> " or " <code>".json.zst"</code>
               " files here (several files are the ranks of one run), or "
               <label class="button">"choose files"<input id="file-input" type="file" multiple accept=".json,.gz,.zst,application/json,application/gzip" on:change=on_pick/></label></p>
            <input type="text" id="upload-name" aria-label="Run name (optional)" placeholder="Run name (optional)" prop:value=move || name.get()
                on:input=move |ev| name.set(event_target_value(&ev))/>
            {move || progress.get().map(|(l, t)| {
                let frac = if t > 0.0 { l / t } else { 0.0 };
                view! {
                    <div class="upload-progress">
                        <progress id="upload-progress" max="1" value=frac></progress>
                        <span>{format!("{} of {} sent", kinetoscope_types::units::bytes(l), kinetoscope_types::units::bytes(t))}</span>
                    </div>
                }
            })}
            {move || error.get().map(|e| view! { <p class="error" id="upload-error">{e}</p> })}
        </div>
        <p class="hint">"Or from a shell: " <code>"curl --data-binary @trace.json.gz '"{api::origin()}"/api/runs?name=baseline'"</code></p>
    }
}

/// Asks the worker to profile a configured engine.
#[component]
fn CaptureForm() -> impl IntoView {
    let url = UrlState::new();
    let engines = RwSignal::new(None::<Result<Vec<EngineInfo>, String>>);
    spawn_local(
        async move { engines.set(Some(api::get::<Vec<EngineInfo>>("/api/engines").await)) },
    );
    let engine = RwSignal::new(String::new());
    let steps = RwSignal::new("30".to_string());
    let name = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let req = CaptureRequest {
            engine: engine.get_untracked(),
            num_steps: steps.get_untracked().trim().parse().unwrap_or(0),
            name: name.get_untracked(),
            ..Default::default()
        };
        busy.set(true);
        spawn_local(async move {
            match api::send::<_, Created>("POST", "/api/captures", &req).await {
                Ok(c) => url.go(&c.url),
                Err(e) => error.set(Some(e)),
            }
            busy.set(false);
        });
    };
    move || {
        match engines.get() {
        None => view! { <p class="empty">"Loading engines…"</p> }.into_any(),
        Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
        Some(Ok(list)) if list.is_empty() => view! {
            <p class="empty">"No engines are configured. An operator sets " <code>"KINETOSCOPE_ENGINES"</code>
            " (see the README) to let the worker profile a running SGLang or vLLM server and ingest every rank."</p>
        }
        .into_any(),
        Some(Ok(list)) => {
            if engine.get_untracked().is_empty() {
                engine.set(list[0].name.clone());
            }
            view! {
                <form id="capture" on:submit=submit class="capture">
                    <select id="capture-engine" on:change=move |ev| engine.set(event_target_value(&ev))>
                        {list.iter().map(|e| view! {
                            <option value=e.name.clone()>{format!("{} ({}, {} ranks){}", e.name, e.flavour, e.ranks, if e.reachable { "" } else { " — not answering" })}</option>
                        }).collect_view()}
                    </select>
                    <label>"Steps "<input id="capture-steps" type="number" min="1" prop:value=move || steps.get() on:input=move |ev| steps.set(event_target_value(&ev))/></label>
                    <input id="capture-name" type="text" aria-label="Run name" placeholder="Run name" prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                    <button type="submit" disabled=move || busy.get()>"Capture"</button>
                    {move || error.get().map(|e| view! { <p class="error">{e}</p> })}
                </form>
            }
            .into_any()
        }
    }
    }
}
