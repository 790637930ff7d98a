//! `/runs/{id}`: one run — header, findings, ops, kernels, steps, layers,
//! GPU time, ranks — with every tab, sort and filter in the URL.

use crate::api;
use crate::charts;
use crate::logic::{
    self, category_color, filter_kernels, filter_ops, group_by_shapes, pages, sort_kernels,
    sort_ops,
};
use crate::widgets::{Name, Pager, ShareBar, SortHeader, Status, UrlState};
use kinetoscope_types::units::{bytes, count, grouped, pct, rate_gbps, rate_tflops, time_us};
use kinetoscope_types::*;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_params_map;
use std::time::Duration;
use wasm_bindgen::prelude::*;

/// Rows per page in the long tables.
pub const PER_PAGE: usize = 100;

#[wasm_bindgen(inline_js = r#"
export function open_in_perfetto(url, title, authorization) {
  const origin = 'https://ui.perfetto.dev';
  // The trace goes to Perfetto as a buffer: its page gets neither this
  // page's URL (the run id is a read capability) nor a handle back to it.
  const win = window.open(origin + '/#!/', '_blank');
  if (!win) { alert('Allow pop-ups for this site to open the trace in Perfetto.'); return; }
  // What `noopener` does, keeping the handle the trace is posted through.
  try { win.opener = null; } catch (e) {}
  const headers = authorization ? { 'Authorization': authorization } : {};
  fetch(url, { headers: headers }).then(r => { if (!r.ok) throw new Error('download failed: ' + r.status); return r.arrayBuffer(); })
    .then(buffer => {
      const onMessage = (e) => {
        if (e.origin !== origin || e.data !== 'PONG') return;
        clearInterval(timer);
        window.removeEventListener('message', onMessage);
        win.postMessage({ perfetto: { buffer: buffer, title: title } }, origin);
      };
      window.addEventListener('message', onMessage);
      const timer = setInterval(() => win.postMessage('PING', origin), 50);
    })
    .catch(e => alert(e.message));
}
export function mark_ready() {
  requestAnimationFrame(() => { window.__kinetoscopeReady = performance.now(); });
}
"#)]
extern "C" {
    fn open_in_perfetto(url: &str, title: &str, authorization: &str);
    fn mark_ready();
}

const TABS: &[(&str, &str)] = &[
    ("findings", "Findings"),
    ("ops", "Ops"),
    ("kernels", "Kernels"),
    ("steps", "Steps"),
    ("layers", "Layers"),
    ("timeline", "Timeline"),
    ("gpu", "GPU time"),
    ("memory", "Memory"),
    ("ranks", "Ranks"),
];

/// The run page.
#[component]
pub fn RunPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.with(|p| p.get("id").unwrap_or_default()));
    let url = UrlState::new();
    let run = RwSignal::new(None::<Result<RunInfo, String>>);
    let data = RwSignal::new(None::<Result<SummaryView, String>>);
    let loaded = RwSignal::new(String::new());
    let tick = RwSignal::new(0u32);
    Effect::new(move |_| {
        tick.track();
        let id = id.get();
        spawn_local(async move {
            run.set(Some(api::get::<RunInfo>(&format!("/api/runs/{id}")).await));
        });
    });
    // A re-analysis started from this page (the actions' button, the layers
    // override): the run shows its new status at once, the status polls
    // start again, and the summary is read again once it is done.
    let generation = RwSignal::new(0u32);
    let polls = RwSignal::new(0u32);
    // The layers override's note outlives the body it is shown in: the body
    // is made anew when the re-analysis it started is read back.
    let note = RwSignal::new(None::<String>);
    provide_context(OverrideNote(note));
    provide_context(Reanalyzed(Callback::new(move |r: RunInfo| {
        generation.update(|g| *g += 1);
        polls.set(0);
        run.set(Some(Ok(r)));
    })));
    // While the run is queued or analyzing, ask for its status every 250 ms
    // for the first 20 s (most analyses end by then: the findings show as
    // soon as they exist), then every second.
    let handle = set_interval_with_handle(
        move || {
            let busy = run.with_untracked(|r| match r {
                Some(Ok(r)) => !r.status.is_final() || !r.stage.is_empty(),
                _ => true,
            });
            if !busy {
                return;
            }
            let n = polls.get_untracked() + 1;
            polls.set(n);
            if n <= 80 || n.is_multiple_of(4) {
                tick.update(|t| *t += 1);
            }
        },
        Duration::from_millis(250),
    )
    .ok();
    on_cleanup(move || {
        if let Some(h) = handle {
            h.clear();
        }
    });
    // The summary view, once the run is analyzed (again when the rank or the
    // analysis changes).
    Effect::new(move |_| {
        let Some(Ok(r)) = run.get() else { return };
        if r.status != RunStatus::Done {
            return;
        }
        let rank = url.get("rank").unwrap_or_else(|| "0".into());
        let key = format!(
            "{}:{rank}:{}:{}:{}",
            r.id,
            r.stage,
            r.progress_bytes,
            generation.get_untracked()
        );
        if loaded.get_untracked() == key {
            return;
        }
        loaded.set(key);
        if note.get_untracked().is_some() {
            note.set(Some(REANALYZED.into()));
        }
        let id = r.id.clone();
        spawn_local(async move {
            data.set(Some(
                api::get::<SummaryView>(&format!("/api/runs/{id}/view?rank={rank}")).await,
            ));
            mark_ready();
        });
    });

    // The page's title: the run's name and the tab.
    Effect::new(move |_| {
        let tab = url.get("tab").unwrap_or_default();
        let label = TABS
            .iter()
            .find(|(k, _)| *k == tab)
            .map_or("Findings", |(_, l)| *l);
        let name = run.with(|r| match r {
            Some(Ok(r)) => r.name.clone(),
            _ => id.get(),
        });
        crate::widgets::set_title(&[&name, label]);
    });

    let header = move || {
        run.get().map(|r| match r {
            Err(e) => view! { <p class="error">{e}</p> }.into_any(),
            Ok(r) => {
                let failed = r.error.clone().filter(|_| r.status == RunStatus::Failed);
                view! {
                    <div class="run-title">
                        <h1 id="run-name">{r.name.clone()}</h1>
                        <Status status=r.status.to_string() stage=r.stage.clone() done=r.progress_bytes total=r.total_bytes/>
                        {r.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}
                    </div>
                    {failed.map(|e| view! { <p class="error" id="run-error">"Analysis failed: " {e}</p> })}
                }
                .into_any()
            }
        })
    };

    view! {
        <section class="run" id="run-page">
            {header}
            {move || data.get().map(|d| match d {
                Err(e) => view! { <p class="error">{e}</p> }.into_any(),
                Ok(v) => view! { <RunBody v=v id=id.get_untracked() url=url/> }.into_any(),
            })}
        </section>
    }
}

