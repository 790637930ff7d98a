//! `/diff/{a}/{b}`: baseline a against patch b, side by side: tables, or
//! both timelines aligned (`?view=timeline`).

use crate::api;
use crate::charts;
use crate::widgets::{Name, UrlState};
use kinetoscope_types::units::{change_pct, pct, time_us};
use kinetoscope_types::{DeltaRow, Diff, DiffBasis, DiffSide, MatchedBy, TimeBasis};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_params_map;
use std::sync::Arc;

use super::stacked::DiffTimeline;

/// The diff page.
#[component]
pub fn DiffPage() -> impl IntoView {
    let params = use_params_map();
    let ids = Memo::new(move |_| {
        params.with(|p| {
            (
                p.get("a").unwrap_or_default(),
                p.get("b").unwrap_or_default(),
            )
        })
    });
    let url = UrlState::new();
    let diff = RwSignal::new(None::<Result<Diff, String>>);
    Effect::new(move |_| {
        let (a, b) = ids.get();
        diff.set(None);
        spawn_local(async move {
            diff.set(Some(api::get::<Diff>(&format!("/api/diff/{a}/{b}")).await))
        });
    });
    // The page's title: baseline and patch by name.
    Effect::new(move |_| {
        let (a, b) = diff.with(|d| match d {
            Some(Ok(d)) => (d.a.name.clone(), d.b.name.clone()),
            _ => ids.get(),
        });
        crate::widgets::set_title(&[&format!("{a} → {b}"), "Diff"]);
    });
    let copied = RwSignal::new(false);
    // A memo: the body is rebuilt when the view changes, not on every change
    // of the query string (the timeline writes its view there).
    let timeline = Memo::new(move |_| url.get("view").as_deref() == Some("timeline"));
    let show = move |timeline: bool| {
        url.set(
            &[
                (
                    "view",
                    if timeline {
                        "timeline".into()
                    } else {
                        String::new()
                    },
                ),
                ("start_ns", String::new()),
                ("end_ns", String::new()),
            ],
            false,
        )
    };
    view! {
        <section class="diff" id="diff-page">
            <div class="toolbar">
                <h1>"Diff"</h1>
                <nav class="tabs" role="tablist" aria-label="Diff views">
                    <button class="tab" class:active=move || !timeline.get() data-view="tables" role="tab" aria-selected=move || (!timeline.get()).to_string() on:click=move |_| show(false)>"Tables"</button>
                    <button class="tab" class:active=move || timeline.get() data-view="timeline" id="view-timeline" role="tab" aria-selected=move || timeline.get().to_string() on:click=move |_| show(true)>"Timeline"</button>
                </nav>
                <span class="spacer"></span>
                <button class="ghost" id="swap" title="Make the patch the baseline" on:click=move |_| { let (a, b) = ids.get_untracked(); url.go(&format!("/diff/{b}/{a}{}", url.query_untracked())); }>"⇄ Swap"</button>
                <button class="ghost" id="copy-diff-link" on:click=move |_| {
                    let (a, b) = ids.get_untracked();
                    api::copy_to_clipboard(&format!("{}/diff/{a}/{b}", api::origin()));
                    copied.set(true);
                }>{move || if copied.get() { "Link copied" } else { "Copy share link" }}</button>
            </div>
            {move || diff.get().map(|d| match d {
                Err(e) => view! { <p class="error">{e}</p> }.into_any(),
                Ok(d) if timeline.get() => {
                    let (a, b) = ids.get_untracked();
                    view! { <DiffTimeline a=a b=b diff=Arc::new(d) url=url/> }.into_any()
                }
                Ok(d) => diff_body(d).into_any(),
            })}
        </section>
    }
}