/// The device's peaks, or why there are none.
fn device_peaks(d: &Device) -> String {
    match d.peaks_text() {
        p if p.is_empty() => format!("{}: not in the device table", d.name),
        p => p,
    }
}

/// Where a run's peaks come from, in words.
fn peak_source_words(source: PeakSource) -> &'static str {
    match source {
        PeakSource::Table => "peaks from the device table",
        PeakSource::Override => "peaks given for this analysis",
        PeakSource::Unknown => "not in the device table; give its peaks to compare against them",
    }
}

/// `21.5%`: a signature's share of the device's peak bandwidth, or of its
/// FLOP peak for a GEMM.
fn peak_share(bw: Option<f64>, flops: Option<f64>) -> String {
    bw.or(flops).map(pct).unwrap_or_default()
}

/// How a part of the run page reports a re-analysis it started: with the
/// run as the server answered (queued again).
#[derive(Clone, Copy)]
struct Reanalyzed(Callback<RunInfo>);

/// The note beside the layers override (the page keeps it).
#[derive(Clone, Copy)]
struct OverrideNote(RwSignal<Option<String>>);

/// The override's note while its re-analysis runs...
const REANALYZING: &str = "Re-analyzing with these settings; the page updates when done.";
/// ...and once the page shows it.
const REANALYZED: &str = "Re-analyzing with these settings… done: the page shows the new analysis.";

/// Starts a re-analysis of run `id` with `options`; on success the page
/// follows it (`reanalyzed`, the page's [`Reanalyzed`] taken from the
/// context by the calling component), on failure `error` says why.
fn start_reanalysis(
    reanalyzed: Option<Reanalyzed>,
    id: String,
    options: AnalysisOptions,
    error: RwSignal<Option<String>>,
) {
    spawn_local(async move {
        match api::send::<_, RunInfo>("POST", &format!("/api/runs/{id}/reanalyze"), &options).await
        {
            Ok(r) => {
                error.set(None);
                if let Some(Reanalyzed(follow)) = reanalyzed {
                    follow.run(r);
                }
            }
            Err(e) => error.set(Some(e)),
        }
    });
}

#[component]
fn RunBody(v: SummaryView, id: String, url: UrlState) -> impl IntoView {
    let s = &v.summary;
    let st = &s.steps_stats;
    let t = &s.trace;
    let rank = v.rank;
    let multi = v.ranks.len() > 1;
    let stats = view! {
        <dl class="stats">
            <div><dt>"Devices"</dt><dd>{t.devices.first().cloned().unwrap_or_else(|| "—".into())}{(t.devices.len() > 1).then(|| format!(" ×{}", t.devices.len()))}</dd></div>
            {s.device.as_ref().map(|d| view! {
                <div id="stat-device"><dt>"Peaks"</dt><dd title=format!("{}: {}", d.name, peak_source_words(d.source))>{device_peaks(d)}</dd></div>
            })}
            <div><dt>"Rank"</dt><dd>{match (t.rank, t.world_size) { (Some(r), Some(w)) => format!("{r} of {w}"), _ => "—".into() }}</dd></div>
            <div><dt>"Steps"</dt><dd id="stat-steps">{st.count}</dd></div>
            <div><dt>"Mean step"</dt><dd id="stat-mean">{if st.count > 0 { time_us(st.mean_us) } else { "—".into() }}</dd></div>
            <div><dt>"p90 step"</dt><dd>{if st.count > 0 { time_us(st.p90_us) } else { "—".into() }}</dd></div>
            <div><dt>"GPU busy"</dt><dd>{pct(s.gpu_time.busy_pct)}</dd></div>
            <div><dt>"Events"</dt><dd id="stat-events">{grouped(t.events)}</dd></div>
        </dl>
    };
    let ranks = v.ranks.clone();
    let rank_picker = multi.then(|| {
        view! {
            <label class="rank-picker">"Rank "
                <select id="rank-select" on:change=move |ev| url.set(&[("rank", event_target_value(&ev))], false)
                    prop:value=rank.to_string()>
                    {ranks.iter().map(|r| view! { <option value=r.to_string()>{r.to_string()}</option> }).collect_view()}
                </select>
            </label>
        }
    });
    // A memo: the body is rebuilt only when the tab changes, not on every
    // change of the query string (the timeline writes its view there).
    let tab_memo = Memo::new(move |_| url.get("tab").unwrap_or_else(|| "findings".into()));
    let tab = move || tab_memo.get();
    let all_ranks = Memo::new(move |_| url.get("ranks").as_deref() == Some("all"));
    let shown: Vec<(&'static str, &'static str)> = TABS
        .iter()
        .filter(|(k, _)| *k != "ranks" || v.cross_rank.is_some())
        .filter(|(k, _)| *k != "memory" || !v.summary.memory.is_empty())
        .copied()
        .collect();
    let keys: Vec<&'static str> = shown.iter().map(|(k, _)| *k).collect();
    let select = move |k: &str| url.set(&[("tab", k.to_string()), ("page", String::new())], false);
    let tabs = shown
        .iter()
        .map(|&(k, label)| {
            let keys = keys.clone();
            view! {
                <button class="tab" class:active=move || tab() == k data-tab=k id=format!("tab-{k}")
                    role="tab" aria-selected=move || (tab() == k).to_string() aria-controls="tab-body"
                    tabindex=move || if tab() == k { "0" } else { "-1" }
                    on:keydown=move |ev| if let Some(next) = crate::widgets::tab_key(&ev, &keys, &tab()) { select(next) }
                    on:click=move |_| select(k)>{label}</button>
            }
        })
        .collect_view();

    let actions = view! { <Actions id=id.clone() rank=rank name=id.clone() url=url/> };
    let v2 = v.clone();
    let id2 = id.clone();
    let body = move || {
        let v = v2.clone();
        match tab().as_str() {
            "ops" => view! { <OpsTab v=v id=id2.clone() url=url/> }.into_any(),
            "kernels" => view! { <KernelsTab v=v url=url/> }.into_any(),
            "steps" => steps_tab(&v.summary).into_any(),
            "layers" => view! { <LayersTab v=v id=id2.clone()/> }.into_any(),
            "timeline" if all_ranks.get() && v.ranks.len() > 1 => view! {
                <crate::pages::stacked::RanksTimeline id=id2.clone() ranks=v.ranks.clone()
                    straggler=v.cross_rank.as_ref().and_then(|c| c.slowest_rank) url=url/>
            }
            .into_any(),
            "timeline" => {
                view! { <crate::pages::timeline::TimelineTab id=id2.clone() rank=v.rank url=url artifacts=v.artifacts.clone() peak_gbps=v.summary.device.as_ref().and_then(|d| d.peak_gbps)/> }
                    .into_any()
            }
            "gpu" => gpu_tab(&v.summary).into_any(),
            "memory" => view! { <MemoryTab id=id2.clone() rank=v.rank url=url/> }.into_any(),
            "ranks" => ranks_tab(&v).into_any(),
            _ => findings_tab(&v, url).into_any(),
        }
    };
    let peaks = view! { <PeaksOverride id=id.clone() device=s.device.clone()/> };
    view! {
        {stats}
        <div class="toolbar">{rank_picker}{peaks}{actions}</div>
        <nav class="tabs" role="tablist" aria-label="Run views">{tabs}</nav>
        <div class="tab-body" id="tab-body" role="tabpanel" aria-labelledby=move || format!("tab-{}", tab())>{body}</div>
    }
}

/// The device's peaks, given by hand: for a GPU the table does not know,
/// or to measure against another. Re-analyzes the run with them.
#[component]
fn PeaksOverride(id: String, device: Option<Device>) -> impl IntoView {
    let gbps = RwSignal::new(
        device
            .as_ref()
            .and_then(|d| d.peak_gbps)
            .map(|v| v.to_string())
            .unwrap_or_default(),
    );
    let tflops = RwSignal::new(
        device
            .as_ref()
            .and_then(|d| d.peak_tflops_bf16)
            .map(|v| v.to_string())
            .unwrap_or_default(),
    );
    let failed = RwSignal::new(None::<String>);
    let sent = RwSignal::new(false);
    let reanalyzed = use_context::<Reanalyzed>();
    let apply = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let options = AnalysisOptions {
            peak_gbps: gbps.get_untracked().trim().parse::<f64>().ok(),
            peak_tflops: tflops.get_untracked().trim().parse::<f64>().ok(),
            ..Default::default()
        }
        .normalized();
        if let Err(e) = options.validate() {
            failed.set(Some(e));
            return;
        }
        sent.set(true);
        start_reanalysis(reanalyzed, id.clone(), options, failed);
    };
    view! {
        <details class="peaks-override" id="peaks-override">
            <summary>"Device peaks…"</summary>
            <form on:submit=apply>
                <label>"Bandwidth " <input type="number" id="peak-gbps" min="1" step="any" placeholder="GB/s"
                    prop:value=move || gbps.get() on:input=move |ev| gbps.set(event_target_value(&ev))/> " GB/s"</label>
                <label>"BF16 " <input type="number" id="peak-tflops" min="1" step="any" placeholder="TFLOP/s"
                    prop:value=move || tflops.get() on:input=move |ev| tflops.set(event_target_value(&ev))/> " TFLOP/s"</label>
                <button type="submit">"Re-analyze"</button>
                {move || failed.get().map(|e| view! { <span class="error">{e}</span> }.into_any())
                    .or_else(|| sent.get().then(|| view! { <span class="note">{REANALYZING}</span> }.into_any()))}
            </form>
        </details>
    }
}

#[component]
fn Actions(id: String, rank: i64, name: String, url: UrlState) -> impl IntoView {
    let copied = RwSignal::new(false);
    let id_copy = id.clone();
    let copy = move |_| {
        let loc = web_sys::window().map(|w| w.location());
        let href = loc
            .and_then(|l| l.href().ok())
            .unwrap_or_else(|| format!("{}/runs/{id_copy}", api::origin()));
        api::copy_to_clipboard(&href);
        copied.set(true);
    };
    let id_p = id.clone();
    let perfetto = move |_| {
        open_in_perfetto(
            &format!("/api/runs/{id_p}/trace?rank={rank}&for=perfetto"),
            &name,
            &api::authorization().unwrap_or_default(),
        )
    };
    let others = RwSignal::new(None::<Vec<RunInfo>>);
    let load_others = move || {
        if others.get_untracked().is_none() {
            spawn_local(async move {
                let list = api::get::<RunList>("/api/runs?status=done&limit=200")
                    .await
                    .map(|l| l.runs)
                    .unwrap_or_default();
                others.set(Some(list));
            });
        }
    };
    let id_c = id.clone();
    let compare = move |ev: leptos::ev::Event| {
        let other = event_target_value(&ev);
        if !other.is_empty() {
            url.go(&format!("/diff/{id_c}/{other}"));
        }
    };
    let id_r = id.clone();
    let reanalyze_error = RwSignal::new(None::<String>);
    let reanalyzed = use_context::<Reanalyzed>();
    let reanalyze = move |_| {
        start_reanalysis(
            reanalyzed,
            id_r.clone(),
            AnalysisOptions::default(),
            reanalyze_error,
        );
    };
    let id_o = id.clone();
    view! {
        <span class="actions">
            <button class="ghost" id="copy-link" on:click=copy>{move || if copied.get() { "Link copied" } else { "Copy share link" }}</button>
            <a class="button ghost" id="download" href=format!("/api/runs/{id}/trace?rank={rank}") download="">"Download trace"</a>
            <button class="ghost" id="perfetto" on:click=perfetto>"Open in Perfetto"</button>
            <select id="compare-with" on:focus=move |_| load_others() on:mousedown=move |_| load_others() on:change=compare>
                <option value="">"Compare with…"</option>
                {move || others.get().unwrap_or_default().into_iter().filter(|r| r.id != id_o).map(|r| {
                    view! { <option value=r.id.clone()>{format!("{} ({})", r.name, r.created_at)}</option> }
                }).collect_view()}
            </select>
            <button class="ghost" id="reanalyze" on:click=reanalyze title="Analyze the stored trace again">"Re-analyze"</button>
            {move || reanalyze_error.get().map(|e| view! { <span class="error" id="reanalyze-error">"Re-analyze failed: " {e}</span> })}
        </span>
    }
}