fn side_card(s: &DiffSide, label: &str) -> impl IntoView {
    view! {
        <div class="panel side">
            <h2><span class="side-label">{label.to_string()}</span><a href=format!("/runs/{}", s.id)>{s.name.clone()}</a></h2>
            <dl class="stats">
                <div><dt>"Mean step"</dt><dd class="headline">{if s.steps > 0 { time_us(s.mean_step_us) } else { "—".into() }}</dd></div>
                <div><dt>"p50 step"</dt><dd>{if s.steps > 0 { time_us(s.p50_step_us) } else { "—".into() }}</dd></div>
                <div><dt>"Steps"</dt><dd>{s.steps}</dd></div>
                <div><dt>"GPU busy"</dt><dd>{pct(s.busy_pct)}</dd></div>
                <div><dt>"Device"</dt><dd>{s.devices.first().cloned().unwrap_or_default()}</dd></div>
                {s.bound.as_ref().map(|b| view! {
                    <div><dt>"Bound by"</dt><dd class="bound" data-bound=b.by.as_str()>{match b.by {
                        kinetoscope_types::StepBound::Gpu => "the GPU".to_string(),
                        kinetoscope_types::StepBound::Host => format!("the host ({} of CPU work per step)", time_us(b.host_us)),
                        kinetoscope_types::StepBound::Sync => format!("waits on syncs ({} per step)", time_us(b.sync_us)),
                    }}</dd></div>
                })}
            </dl>
        </div>
    }
}