/// The Memory tab: per device, the curve with the steps shaded and the
/// peak marked, the allocations live at the peak, and what each op
/// signature allocates (from the memory artifact: never the trace).
#[component]
fn MemoryTab(id: String, rank: i64, url: UrlState) -> impl IntoView {
    use kinetoscope_types::units::bytes;
    use kinetoscope_types::MemoryReport;
    let report = RwSignal::new(None::<Result<MemoryReport, String>>);
    let path = format!("/api/runs/{id}/memory?rank={rank}");
    leptos::task::spawn_local(
        async move { report.set(Some(api::get::<MemoryReport>(&path).await)) },
    );
    move || {
        match report.get() {
        None => view! { <p class="empty">"Loading memory…"</p> }.into_any(),
        Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
        Some(Ok(r)) => r
            .devices
            .into_iter()
            .map(|d| {
                let live = d.live_at_peak.clone();
                let sigs = d.by_signature.clone();
                view! {
                    <section class="memory-device" data-device=d.device.clone()>
                        <h3>{format!("{}: peak {} allocated{}", d.device, bytes(d.peak_bytes as f64),
                            if d.reserved_peak_bytes > 0 { format!(", {} reserved", bytes(d.reserved_peak_bytes as f64)) } else { String::new() })}</h3>
                        {charts::memory_chart(&d)}
                        <h4>"Live at the peak"</h4>
                        <table class="data memory-live">
                            <thead><tr><th class="num">"Bytes"</th><th>"Made by"</th><th>"Input dims"</th><th>"Types"</th><th></th></tr></thead>
                            <tbody>{live.into_iter().map(|l| {
                                let op = l.op.clone();
                                view! {
                                    <tr title=l.python.join("\n")>
                                        <td class="num">{bytes(l.bytes as f64)}</td>
                                        <td class="mono">{if l.op.is_empty() { "(outside any op)".to_string() } else { l.op.clone() }}</td>
                                        <td class="mono">{l.shapes.clone()}</td>
                                        <td class="mono">{l.dtypes.clone()}</td>
                                        <td>{(!op.is_empty()).then(|| view! { <button class="link" on:click=move |_| show_on_timeline(url, &op)>"Show on timeline"</button> })}</td>
                                    </tr>
                                }
                            }).collect_view()}</tbody>
                        </table>
                        <h4>"What each op signature allocates"</h4>
                        <table class="data memory-signatures">
                            <thead><tr><th>"Op"</th><th>"Input dims"</th><th>"Types"</th><th class="num">"Calls"</th><th class="num">"Per call"</th><th class="num">"Per step"</th><th class="num">"Freed in the step"</th><th></th></tr></thead>
                            <tbody>{sigs.into_iter().take(100).map(|g| {
                                let op = g.op.clone();
                                view! {
                                    <tr>
                                        <td class="mono">{g.op.clone()}</td>
                                        <td class="mono">{g.shapes.clone()}</td>
                                        <td class="mono">{g.dtypes.clone()}</td>
                                        <td class="num">{g.calls}</td>
                                        <td class="num">{bytes(g.bytes_per_call)}</td>
                                        <td class="num">{bytes(g.bytes_per_step)}</td>
                                        <td class="num">{bytes(g.churn_bytes_per_step)}</td>
                                        <td><button class="link" on:click=move |_| show_on_timeline(url, &op)>"Show on timeline"</button></td>
                                    </tr>
                                }
                            }).collect_view()}</tbody>
                        </table>
                    </section>
                }
            })
            .collect_view()
            .into_any(),
    }
    }
}

/// Opens the timeline with a name highlighted and the view on its first
/// occurrence.
/// The kernel a finding speaks of: its own name (a kernel finding), or the
/// kernel that spends the most time launched by its op (an op finding:
/// the launch chains that hold the op, by their time).
fn kernel_of_finding(kernels: &[KernelRow], tab: FindingTab, name: &str) -> Option<String> {
    if tab == FindingTab::Kernels {
        return Some(name.to_string());
    }
    kernels
        .iter()
        .map(|k| (k.launched_from(name).1, k))
        .filter(|(t, _)| *t > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.name.clone())
}

/// Opens the timeline on a kernel: searched by its full name, its longest
/// call selected and the view fitted to it and its launch (`pick`).
fn kernel_on_timeline(url: UrlState, kernel: &str) {
    url.set(
        &[
            ("tab", "timeline".to_string()),
            ("q", kernel.to_string()),
            ("pick", "longest".to_string()),
            ("start_ns", String::new()),
            ("end_ns", String::new()),
            ("event", String::new()),
            ("page", String::new()),
        ],
        false,
    );
}

fn show_on_timeline(url: UrlState, name: &str) {
    url.set(
        &[
            ("tab", "timeline".to_string()),
            ("q", name.to_string()),
            ("start_ns", String::new()),
            ("end_ns", String::new()),
            ("event", String::new()),
            ("page", String::new()),
        ],
        false,
    );
}