fn delta_table(rows: &[DeltaRow], id: &str, title: &str, basis: DiffBasis) -> impl IntoView {
    let max = rows.iter().map(|r| r.delta_us.abs()).fold(0.0, f64::max);
    view! {
        <h3>{format!("{title} ({basis}), by absolute change")}</h3>
        <table class="data" id=id.to_string()>
            <thead><tr><th>"Name"</th><th class="num">"A"</th><th class="num">"B"</th><th class="num">"Change"</th><th class="delta-col">"faster ◂ ▸ slower"</th><th class="num">"%"</th></tr></thead>
            <tbody>
                {rows.iter().take(50).map(|r| view! {
                    <tr data-name=r.name.clone()>
                        <td><Name name=r.short_name.clone().unwrap_or_else(|| r.name.clone()) full=r.name.clone() max=90/>{(r.matched_by == MatchedBy::Normalized).then(|| view! { <span class="kind" title=r.b_name.clone().unwrap_or_default()>"≈ renamed"</span> })}</td>
                        <td class="num">{time_us(r.a_us)}</td>
                        <td class="num">{time_us(r.b_us)}</td>
                        <td class="num">{format!("{}{}", if r.delta_us > 0.0 { "+" } else { "" }, time_us(r.delta_us))}</td>
                        <td class="delta-col">{charts::delta_bar(r.delta_us, max)}</td>
                        <td class="num">{change_pct(r.change_pct)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// How many times taller one run's tallest layer may be than the other's
/// for both to share a scale: past it the shorter run's bars are a few
/// pixels high.
const OWN_SCALE_RATIO: f64 = 4.0;

fn diff_body(d: Diff) -> impl IntoView {
    // One scale for both where their tallest layers are alike; where one
    // run's layers are many times shorter (a fix that cut them 10x), each
    // on its own scale, said in the heading: on one scale B was an empty
    // box.
    let tallest =
        |ls: &[kinetoscope_types::LayerRow]| ls.iter().map(|l| l.device_us).fold(0.0, f64::max);
    let (a_max, b_max) = (tallest(&d.a.layers), tallest(&d.b.layers));
    let own_scales =
        a_max.min(b_max) > 0.0 && a_max.max(b_max) / a_max.min(b_max) > OWN_SCALE_RATIO;
    let (a_scale, b_scale) = if own_scales {
        (a_max, b_max)
    } else {
        (a_max.max(b_max), a_max.max(b_max))
    };
    let scale_heading = if own_scales {
        format!(
            "Device time per layer, each on its own scale (B's tallest layer is {:.1}x A's)",
            b_max / a_max
        )
    } else {
        "Device time per layer, same scale".to_string()
    };
    let has_layers = !d.a.layers.is_empty() || !d.b.layers.is_empty();
    view! {
        <div class="grid2">{side_card(&d.a, "A")}{side_card(&d.b, "B")}</div>
        <div class="panel">
            <h2 id="diff-headline">{if d.a.steps > 0 && d.b.steps > 0 {
                format!("Step time {} ({} → {})", change_pct(d.steps.change_pct), time_us(d.steps.a_mean_us), time_us(d.steps.b_mean_us))
            } else {
                format!("GPU busy {} ({} → {})", change_pct(d.gpu_busy.change_pct), time_us(d.gpu_busy.a_us), time_us(d.gpu_busy.b_us))
            }}</h2>
            <ol class="findings" id="diff-findings">
                {d.findings.iter().map(|f| view! { <li class="finding"><span class="finding-text">{f.text.clone()}</span></li> }).collect_view()}
            </ol>
            {(!d.memory.is_empty()).then(|| view! {
                <table class="data" id="diff-memory">
                    <thead><tr><th>"Memory"</th><th class="num">"Peak A"</th><th class="num">"Peak B"</th><th class="num">"Change"</th><th class="num">"Made and dropped per step, A"</th><th class="num">"B"</th></tr></thead>
                    <tbody>{d.memory.iter().map(|m| {
                        let b = kinetoscope_types::units::bytes;
                        view! {
                            <tr>
                                <td class="mono">{m.device.clone()}</td>
                                <td class="num">{b(m.a_peak_bytes as f64)}</td>
                                <td class="num">{b(m.b_peak_bytes as f64)}</td>
                                <td class="num">{change_pct(m.peak_change_pct)}</td>
                                <td class="num">{m.a_churn_bytes_per_step.map(b).unwrap_or_default()}</td>
                                <td class="num">{m.b_churn_bytes_per_step.map(b).unwrap_or_default()}</td>
                            </tr>
                        }
                    }).collect_view()}</tbody>
                </table>
            })}
        </div>
        {has_layers.then(|| view! {
            <div class="panel">
                <h3 id="diff-layers-heading">{scale_heading}</h3>
                <p class="side-label">"A · " {d.a.name.clone()} " (" {d.a.layer_method.as_str()} ")"</p>
                {charts::stacked_layers(&d.a.layers, a_scale, "layers of run A, per step")}
                <p class="side-label">"B · " {d.b.name.clone()} " (" {d.b.layer_method.as_str()} ")"</p>
                {charts::stacked_layers(&d.b.layers, b_scale, "layers of run B, per step")}
            </div>
        })}
        <div class="panel">
            {delta_table(&d.ops, "diff-ops", match d.op_time {
                TimeBasis::Device => "Ops, self device time",
                TimeBasis::Cpu => "Ops, self CPU time",
            }, d.basis)}
            {(!d.host_ops.is_empty()).then(|| delta_table(&d.host_ops, "diff-host", "Host, self CPU time (waits aside)", d.basis))}
            {delta_table(&d.kernels, "diff-kernels", "Kernels", d.basis)}
            {delta_table(&d.categories, "diff-categories", "Kernel categories", d.basis)}
        </div>
        <div class="grid2">
            <div class="panel"><h3>{format!("Added kernels ({})", d.added_kernels.len())}</h3>
                <ul class="names">{d.added_kernels.iter().take(30).map(|k| view! { <li><Name name=k.clone() max=90/></li> }).collect_view()}</ul></div>
            <div class="panel"><h3>{format!("Removed kernels ({})", d.removed_kernels.len())}</h3>
                <ul class="names">{d.removed_kernels.iter().take(30).map(|k| view! { <li><Name name=k.clone() max=90/></li> }).collect_view()}</ul></div>
        </div>
        {(!d.ranks.is_empty()).then(|| view! {
            <div class="panel">
                <h3>"Ranks, mean step, and what bounds each"</h3>
                <table class="data" id="diff-ranks"><thead><tr><th class="num">"Rank"</th><th class="num">"A"</th><th class="num">"B"</th><th class="num">"%"</th><th>"A bound by"</th><th>"B bound by"</th><th class="num">"Host %"</th></tr></thead>
                <tbody>{d.ranks.iter().map(|r| {
                    let by = |b: &Option<kinetoscope_types::Bound>| b.as_ref().map_or("-", |b| b.by.words());
                    view! {
                        <tr><td class="num">{r.rank}</td><td class="num">{time_us(r.a_mean_step_us)}</td><td class="num">{time_us(r.b_mean_step_us)}</td><td class="num">{change_pct(r.change_pct)}</td>
                        <td>{by(&r.a_bound)}</td><td>{by(&r.b_bound)}</td><td class="num">{r.host_change_pct.map(change_pct).unwrap_or_else(|| "-".into())}</td></tr>
                    }
                }).collect_view()}</tbody></table>
            </div>
        })}
    }
}