fn findings_tab(v: &SummaryView, url: UrlState) -> impl IntoView {
    // Each root cause with its evidence under it: a finding whose `cause`
    // names another's place in the run's list goes under that one.
    let own = &v.summary.findings;
    let mut groups: Vec<(Finding, Vec<Finding>)> = v
        .cross_rank
        .as_ref()
        .map(|c| c.findings.iter().map(|f| (f.clone(), Vec::new())).collect())
        .unwrap_or_default();
    let mut at: Vec<Option<usize>> = vec![None; own.len()];
    for (i, f) in own.iter().enumerate() {
        match f.cause.and_then(|c| at.get(c as usize).copied().flatten()) {
            Some(g) => groups[g].1.push(f.clone()),
            None => {
                at[i] = Some(groups.len());
                groups.push((f.clone(), Vec::new()));
            }
        }
    }
    let notes = v.summary.trace.notes.clone();
    let kernels = std::sync::Arc::new(v.summary.kernels.clone());
    if groups.is_empty() {
        return view! { <p class="empty">"No findings: nothing stands out in this trace."</p>
        {notes.into_iter().map(|n| view! { <p class="note">{n}</p> }).collect_view()} }
        .into_any();
    }
    let links = move |f: &Finding, kernels: &std::sync::Arc<Vec<KernelRow>>| {
        let (tab, name) = (
            f.tab.unwrap_or_default(),
            f.name.clone().unwrap_or_default(),
        );
        let go = move |_| {
            let mut updates: Vec<(&'static str, String)> =
                vec![("tab", tab.as_str().to_string()), ("page", String::new())];
            match tab {
                FindingTab::Kernels => {
                    updates.push(("kernel", name.clone()));
                    updates.push(("q", String::new()));
                }
                FindingTab::Ops => updates.push(("q", name.clone())),
                _ => {}
            }
            url.set(&updates, false);
        };
        view! {
            {f.tab.is_some().then(|| view! { <button class="link" on:click=go>"Show ›"</button> })}
            {f.name.clone().filter(|_| matches!(f.tab, Some(FindingTab::Ops | FindingTab::Kernels))).map(|n| {
                let kernel = kernel_of_finding(kernels, tab, &n);
                view! {
                    <button class="link show-on-timeline" title="Select its costliest kernel call on the timeline, with its launch"
                        on:click=move |_| match &kernel { Some(k) => kernel_on_timeline(url, k), None => show_on_timeline(url, &n) }>"On timeline ›"</button>
                }
            })}
        }
    };
    view! {
        <ol class="findings" id="findings">
            {groups.into_iter().map(|(f, evidence)| {
                let lead_links = links(&f, &kernels);
                let grouped = !evidence.is_empty();
                view! {
                    <li class=format!("finding finding-{}", f.kind) class:cause=grouped>
                        <span class="impact" title="Impact: the share of the run's time this cause speaks of, weighted by how much of it could be won back; causes are ranked by it">
                            <span class="impact-value">{format!("{:.0}%", f.impact_pct)}</span>
                            <span class="impact-label">"impact"</span>
                        </span>
                        <span class="finding-text" class:lead=grouped>{f.text.clone()}</span>
                        {lead_links}
                        {grouped.then(|| view! {
                            <ul class="evidence" aria-label="Evidence">
                                {evidence.iter().map(|e| {
                                    let l = links(e, &kernels);
                                    view! { <li class=format!("finding-{}", e.kind)><span class="finding-text">{e.text.clone()}</span>{l}</li> }
                                }).collect_view()}
                            </ul>
                        })}
                    </li>
                }
            }).collect_view()}
        </ol>
        {notes.into_iter().map(|n| view! { <p class="note">{n}</p> }).collect_view()}
    }
    .into_any()
}

#[component]
fn OpsTab(v: SummaryView, id: String, url: UrlState) -> impl IntoView {
    let rows = RwSignal::new(v.summary.ops.clone());
    let total = v.ops_total as usize;
    let rank = v.rank;
    let loading = RwSignal::new(false);
    let load_all = move |_| {
        let id = id.clone();
        loading.set(true);
        spawn_local(async move {
            let mut all = Vec::new();
            loop {
                let page = api::get::<Page<OpRow>>(&format!(
                    "/api/runs/{id}/ops?rank={rank}&offset={}&limit=1000",
                    all.len()
                ))
                .await;
                match page {
                    Ok(p) if !p.items.is_empty() => {
                        all.extend(p.items);
                        if all.len() as u64 >= p.total {
                            break;
                        }
                    }
                    _ => break,
                }
            }
            if !all.is_empty() {
                rows.set(all);
            }
            loading.set(false);
        });
    };
    let grouped = move || url.get("group").as_deref() == Some("shapes");
    let shown = Memo::new(move |_| {
        let mut r = filter_ops(&rows.get(), &url.get("q").unwrap_or_default());
        let asc = url.get("dir").as_deref() == Some("asc");
        sort_ops(
            &mut r,
            &url.get("sort").unwrap_or_else(|| "self_device".into()),
            asc,
        );
        r
    });
    let page = move || {
        url.get("page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1)
    };
    let table = move || {
        let all = shown.get();
        if grouped() {
            let g = group_by_shapes(&all);
            let n = g.len();
            let p = page().min(pages(n, PER_PAGE));
            return view! {
                <table class="data" id="shapes-table">
                    <thead><tr><th>"Op"</th><th>"Input shapes"</th><th>"Types"</th><th class="num">"Calls"</th><th class="num">"Self CPU"</th><th class="num">"Self device"</th><th class="num">"Avg device"</th><th class="num">"Share"</th><th class="num">"Bytes/call"</th><th class="num">"Rate"</th><th class="num" title="Bandwidth (copies) or FLOP rate (GEMMs) as a share of the device's peak">"% of peak"</th><th class="num" title="Bytes per call at the device's peak bandwidth: the least a call can take">"Ideal"</th><th>"Launched from"</th></tr></thead>
                    <tbody>
                        {g.into_iter().skip((p - 1) * PER_PAGE).take(PER_PAGE).map(|r| view! {
                            <tr>
                                <td><Name name=r.op.clone() max=50/></td>
                                <td class="mono small">{r.group.shapes.clone()}</td>
                                <td class="mono small">{r.group.conversion.clone().unwrap_or_else(|| r.group.dtypes.replace("c10::", ""))}</td>
                                <td class="num">{r.group.calls}{r.group.calls_per_step.map(|c| view! { <span class="sub">{format!(" ({}/step)", count(c))}</span> })}</td>
                                <td class="num">{time_us(r.group.self_cpu_us)}</td>
                                <td class="num">{time_us(r.group.self_device_us)}</td>
                                <td class="num">{time_us(r.group.device_per_call_us())}</td>
                                <td class="num"><ShareBar pct=r.group.device_pct/></td>
                                <td class="num">{r.group.bytes_per_call.map(bytes).unwrap_or_default()}</td>
                                <td class="num">{r.group.achieved_gbps.map(rate_gbps).or_else(|| r.group.achieved_tflops.map(rate_tflops)).unwrap_or_default()}</td>
                                <td class="num peak">{peak_share(r.group.pct_of_peak_bw, r.group.pct_of_peak_flops)}</td>
                                <td class="num">{r.group.ideal_us.map(time_us).unwrap_or_default()}</td>
                                <td class="mono small" title=r.group.python.join("\n")>{r.group.parents.iter().filter(|p| !p.starts_with("ProfilerStep#")).cloned().collect::<Vec<_>>().join(" › ")}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                <Pager url=url pages=pages(n, PER_PAGE) rows=n/>
            }
            .into_any();
        }
        let n = all.len();
        let p = page().min(pages(n, PER_PAGE));
        view! {
            <table class="data" id="ops-table">
                <thead><tr>
                    {logic::OP_COLUMNS.iter().map(|(k, label)| view! {
                        <SortHeader key=*k label=*label url=url default_sort="self_device" numeric={*k != "name"}/>
                    }).collect_view()}
                </tr></thead>
                <tbody>
                    {all.into_iter().skip((p - 1) * PER_PAGE).take(PER_PAGE).map(|o| {
                        let avg = o.self_device_us / o.calls.max(1) as f64;
                        let shapes_title = o.input_shapes.first().map(|g| format!("{} {}", g.shapes, g.dtypes)).unwrap_or_default();
                        // Ops whose calls differ: the signature with the most device time.
                        let top_group = (o.input_shapes.len() > 1 && o.self_device_us > 0.0).then(|| o.input_shapes[0].clone());
                        view! {
                            <tr data-op=o.name.clone() title=shapes_title>
                                <td><Name name=o.name.clone() max=60/>{(o.kind != OpKind::Op).then(|| view! { <span class="kind">{o.kind.as_str()}</span> })}
                                    {(o.kind != OpKind::Graph).then(|| { let n = o.name.clone(); view! {
                                        <button class="link show-on-timeline" title="Show on timeline" aria-label=format!("Show {} on the timeline", n) on:click=move |_| show_on_timeline(url, &n)>"⇢"</button>
                                    } })}
                                    {top_group.map(|g| view! { <div class="sub group-hint">{format!("top inputs: {} {} ({}, {}/call)",
                                        g.conversion.clone().unwrap_or_default(), g.shapes, pct(g.device_pct), time_us(g.device_per_call_us()))}</div> })}</td>
                                <td class="num">{o.calls}{o.calls_per_step.map(|c| view! { <span class="sub">{format!(" ({}/step)", count(c))}</span> })}</td>
                                <td class="num">{time_us(o.self_cpu_us)}</td>
                                <td class="num">{time_us(o.cpu_total_us)}</td>
                                <td class="num">{time_us(o.self_device_us)}</td>
                                <td class="num">{time_us(o.device_total_us)}</td>
                                <td class="num">{time_us(avg)}</td>
                                <td class="num"><ShareBar pct=o.device_pct/></td>
                                <td class="num">{o.bytes_per_call.map(bytes).unwrap_or_default()}</td>
                                <td class="num">{o.achieved_gbps.map(rate_gbps).unwrap_or_default()}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <Pager url=url pages=pages(n, PER_PAGE) rows=n/>
        }
        .into_any()
    };
    view! {
        <div class="toolbar">
            <input type="search" id="ops-filter" aria-label="Filter op names" placeholder="Filter op names" prop:value=move || url.get("q").unwrap_or_default()
                on:input=move |ev| url.set(&[("q", event_target_value(&ev)), ("page", String::new())], true)/>
            <label><input type="checkbox" id="group-shapes" prop:checked=grouped
                on:change=move |_| url.set(&[("group", if grouped() { String::new() } else { "shapes".into() }), ("page", String::new())], true)/>" group by input shapes"</label>
            <span class="spacer"></span>
            {move || (rows.with(Vec::len) < total).then(|| view! {
                <button class="ghost" on:click=load_all.clone() disabled=move || loading.get()>
                    {format!("Showing the top {} of {} ops: load all", rows.with(Vec::len), total)}
                </button>
            })}
        </div>
        {table}
    }
}

#[component]
fn KernelsTab(v: SummaryView, url: UrlState) -> impl IntoView {
    let rows = v.summary.kernels.clone();
    let total = v.kernels_total;
    let shown = Memo::new(move |_| {
        let mut r = filter_kernels(&rows, &url.get("q").unwrap_or_default());
        let asc = url.get("dir").as_deref() == Some("asc");
        sort_kernels(
            &mut r,
            &url.get("sort").unwrap_or_else(|| "total".into()),
            asc,
        );
        r
    });
    let page = move || {
        url.get("page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1)
    };
    let selected = move || url.get("kernel");
    let chains = move || {
        let name = selected()?;
        let k = shown.with(|rows| rows.iter().find(|k| k.name == name).cloned())?;
        Some(view! {
            <div class="chains" id="launch-chains">
                <h3>"What launches " <Name name=k.short_name.clone() max=80/> "?"</h3>
                {let n = k.name.clone(); view! { <button class="ghost show-on-timeline" id="kernel-on-timeline" on:click=move |_| show_on_timeline(url, &n)>"Show on timeline"</button> }}
                <p class="mono small" title=k.name.clone()>{logic::shorten(&k.name, 300)}</p>
                <table class="data">
                    <thead><tr><th>"Python (innermost frames)"</th><th>"Launch chain (outermost › launching op)"</th><th>"Launch"</th><th class="num">"Calls"</th><th class="num">"Total"</th></tr></thead>
                    <tbody>
                        {k.launched_by.iter().map(|c| view! {
                            <tr class="chain">
                                <td class="mono small" title=c.python.join("\n")>{c.python.iter().rev().take(2).rev().cloned().collect::<Vec<_>>().join(" › ")}</td>
                                <td class="mono small">{if c.chain.is_empty() { "(outside any op)".to_string() } else { c.chain.join(" › ") }}</td>
                                <td class="mono small">{c.launch.clone()}</td>
                                <td class="num">{c.calls}</td>
                                <td class="num">{time_us(c.total_us)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                {(!k.groups.is_empty()).then(|| view! {
                    <h3>"By launch geometry"</h3>
                    <table class="data" id="kernel-groups">
                        <thead><tr><th>"Grid / block"</th><th class="num">"Calls"</th><th class="num">"Total"</th><th class="num">"Avg"</th><th class="num">"Share"</th><th>"Op and inputs"</th><th class="num">"Bytes/call"</th><th class="num">"Rate"</th><th class="num" title="Bandwidth (copies) or FLOP rate (GEMMs) as a share of the device's peak">"% of peak"</th><th class="num" title="Bytes per call at the device's peak bandwidth: the least a call can take">"Ideal"</th></tr></thead>
                        <tbody>
                            {k.groups.iter().map(|g| view! {
                                <tr class="kernel-group">
                                    <td class="mono small">{match (g.grid, g.block) { (Some(gr), Some(b)) => format!("{gr:?} / {b:?}"), _ => "—".into() }}</td>
                                    <td class="num">{g.calls}{g.calls_per_step.map(|c| view! { <span class="sub">{format!(" ({}/step)", count(c))}</span> })}</td>
                                    <td class="num">{time_us(g.total_us)}</td>
                                    <td class="num">{time_us(g.avg_us)}</td>
                                    <td class="num"><ShareBar pct=g.pct/></td>
                                    <td class="mono small">{format!("{} {} {}", g.op.clone().unwrap_or_default(), g.conversion.clone().unwrap_or_default(), g.shapes.clone().unwrap_or_default())}</td>
                                    <td class="num">{g.bytes_per_call.map(bytes).unwrap_or_default()}</td>
                                    <td class="num">{g.achieved_gbps.map(rate_gbps).or_else(|| g.achieved_tflops.map(rate_tflops)).unwrap_or_default()}</td>
                                    <td class="num peak">{peak_share(g.pct_of_peak_bw, g.pct_of_peak_flops)}</td>
                                    <td class="num">{g.ideal_us.map(time_us).unwrap_or_default()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                })}
                <button class="ghost" on:click=move |_| url.set(&[("kernel", String::new())], true)>"Close"</button>
            </div>
        })
    };
    let table = move || {
        let all = shown.get();
        let n = all.len();
        let p = page().min(pages(n, PER_PAGE));
        view! {
            <table class="data" id="kernels-table">
                <thead><tr>
                    {logic::KERNEL_COLUMNS.iter().map(|(k, label)| view! {
                        <SortHeader key=*k label=*label url=url default_sort="total" numeric={!matches!(*k, "name" | "category")}/>
                    }).collect_view()}
                    <th>"Grid / block"</th>
                </tr></thead>
                <tbody>
                    {all.into_iter().skip((p - 1) * PER_PAGE).take(PER_PAGE).map(|k| {
                        let name = k.name.clone();
                        let is_sel = selected().as_deref() == Some(k.name.as_str());
                        view! {
                            <tr data-kernel=k.name.clone() class:selected=is_sel class="clickable"
                                on:click=move |_| url.set(&[("kernel", name.clone())], true)>
                                <td><span class="chip" style=format!("background:{}", category_color(k.category))></span><Name name=k.short_name.clone() full=k.name.clone() max=90/></td>
                                <td>{k.category.as_str()}</td>
                                <td class="num">{k.calls}</td>
                                <td class="num">{time_us(k.total_us)}</td>
                                <td class="num">{time_us(k.avg_us)}</td>
                                <td class="num">{time_us(k.min_us)}</td>
                                <td class="num">{time_us(k.max_us)}</td>
                                <td class="num"><ShareBar pct=k.pct color=category_color(k.category)/></td>
                                <td class="mono small">{match (k.grid, k.block) { (Some(g), Some(b)) => format!("{:?} / {:?}", g, b), _ => String::new() }}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <Pager url=url pages=pages(n, PER_PAGE) rows=n/>
        }
    };
    view! {
        <div class="toolbar">
            <input type="search" id="kernels-filter" aria-label="Filter kernel names" placeholder="Filter kernel names" prop:value=move || url.get("q").unwrap_or_default()
                on:input=move |ev| url.set(&[("q", event_target_value(&ev)), ("page", String::new())], true)/>
            <span class="legend-row">{charts::legend()}</span>
            <span class="spacer"></span>
            <span class="hint">{format!("{total} kernels; select one to see what launches it")}</span>
        </div>
        {chains}
        {table}
    }
}

fn steps_tab(s: &Summary) -> impl IntoView {
    if s.steps.is_empty() {
        return view! { <p class="empty">"No steps: the trace has no ProfilerStep (or serving framework step) annotations."</p> }.into_any();
    }
    let out = logic::step_outliers(&s.steps);
    view! {
        <p>{format!("{} steps marked by {}: mean {}, p50 {}, p90 {}, min {}, max {}",
            s.steps_stats.count, s.steps_stats.source, time_us(s.steps_stats.mean_us), time_us(s.steps_stats.p50_us),
            time_us(s.steps_stats.p90_us), time_us(s.steps_stats.min_us), time_us(s.steps_stats.max_us))}</p>
        {(s.steps_stats.left_out > 0).then(|| view! {
            <p class="note" id="steps-left-out">{format!("{} trailing step{} without GPU work left out of these numbers.",
                s.steps_stats.left_out, if s.steps_stats.left_out == 1 { "" } else { "s" })}</p>
        })}
        {s.steps_stats.by_kind.iter().map(|k| view! {
            <p class="step-kind">{format!("{}: {} steps, mean {}, p50 {}, {} of GPU work per step",
                k.kind, k.count, time_us(k.mean_us), time_us(k.p50_us), time_us(k.mean_device_us))}</p>
        }).collect_view()}
        {charts::step_chart(&s.steps)}
        <table class="data" id="steps-table">
            <thead><tr><th>"Step"</th><th>"Kind"</th><th class="num">"Start"</th><th class="num">"Step time"</th><th class="num">"GPU work"</th><th class="num">"GPU span"</th><th class="num">"GPU ops"</th></tr></thead>
            <tbody>
                {s.steps.iter().zip(out).map(|(st, o)| view! {
                    <tr class:outlier=o class:left-out=st.left_out>
                        <td class="mono">{st.name.clone()}</td>
                        <td>{st.kind.map(|k| k.as_str()).unwrap_or_default()}</td>
                        <td class="num">{time_us(st.start_us)}</td>
                        <td class="num">{time_us(st.time())}</td>
                        <td class="num">{time_us(st.device_us)}</td>
                        <td class="num">{time_us(st.gpu_span_us)}</td>
                        <td class="num">{st.kernels}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn LayersTab(v: SummaryView, id: String) -> impl IntoView {
    let l = v.summary.layers.clone();
    // Only kernel and op markers can be given back as an override.
    let marker = RwSignal::new(if matches!(l.method.as_str(), "repetition" | "override") {
        l.marker.clone().unwrap_or_default()
    } else {
        String::new()
    });
    let period = RwSignal::new(l.period.map(|p| p.to_string()).unwrap_or_default());
    let note = use_context::<OverrideNote>()
        .map_or_else(|| RwSignal::new(None::<String>), |OverrideNote(n)| n);
    let failed = RwSignal::new(None::<String>);
    let reanalyzed = use_context::<Reanalyzed>();
    let apply = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let id = id.clone();
        let body = AnalysisOptions {
            layer_marker: Some(marker.get_untracked()),
            layer_period: period.get_untracked().trim().parse::<u64>().ok(),
            ..Default::default()
        }
        .normalized();
        note.set(Some(REANALYZING.into()));
        start_reanalysis(reanalyzed, id, body, failed);
    };
    let form = view! {
        <form class="override" id="layers-override" on:submit=apply>
            <span>"Override: "</span>
            <input type="text" id="layer-marker" aria-label="Layer marker: the kernel or op that starts each layer" placeholder="kernel or op that starts a layer" title="A kernel (full or short name) or the op that launches it; each occurrence starts a layer" prop:value=move || marker.get() on:input=move |ev| marker.set(event_target_value(&ev))/>
            <input type="number" id="layer-period" min="1" aria-label="Layer period: GPU ops per layer" placeholder="GPU ops per layer" title="The repetition period: GPU ops per layer" prop:value=move || period.get() on:input=move |ev| period.set(event_target_value(&ev))/>
            <button type="submit">"Re-analyze"</button>
            {move || failed.get().or_else(|| note.get()).map(|n| view! { <span class="note">{n}</span> })}
        </form>
    };
    if l.items.is_empty() {
        return view! {
            <p class="empty">"No layers found. " {l.detail.clone()}</p>
            <p>"Layers are found from annotations that carry a layer index (" <code>"model.layers.12"</code> "), from "
               <code>"nn.Module"</code> " frames (traces made with " <code>"with_stack=True"</code> "), or from an op sequence that repeats in every step. "
               "Name the kernel or op that starts each layer, or give the number of GPU ops per layer, to attribute time anyway."</p>
            {form}
        }
        .into_any();
    }
    let max = l.items.iter().map(|i| i.device_us).fold(0.0, f64::max);
    let total: f64 = l.items.iter().map(|i| i.device_us).sum();
    view! {
        <p id="layers-summary" title=format!("confidence {:.0}%", 100.0 * l.confidence)>{format!("{} layers, found by {} ({}): {} per {} in layers, {} outside. {}",
            l.count, l.method, sureness(l.confidence),
            time_us(total), if l.passes > 1 { "forward pass" } else { "step" },
            time_us(l.outside.device_us), l.detail)}</p>
        {charts::stacked_layers(&l.items, max, &format!("{} per layer", l.basis.words()))}
        {form}
        <table class="data" id="layers-table">
            <thead><tr><th class="num">"Layer"</th><th>"Kind"</th><th class="num">{if l.basis == TimeBasis::Cpu { "CPU / step" } else { "Device / step" }}</th><th>"Top op"</th><th>"Top kernel"</th></tr></thead>
            <tbody>
                {l.items.iter().map(|i| view! {
                    <tr>
                        <td class="num">{i.index}</td>
                        <td>{i.kind.map(|k| k.as_str()).unwrap_or_default()}</td>
                        <td class="num">{time_us(i.device_us)}</td>
                        <td>{i.top_ops.first().map(|o| view! { <Name name=o.name.clone() max=40/> " " {time_us(o.us)} })}</td>
                        <td>{i.top_kernels.first().map(|k| view! { <Name name=k.name.clone() max=50/> " " {time_us(k.us)} })}</td>
                    </tr>
                }).collect_view()}
                <tr class="outside">
                    <td>"outside layers"</td>
                    <td></td>
                    <td class="num">{time_us(l.outside.device_us)}</td>
                    <td>{l.outside.top_ops.first().map(|o| view! { <Name name=o.name.clone() max=40/> })}</td>
                    <td>{l.outside.top_kernels.first().map(|k| view! { <Name name=k.name.clone() max=50/> })}</td>
                </tr>
            </tbody>
        </table>
    }
    .into_any()
}

fn gpu_tab(s: &Summary) -> impl IntoView {
    let g = &s.gpu_time;
    let a = &s.trace.attribution;
    view! {
        <h3>"Busy and idle over the window (" {time_us(g.span_us)} ")"</h3>
        {charts::busy_bar(g.busy_pct, g.busy_us, g.idle_us)}
        <h3>"GPU time by kernel category"</h3>
        <div id="categories">{charts::category_bars(&g.by_category)}</div>
        <h3>"Streams"</h3>
        <table class="data">
            <thead><tr><th class="num">"Device"</th><th class="num">"Stream"</th><th class="num">"Busy"</th><th class="num">"GPU ops"</th></tr></thead>
            <tbody>
                {g.streams.iter().map(|st| view! {
                    <tr><td class="num">{st.device}</td><td class="num">{st.stream}</td><td class="num">{time_us(st.busy_us)}</td><td class="num">{st.gpu_ops}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
        <h3>"Attribution"</h3>
        <p id="attribution">{attribution_words(a)}</p>
        {(s.graphs.replays > 0).then(|| view! {
            <h3>"Graph replays"</h3>
            <p id="graph-stats">{format!("{} ({}): {} replays ran {} GPU ops, {} of GPU time ({}); {} ran eagerly{}. Host time between replays: {}.",
                s.graphs.mode, if s.graphs.mode == GraphMode::Piecewise { "graphs with eager work between them" } else { "the graphs run nearly everything" },
                s.graphs.replays, s.graphs.gpu_ops, time_us(s.graphs.device_us), pct(s.graphs.pct), time_us(s.graphs.eager_us),
                s.graphs.top_eager.first().map(|k| format!(", most in {} ({})", k.name, time_us(k.us))).unwrap_or_default(),
                time_us(s.graphs.host_between_us))}</p>
        })}
        {s.trace.notes.iter().map(|n| view! { <p class="note">{n.clone()}</p> }).collect_view()}
    }
}

fn ranks_tab(v: &SummaryView) -> impl IntoView {
    let Some(c) = v.cross_rank.clone() else {
        return view! { <p class="empty">"A single rank: nothing to compare."</p> }.into_any();
    };
    view! {
        <p>{c.slowest_rank.map(|r| format!("Slowest rank: {r}, {} above the median rank.", pct(c.slowest_by_pct)))}</p>
        <div id="ranks">{charts::rank_bars(&c.ranks, c.slowest_rank)}</div>
        <h3>"Top ops: share of GPU time on each rank"</h3>
        <table class="data">
            <thead><tr><th>"Op"</th>{c.ranks.iter().map(|r| view! { <th class="num">{format!("rank {}", r.rank)}</th> }).collect_view()}</tr></thead>
            <tbody>
                {c.top_ops.iter().map(|o| view! {
                    <tr><td><Name name=o.name.clone() max=50/></td>
                        {o.pct.iter().zip(&o.us).map(|(p, us)| view! { <td class="num" title=time_us(*us)>{pct(*p)}</td> }).collect_view()}
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// How sure the layer method is, in words (the number is on hover).
fn sureness(confidence: f64) -> &'static str {
    if confidence >= 0.8 {
        "sure"
    } else if confidence >= 0.5 {
        "likely"
    } else {
        "a guess: check it, or set a marker below"
    }
}

/// How GPU ops found their launch and op, in words: only the parts that
/// happened, in the user's terms.
fn attribution_words(a: &Attribution) -> String {
    let mut parts = vec![format!(
        "{} of {} GPU ops linked to their launch by correlation id",
        grouped(a.by_correlation),
        grouped(a.gpu_ops)
    )];
    if a.by_flow > 0 {
        parts.push(format!("{} by flow arrows", grouped(a.by_flow)));
    }
    if a.without_launch > 0 {
        parts.push(format!(
            "{} launched before the profile opened (no launch in the file)",
            grouped(a.without_launch)
        ));
    }
    if a.without_op > 0 {
        parts.push(format!(
            "{} launched outside any op ({} of GPU time not attributed to an op)",
            grouped(a.without_op),
            time_us(a.unattributed_us)
        ));
    }
    let mut text = parts.join("; ") + ".";
    if a.graph_launches > 0 {
        text.push_str(&format!(
            " {} CUDA graph launches ran {} GPU ops.",
            grouped(a.graph_launches),
            grouped(a.graph_gpu_ops)
        ));
    }
    text.push_str(match a.external_id_regime {
        ExternalIdRegime::ExternalId => " Ops were found from the launches' external ids.",
        ExternalIdRegime::Correlation => {
            " This trace's external ids repeat the correlation ids (torch 2022-23), so each launch's op was found by time."
        }
        ExternalIdRegime::None => " The trace has no external ids: each launch's op was found by time.",
    });
    text
}
