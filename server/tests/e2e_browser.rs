//! Browser end-to-end tests: the real server, the app built by Trunk, and a
//! headless Chromium driven through ChromeDriver. Assertions are on data the
//! API returns, not on fixed strings.

mod common;

use common::*;
use fantoccini::Locator;
use kinetoscope_types::{Diff, Summary};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

async fn js(b: &Browser, expr: &str) -> serde_json::Value {
    b.client
        .execute(&format!("return ({expr});"), vec![])
        .await
        .unwrap()
}

/// Sizes the browser window so that the page itself (the viewport) is
/// `w` by `h` CSS pixels, whatever the window's frame takes.
async fn set_inner_size(b: &Browser, w: u32, h: u32) {
    let frame = js(
        b,
        "[window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]",
    )
    .await;
    let (fw, fh) = (
        frame[0].as_u64().unwrap() as u32,
        frame[1].as_u64().unwrap() as u32,
    );
    b.client.set_window_size(w + fw, h + fh).await.unwrap();
}

/// The op the API ranks first by self device time (ties by name).
fn top_op_by_self_device(s: &Summary) -> String {
    let mut ops = s.ops.clone();
    ops.sort_by(|a, b| {
        b.self_device_us
            .total_cmp(&a.self_device_us)
            .then(a.name.cmp(&b.name))
    });
    ops[0].name.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_trace_shows_its_top_kernel() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let created = srv
        .upload_file(
            &shared_trace("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz"),
            "qwen",
        )
        .await;
    assert_eq!(created.status, kinetoscope_types::RunStatus::Queued);
    let run = srv.wait(&created.id, LONG).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        run.error
    );
    let summary: Summary = srv
        .get_json(&format!("/api/runs/{}/summary", created.id))
        .await;
    let top = summary.kernels[0].clone();

    let b = Browser::start().await;
    b.client
        .goto(&format!("{}{}", srv.url, created.url))
        .await
        .unwrap();
    b.wait_for("#findings", LONG).await;
    let name = b
        .client
        .find(Locator::Css("#run-name"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(name, "qwen");
    let text = js(&b, "document.body.innerText").await;
    assert!(
        text.as_str().unwrap().contains(&top.short_name),
        "the run page does not show the top kernel {}",
        top.short_name
    );
    b.client
        .goto(&format!("{}{}?tab=kernels", srv.url, created.url))
        .await
        .unwrap();
    b.wait_for("#kernels-table tbody tr", LONG).await;
    let first = js(
        &b,
        "document.querySelector('#kernels-table tbody tr').dataset.kernel",
    )
    .await;
    assert_eq!(first.as_str(), Some(top.name.as_str()), "first kernel row");
    b.screenshot("skeleton-kernels").await;
    b.close().await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_upload_sort_chains_and_tabs() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let trace = shared_trace("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz");
    let b = Browser::start().await;
    b.client.goto(&srv.url).await.unwrap();
    let input = b.wait_for("#file-input", LONG).await;
    input.send_keys(trace.to_str().unwrap()).await.unwrap();
    // The upload's progress events drove the bar, then the app went to the run.
    b.wait_js("location.pathname.startsWith('/runs/')", LONG)
        .await;
    let progress = js(&b, "window.__kinetoscopeUploadProgress").await;
    assert!(
        progress.as_f64().unwrap_or(0.0) > 0.0,
        "no upload progress was shown: {progress}"
    );
    let path = js(&b, "location.pathname").await;
    let id = path
        .as_str()
        .unwrap()
        .trim_start_matches("/runs/")
        .to_string();
    let run = srv.wait(&id, LONG).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        run.error
    );
    b.wait_for("#findings", LONG).await;
    let shot = b.screenshot("tab-findings").await;
    println!("screenshots in {}", shot.parent().unwrap().display());

    // Sort the ops by self device time by clicking its header.
    let summary: Summary = srv.get_json(&format!("/api/runs/{id}/summary")).await;
    b.client
        .goto(&format!("{}/runs/{id}?tab=ops&sort=calls", srv.url))
        .await
        .unwrap();
    b.wait_for("#ops-table tbody tr", LONG).await;
    b.client
        .find(Locator::Css("#ops-table th[data-sort='self_device']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_js("location.search.includes('sort=self_device')", LONG)
        .await;
    let first = js(
        &b,
        "document.querySelector('#ops-table tbody tr').dataset.op",
    )
    .await;
    assert_eq!(
        first.as_str(),
        Some(top_op_by_self_device(&summary).as_str())
    );
    b.screenshot("tab-ops").await;

    // What launches the top kernel?
    b.client
        .goto(&format!("{}/runs/{id}?tab=kernels", srv.url))
        .await
        .unwrap();
    b.wait_for("#kernels-table tbody tr", LONG)
        .await
        .click()
        .await
        .unwrap();
    b.wait_for("#launch-chains tr.chain", LONG).await;
    let chains = js(
        &b,
        "document.querySelectorAll('#launch-chains tr.chain').length",
    )
    .await;
    assert_eq!(
        chains.as_u64(),
        Some(summary.kernels[0].launched_by.len() as u64)
    );
    b.screenshot("tab-kernels-chains").await;

    // Against the hardware: the run header names the H100's peaks, the
    // signature view and the kernels' geometry table have a "% of peak"
    // and an "Ideal" column, the findings label their leading number, and
    // the steps chart has a y axis with its unit.
    let peaks = js(
        &b,
        "(document.querySelector('#stat-device') || {}).textContent || ''",
    )
    .await;
    assert!(
        peaks.as_str().unwrap_or("").contains("3.35 TB/s"),
        "{peaks}"
    );
    let headers = js(
        &b,
        "[...document.querySelectorAll('#kernel-groups th')].map(h => h.textContent).join('|')",
    )
    .await;
    assert!(
        summary.kernels[0].groups.is_empty()
            || headers.as_str().unwrap_or("").contains("% of peak|Ideal"),
        "{headers}"
    );
    b.client
        .goto(&format!("{}/runs/{id}?tab=ops&group=shapes", srv.url))
        .await
        .unwrap();
    b.wait_for("#shapes-table tbody tr", LONG).await;
    let headers = js(
        &b,
        "[...document.querySelectorAll('#shapes-table th')].map(h => h.textContent).join('|')",
    )
    .await;
    assert!(
        headers.as_str().unwrap_or("").contains("% of peak|Ideal"),
        "{headers}"
    );
    // The GEMMs' rows say their FLOP rate's share of the peak.
    let shares = js(
        &b,
        "[...document.querySelectorAll('#shapes-table td.peak')].filter(td => td.textContent.endsWith('%')).length",
    )
    .await;
    let with_share = summary
        .ops
        .iter()
        .flat_map(|o| &o.input_shapes)
        .any(|g| g.pct_of_peak_bw.or(g.pct_of_peak_flops).is_some());
    assert_eq!(shares.as_u64().unwrap_or(0) > 0, with_share, "{shares}");
    b.client
        .goto(&format!("{}/runs/{id}?tab=steps", srv.url))
        .await
        .unwrap();
    b.wait_for("#steps-table", LONG).await;
    if !summary.steps.is_empty() {
        let ticks = js(
            &b,
            "document.querySelectorAll('#steps-y-axis .tick').length",
        )
        .await;
        assert!(ticks.as_u64().unwrap_or(0) >= 2, "{ticks}");
    }
    b.client
        .goto(&format!("{}/runs/{id}?tab=findings", srv.url))
        .await
        .unwrap();
    b.wait_for("#findings", LONG).await;
    let label = js(
        &b,
        "(document.querySelector('#findings .impact-label') || {}).textContent",
    )
    .await;
    assert_eq!(label.as_str(), Some("impact"));

    // Every tab opens from its URL.
    for (tab, marker) in [
        ("steps", "#steps-table"),
        ("layers", "#tab-body"),
        ("gpu", "#categories"),
        ("findings", "#findings"),
    ] {
        b.client
            .goto(&format!("{}/runs/{id}?tab={tab}", srv.url))
            .await
            .unwrap();
        b.wait_for(marker, LONG).await;
        let active = js(&b, "document.querySelector('.tab.active').dataset.tab").await;
        assert_eq!(active.as_str(), Some(tab));
        b.screenshot(&format!("tab-{tab}")).await;
    }
    b.close().await;
    srv.stop().await;
}

/// On a server in tokens mode the dashboard works once the user gives it a
/// token: the run list reads, an upload goes through, a re-analysis (an
/// admin write) is accepted; without the token the list says why not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_sends_its_token_on_a_protected_server() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts {
        auth: server::api::auth::AuthMode::Tokens,
        ..Opts::default()
    })
    .await;
    let secret = "kst_browser-test-admin-0123456789";
    let db = worker::db::Db::connect(&format!(
        "sqlite://{}",
        srv.data.path().join("kinetoscope.db").display()
    ))
    .await
    .unwrap();
    db.add_token(
        &server::api::new_id(),
        "browser",
        &worker::blobs::sha256_hex(secret.as_bytes()),
        worker::db::TokenScope::Admin,
        None,
    )
    .await
    .unwrap();
    db.close().await;
    let b = Browser::start().await;
    b.client.goto(&srv.url).await.unwrap();
    // No token: the list says a token is needed.
    b.wait_js("document.body.innerText.includes('needs a token')", LONG)
        .await;
    let field = b.wait_for("#token", LONG).await;
    field.send_keys(secret).await.unwrap();
    js(
        &b,
        "document.querySelector('#token').dispatchEvent(new Event('change')) || true",
    )
    .await;
    b.client.refresh().await.unwrap();
    let input = b.wait_for("#file-input", LONG).await;
    let trace = shared_trace("hta-a100-simple-add.json.gz");
    input.send_keys(trace.to_str().unwrap()).await.unwrap();
    b.wait_js("location.pathname.startsWith('/runs/')", LONG)
        .await;
    let path = js(&b, "location.pathname").await;
    let id = path
        .as_str()
        .unwrap()
        .trim_start_matches("/runs/")
        .to_string();
    let run = srv.wait(&id, LONG).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        run.error
    );
    // The list reads with the token.
    b.client.goto(&srv.url).await.unwrap();
    b.wait_for(".run-link", LONG).await;
    // An admin write from the page: re-analyze with a layer override.
    b.client
        .goto(&format!("{}/runs/{id}?tab=layers", srv.url))
        .await
        .unwrap();
    b.wait_for("#layer-period", LONG)
        .await
        .send_keys("3")
        .await
        .unwrap();
    b.client
        .find(Locator::Css("#layers-override button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_js(
        "document.querySelector('#layers-override .note') && document.querySelector('#layers-override .note').innerText.includes('Re-analyzing')",
        LONG,
    )
    .await;
    // The page follows the re-analysis it started: the status polls start
    // again, and once the run is done the summary is read again, so the
    // override's layer shows without a reload.
    b.wait_js(
        "document.querySelector('#layers-summary') && document.querySelector('#layers-summary').innerText.includes('found by override')",
        LONG,
    )
    .await;
    let run = srv.wait(&id, LONG).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Done);
    // The tabs say which one is shown, for assistive technology.
    let selected = js(
        &b,
        "[...document.querySelectorAll('.tabs [role=tab][aria-selected=true]')].map(t => t.dataset.tab).join(',')",
    )
    .await;
    assert_eq!(selected.as_str(), Some("layers"));
    // The actions' Re-analyze (default options: no override) is followed
    // the same way: the layers tab returns to "no layers" by itself.
    b.client
        .find(Locator::Css("#reanalyze"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_js(
        "document.querySelector('#layers-summary') === null && document.body.innerText.includes('No layers found')",
        LONG,
    )
    .await;
    let run = srv.wait(&id, LONG).await;
    assert_eq!(run.status, kinetoscope_types::RunStatus::Done);
    b.wait_js(
        "document.querySelector('.run-title .status') && document.querySelector('.run-title .status').innerText.trim() === 'done'",
        LONG,
    )
    .await;
    assert!(
        js(&b, "document.querySelector('#reanalyze-error') === null")
            .await
            .as_bool()
            .unwrap(),
        "Re-analyze failed"
    );
    b.close().await;
    srv.stop().await;
}

/// A tiny trace whose op and kernel names are markup.
fn markup_trace(payload: &str) -> Vec<u8> {
    let name = serde_json::to_string(payload).unwrap();
    let kernel = serde_json::to_string(&format!("{payload} kernel")).unwrap();
    format!(
        r#"{{"traceEvents": [
  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {{"External id": 1}}}},
  {{"ph": "X", "cat": "cpu_op", "name": {name}, "pid": 1, "tid": 1, "ts": 10, "dur": 50, "args": {{"External id": 2}}}},
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {{"External id": 2, "correlation": 7}}}},
  {{"ph": "X", "cat": "kernel", "name": {kernel}, "pid": 0, "tid": 7, "ts": 30, "dur": 40, "args": {{"External id": 2, "correlation": 7, "grid": [1, 1, 1], "block": [32, 1, 1]}}}}
]}}"#
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markup_in_names_renders_as_text() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let payload = r#"<img src=x onerror="window.__xss=1">"#;
    let created = srv.upload(markup_trace(payload), payload).await;
    let run = srv.wait(&created.id, LONG).await;
    assert_eq!(
        run.status,
        kinetoscope_types::RunStatus::Done,
        "{:?}",
        run.error
    );
    let b = Browser::start().await;
    let kernel = format!("{payload} kernel");
    for q in [
        "?tab=findings".to_string(),
        "?tab=ops".to_string(),
        format!("?tab=kernels&kernel={}", urlencode(&kernel)),
    ] {
        b.client
            .goto(&format!("{}{}{q}", srv.url, created.url))
            .await
            .unwrap();
        b.wait_for("#tab-body", LONG).await;
        b.wait_js("document.body.innerText.includes('onerror')", LONG)
            .await;
        // Give an injected image time to fail and fire its handler.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            js(&b, "typeof window.__xss").await.as_str(),
            Some("undefined"),
            "markup executed on {q}"
        );
        assert_eq!(
            js(&b, "document.querySelectorAll('#run-page img').length")
                .await
                .as_u64(),
            Some(0)
        );
        let text = js(&b, "document.body.innerText").await;
        assert!(
            text.as_str().unwrap().contains(payload),
            "the name is not shown as text on {q}"
        );
    }
    b.screenshot("markup-as-text").await;
    // The runs list shows the name as text too.
    b.client.goto(&srv.url).await.unwrap();
    b.wait_js("document.body.innerText.includes('onerror')", LONG)
        .await;
    assert_eq!(
        js(&b, "typeof window.__xss").await.as_str(),
        Some("undefined")
    );
    b.close().await;
    srv.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn generated(steps: u32, layers: u32, variant: kinetoscope_generate::Variant) -> Vec<u8> {
    let p = kinetoscope_generate::DecodeParams {
        steps,
        layers,
        variant,
        with_stack: false,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    zstd::encode_all(&json[..], 3).unwrap()
}

/// The generated baseline and its gather-then-cast patch, uploaded as
/// `baseline` and `gather-cast` and analyzed.
async fn baseline_and_patch(
    srv: &TestServer,
    steps: u32,
    layers: u32,
) -> (kinetoscope_types::Created, kinetoscope_types::Created) {
    use kinetoscope_generate::Variant;
    let a = srv
        .upload(generated(steps, layers, Variant::Baseline), "baseline")
        .await;
    let b = srv
        .upload(generated(steps, layers, Variant::GatherCast), "gather-cast")
        .await;
    for run in [&a, &b] {
        assert_eq!(
            srv.wait(&run.id, Duration::from_secs(900)).await.status,
            kinetoscope_types::RunStatus::Done
        );
    }
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_link_shows_both_headlines_and_deltas() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let (a, b_run) = baseline_and_patch(&srv, 3, 6).await;
    let diff: Diff = srv
        .get_json(&format!("/api/diff/{}/{}", a.id, b_run.id))
        .await;
    let b = Browser::start().await;
    b.client
        .goto(&format!("{}/diff/{}/{}", srv.url, a.id, b_run.id))
        .await
        .unwrap();
    b.wait_for("#diff-ops tbody tr", LONG).await;
    let text = js(&b, "document.querySelector('#diff-page').innerText").await;
    let text = text.as_str().unwrap();
    assert!(
        text.contains("baseline") && text.contains("gather-cast"),
        "both runs are named"
    );
    let headline = b
        .client
        .find(Locator::Css("#diff-headline"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        headline.contains(&kinetoscope_types::units::change_pct(diff.steps.change_pct)),
        "{headline}"
    );
    let first = js(
        &b,
        "document.querySelector('#diff-ops tbody tr').dataset.name",
    )
    .await;
    assert_eq!(first.as_str(), Some(diff.ops[0].name.as_str()));
    // The host table (issue 42): the ops' self CPU time per step, first
    // row the largest change, and what bounds each side.
    assert!(!diff.host_ops.is_empty());
    b.wait_for("#diff-host tbody tr", LONG).await;
    let host_first = js(
        &b,
        "document.querySelector('#diff-host tbody tr').dataset.name",
    )
    .await;
    assert_eq!(host_first.as_str(), Some(diff.host_ops[0].name.as_str()));
    let bounds = js(
        &b,
        "Array.from(document.querySelectorAll('.bound')).map(e => e.dataset.bound).join(',')",
    )
    .await;
    let want = [&diff.a, &diff.b]
        .iter()
        .map(|s| s.bound.as_ref().unwrap().by.as_str())
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(bounds.as_str(), Some(want.as_str()));
    b.screenshot("diff").await;
    // Swap goes to b/a.
    b.client
        .find(Locator::Css("#swap"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_js(
        &format!("location.pathname === '/diff/{}/{}'", b_run.id, a.id),
        LONG,
    )
    .await;
    b.close().await;
    srv.stop().await;
}

/// The diff's timeline view: baseline over patch with the anchor step of
/// each at the same x, the cast kernel highlighted in both and shorter in
/// the patch, the layer strip drawn, per-step totals shown; a bad anchor
/// falls back to the runs' starts and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_timeline_aligns_baseline_over_patch() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let (a, b_run) = baseline_and_patch(&srv, 3, 8).await;
    let diff: Diff = srv
        .get_json(&format!("/api/diff/{}/{}", a.id, b_run.id))
        .await;
    let align: kinetoscope_types::DiffAlign = srv
        .get_json(&format!("/api/diff/{}/{}/align", a.id, b_run.id))
        .await;
    // The kernel whose time fell the most: the FP8 -> BF16 cast.
    let cast = diff
        .kernels
        .iter()
        .min_by(|x, y| x.delta_us.total_cmp(&y.delta_us))
        .unwrap()
        .name
        .clone();
    assert!(cast.contains("direct_copy_kernel_cuda"), "{cast}");
    let b = Browser::start().await;
    b.client
        .goto(&format!(
            "{}/diff/{}/{}?view=timeline&hl={}",
            srv.url,
            a.id,
            b_run.id,
            urlencode(&cast)
        ))
        .await
        .unwrap();
    let ready = "window.__stackedLayout && (() => { const l = JSON.parse(window.__stackedLayout); \
        return l.fetched >= l.lanes && l.sides.every(s => s.hits.events > 0) && window.__stackedLayout; })()";
    let lay: serde_json::Value =
        serde_json::from_str(b.wait_js(ready, LONG).await.as_str().unwrap()).unwrap();
    let sides = lay["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 2);
    assert_eq!(sides[0]["run"], a.id.as_str());
    assert_eq!(sides[1]["run"], b_run.id.as_str());
    // Each run is drawn from where the API says its anchor lies.
    assert_eq!(sides[0]["offset"].as_f64(), Some(align.a.start_ns as f64));
    assert_eq!(sides[1]["offset"].as_f64(), Some(align.b.start_ns as f64));
    // The anchor step of each starts at the same x, inside the plot.
    let (xa, xb) = (
        sides[0]["anchor_step_x"].as_f64().unwrap(),
        sides[1]["anchor_step_x"].as_f64().unwrap(),
    );
    assert!((xa - xb).abs() < 0.5, "{xa} vs {xb}");
    assert!(
        xa > 0.0 && xa < lay["width"].as_f64().unwrap() / 2.0,
        "{xa}"
    );
    // The cast drawn in both, shorter in the patch.
    for s in sides {
        assert!(
            s["hits"]["names"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n.as_str() == Some(cast.as_str())),
            "{s}"
        );
    }
    let (la, lb) = (
        sides[0]["hits"]["longest_ns"].as_i64().unwrap(),
        sides[1]["hits"]["longest_ns"].as_i64().unwrap(),
    );
    assert!(lb * 5 < la, "patch cast {lb} ns vs baseline {la} ns");
    // The layer strip: every layer found in both runs, the cast's layers faster.
    let strip = lay["strip"].as_array().unwrap();
    assert!(!strip.is_empty(), "{lay}");
    assert!(
        strip.iter().any(|l| l["color"] == "#54a24b"),
        "some layer is faster: {strip:?}"
    );
    // Per-step totals of the highlight, from the diff's rows.
    let row = diff.kernels.iter().find(|r| r.name == cast).unwrap();
    let totals = js(&b, "document.querySelector('#highlight-totals').innerText").await;
    let totals = totals.as_str().unwrap();
    assert!(
        totals.contains(&kinetoscope_types::units::time_us(row.a_us))
            && totals.contains(&kinetoscope_types::units::time_us(row.b_us)),
        "{totals}"
    );
    // What bounds each side, on the diff timeline too (issue 42).
    let host = js(
        &b,
        "document.querySelector('#diff-timeline-host').innerText",
    )
    .await;
    let host = host.as_str().unwrap();
    assert!(
        host.contains(&format!("A is {}", diff.a.bound.as_ref().unwrap().words())),
        "{host}"
    );
    b.screenshot("diff-timeline").await;
    // Zoom: both runs move together (one view), and the URL keeps it.
    b.client
        .execute(
            "const c = document.getElementById('stacked-canvas'); const r = c.getBoundingClientRect();
             c.dispatchEvent(new WheelEvent('wheel', {deltaY: -400, clientX: r.left + 400, clientY: r.top + 80, bubbles: true, cancelable: true}));",
            vec![],
        )
        .await
        .unwrap();
    b.wait_js("location.search.includes('start_ns=')", LONG)
        .await;
    // A bad anchor: the runs' starts are aligned, and the page says so.
    b.client
        .goto(&format!(
            "{}/diff/{}/{}?view=timeline&anchor=step:99",
            srv.url, a.id, b_run.id
        ))
        .await
        .unwrap();
    let note = b
        .wait_js(
            "document.querySelector('#align-note.error') && document.querySelector('#align-note').innerText",
            LONG,
        )
        .await;
    assert!(note.as_str().unwrap().contains("no step 99"), "{note}");
    b.close().await;
    srv.stop().await;
}

/// Time from the app's start to the run page showing its tables. Printed,
/// not asserted (see BENCHMARKS.md), so it runs only under `make bench-ui`
/// (`KINETOSCOPE_UI_BENCH=1`, the full generated trace: 30 steps x 78
/// layers, ~490 MB of JSON); the tables it waits for are checked by
/// `dashboard_upload_sort_chains_and_tabs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_timing() {
    let full = std::env::var("KINETOSCOPE_UI_BENCH").is_ok();
    if !full {
        eprintln!("ui_timing: printed only; run it with `make bench-ui`");
        return;
    }
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let (steps, layers) = if full { (30, 78) } else { (3, 78) };
    let srv = TestServer::start(Opts::default()).await;
    let p = kinetoscope_generate::DecodeParams {
        steps,
        layers,
        with_stack: full,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    let created = srv
        .upload(zstd::encode_all(&json[..], 3).unwrap(), "timing")
        .await;
    drop(json);
    assert_eq!(
        srv.wait(&created.id, Duration::from_secs(600)).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let view_bytes = srv
        .http
        .get(format!("{}/api/runs/{}/view", srv.url, created.id))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    let b = Browser::start().await;
    let mut times = Vec::new();
    for _ in 0..5 {
        b.client
            .goto(&format!("{}{}?tab=ops", srv.url, created.url))
            .await
            .unwrap();
        b.wait_for("#ops-table tbody tr", LONG).await;
        b.wait_js("window.__kinetoscopeReady", LONG).await;
        let ms = js(&b, "window.__kinetoscopeReady - window.__kinetoscopeStart").await;
        times.push(ms.as_f64().unwrap());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "UI timing ({steps} steps x {layers} layers, view {view_bytes} bytes): WASM start -> tables shown: median {:.0} ms, min {:.0} ms, max {:.0} ms",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    b.close().await;
    srv.stop().await;
}

/// Upload to findings, as a user does it: the realistic trace as .json.zst
/// put in the dashboard's file input, streamed over loopback, analyzed,
/// and its run page showing the findings. Printed, not asserted (see
/// BENCHMARKS.md). `KINETOSCOPE_UI_BENCH=1` uses the founding story's size
/// (30 steps x 78 layers: 478 MB of JSON, 32 MB of zstd) and three uploads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_to_findings_timing() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let full = std::env::var("KINETOSCOPE_UI_BENCH").is_ok();
    let (steps, tries) = if full { (30, 3) } else { (3, 1) };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("decode-{steps}x78.json.zst"));
    let baseline = kinetoscope_generate::Variant::Baseline;
    std::fs::write(&path, generated(steps, 78, baseline)).unwrap();
    let mb = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
    let srv = TestServer::start(Opts::default()).await;
    let b = Browser::start().await;
    let mut times = Vec::new();
    for _ in 0..tries {
        b.client.goto(&srv.url).await.unwrap();
        let input = b.wait_for("#file-input", LONG).await;
        let t0 = Instant::now();
        input.send_keys(path.to_str().unwrap()).await.unwrap();
        b.wait_js("location.pathname.startsWith('/runs/')", LONG)
            .await;
        let to_run_page = t0.elapsed();
        let first = b
            .wait_js(
                "document.querySelector('#findings li') && document.querySelector('#findings li').innerText",
                Duration::from_secs(300),
            )
            .await;
        let total = t0.elapsed();
        // The founding story's finding leads: the cast copy.
        assert!(
            first.as_str().unwrap_or_default().contains("aten::copy_"),
            "first finding: {first}"
        );
        times.push((total.as_secs_f64(), to_run_page.as_secs_f64()));
    }
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (total, upload) = times[times.len() / 2];
    println!(
        "upload to findings ({steps} steps x 78 layers, {mb:.1} MB .json.zst, {tries} uploads): median {total:.2} s (upload done and run page open at {upload:.2} s); min {:.2} s, max {:.2} s",
        times[0].0,
        times[times.len() - 1].0
    );
    b.close().await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_rank_run_has_a_rank_selector_and_a_ranks_tab() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let mut form = reqwest::multipart::Form::new();
    for r in 0..8 {
        let bytes = std::fs::read(shared_trace(&format!(
            "param-dlrm-v100-8rank-rank{r}.json.gz"
        )))
        .unwrap();
        form = form.part(
            "file",
            reqwest::multipart::Part::bytes(bytes).file_name(format!("rank{r}.json.gz")),
        );
    }
    let created: kinetoscope_types::Created = srv
        .http
        .post(format!("{}/api/runs?name=dlrm-8", srv.url))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        srv.wait(&created.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let cross: kinetoscope_types::RanksSummary = srv
        .get_json(&format!("/api/runs/{}/ranks", created.id))
        .await;
    let b = Browser::start().await;
    b.client
        .goto(&format!("{}{}?tab=ranks", srv.url, created.url))
        .await
        .unwrap();
    b.wait_for("#ranks .hbar", LONG).await;
    assert_eq!(
        js(&b, "document.querySelectorAll('#ranks .hbar').length")
            .await
            .as_u64(),
        Some(8)
    );
    let straggler = js(
        &b,
        "document.querySelector('#ranks .hbar.straggler').dataset.rank",
    )
    .await;
    assert_eq!(
        straggler.as_str().map(|s| s.parse::<i64>().unwrap()),
        cross.slowest_rank
    );
    b.screenshot("tab-ranks").await;
    // The rank selector switches every tab to that rank's summary.
    b.client
        .goto(&format!("{}{}?tab=ops&rank=3", srv.url, created.url))
        .await
        .unwrap();
    b.wait_for("#ops-table tbody tr", LONG).await;
    assert_eq!(
        js(&b, "document.querySelector('#rank-select').value")
            .await
            .as_str(),
        Some("3")
    );
    let s3: kinetoscope_types::Summary = srv
        .get_json(&format!("/api/runs/{}/summary?rank=3", created.id))
        .await;
    assert_eq!(
        js(&b, "document.querySelector('#stat-steps').innerText")
            .await
            .as_str(),
        Some(s3.steps_stats.count.to_string().as_str())
    );
    let first = js(
        &b,
        "document.querySelector('#ops-table tbody tr').dataset.op",
    )
    .await;
    assert_eq!(first.as_str(), Some(top_op_by_self_device(&s3).as_str()));
    // Every rank's GPU streams in one view, the straggler marked, the
    // collectives highlighted on every rank at once.
    b.client
        .goto(&format!(
            "{}{}?tab=timeline&ranks=all",
            srv.url, created.url
        ))
        .await
        .unwrap();
    let ready = "window.__stackedLayout && (() => { const l = JSON.parse(window.__stackedLayout);         return l.fetched >= l.lanes && window.__stackedLayout; })()";
    let lay: serde_json::Value =
        serde_json::from_str(b.wait_js(ready, LONG).await.as_str().unwrap()).unwrap();
    let sides = lay["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 8, "eight lanes");
    for (r, s) in sides.iter().enumerate() {
        assert_eq!(s["rank"].as_i64(), Some(r as i64));
        assert!(
            !s["lanes"].as_array().unwrap().is_empty(),
            "rank {r} has GPU lanes"
        );
        assert_eq!(
            s["marked"].as_bool(),
            Some(Some(r as i64) == cross.slowest_rank)
        );
    }
    b.client
        .find(Locator::Css("#highlight-collectives"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let lay: serde_json::Value = serde_json::from_str(
        b.wait_js(
            "(() => { const l = JSON.parse(window.__stackedLayout);              return l.sides.filter(s => s.hits.events > 0).length >= 8 && window.__stackedLayout; })()",
            LONG,
        )
        .await
        .as_str()
        .unwrap(),
    )
    .unwrap();
    for s in lay["sides"].as_array().unwrap() {
        for n in s["hits"]["names"].as_array().unwrap() {
            assert!(n.as_str().unwrap().to_lowercase().contains("nccl"), "{n}");
        }
    }
    assert!(js(&b, "location.search")
        .await
        .as_str()
        .unwrap()
        .contains("hl=nccl"));
    b.screenshot("ranks-timeline").await;
    b.close().await;
    srv.stop().await;
}

/// The timeline of a shared trace: every track drawn, a click on a kernel
/// opens its details with its launch and the op that issued it, the search
/// counts as many occurrences as the kernels table has calls, and a URL with
/// `start_ns`/`end_ns` restores the view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_shows_a_kernel_and_its_launching_op() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let created = srv
        .upload_file(
            &shared_trace("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz"),
            "qwen",
        )
        .await;
    assert_eq!(
        srv.wait(&created.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let id = &created.id;
    let summary: Summary = srv.get_json(&format!("/api/runs/{id}/summary")).await;
    // A kernel with a known launching op (its first launch chain).
    let k = summary
        .kernels
        .iter()
        .find(|k| k.launched_by.first().is_some_and(|c| !c.chain.is_empty()) && k.calls >= 2)
        .unwrap()
        .clone();
    let found: kinetoscope_types::TimelineSearch = srv
        .http
        .get(format!("{}/api/runs/{id}/timeline/search", srv.url))
        .query(&[("q", k.name.as_str())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        found.matches, k.calls,
        "search counts what the kernels table counts"
    );
    // An occurrence whose launch is in the file (some ran before the
    // profiling window opened).
    let gpu_track = found.tracks[0].id;
    let w: kinetoscope_types::TimelineWindow = srv
        .get_json(&format!(
            "/api/runs/{id}/timeline/window?track={gpu_track}&px=16384"
        ))
        .await;
    let mut picked = None;
    for sl in w
        .slices
        .iter()
        .filter(|sl| sl.count == 1 && sl.name == k.name)
    {
        let ev: kinetoscope_types::TimelineEvent = srv
            .get_json(&format!("/api/runs/{id}/timeline/event/{}", sl.event))
            .await;
        if ev.launch.is_some() && !ev.parents.is_empty() {
            picked = Some(ev);
            break;
        }
    }
    let ev = picked.expect("an occurrence with its launch");
    let first = kinetoscope_types::TimelineFirst {
        event: ev.event,
        start_ns: ev.start_ns,
    };
    let op = ev.parents[0].name.clone();
    // Open the timeline zoomed around that kernel, by URL (inside the trace).
    let info: kinetoscope_types::TimelineInfo =
        srv.get_json(&format!("/api/runs/{id}/timeline")).await;
    let pad = ev.dur_ns.max(1000);
    let (s, e) = (
        (first.start_ns - pad).max(info.start_ns),
        (first.start_ns + 3 * pad).min(info.end_ns),
    );
    let b = Browser::start().await;
    b.client
        .goto(&format!(
            "{}{}?tab=timeline&start_ns={s}&end_ns={e}",
            srv.url, created.url
        ))
        .await
        .unwrap();
    b.wait_for("#timeline-canvas", LONG).await;
    let layout = b
        // Every track's window has arrived and been drawn.
        .wait_js("window.__timelineLayout && JSON.parse(window.__timelineLayout).fetched >= JSON.parse(window.__timelineLayout).lanes.length && window.__timelineLayout", LONG)
        .await;
    let l: serde_json::Value = serde_json::from_str(layout.as_str().unwrap()).unwrap();
    // The view came from the URL.
    assert!((l["start"].as_f64().unwrap() - s as f64).abs() < 2.0, "{l}");
    assert!((l["end"].as_f64().unwrap() - e as f64).abs() < 2.0, "{l}");
    // Click the kernel: its lane, its row, a pixel inside it.
    let lane = l["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["track"] == ev.track)
        .unwrap();
    let width = l["width"].as_f64().unwrap();
    let x = l["gutter"].as_f64().unwrap()
        + (first.start_ns as f64 + ev.dur_ns as f64 / 2.0 - s as f64) / (e - s) as f64 * width;
    let y = lane["top"].as_f64().unwrap()
        + l["header_h"].as_f64().unwrap()
        + (ev.row as f64 + 0.5) * l["row_h"].as_f64().unwrap();
    let click = format!(
        "(() => {{ const c = document.getElementById('timeline-canvas'); const r = c.getBoundingClientRect();
           const o = {{bubbles: true, clientX: r.left + {x}, clientY: r.top + {y}, buttons: 1}};
           c.dispatchEvent(new MouseEvent('mousedown', o)); c.dispatchEvent(new MouseEvent('mouseup', o));
           c.dispatchEvent(new MouseEvent('click', o)); return true; }})()"
    );
    // A slow machine may still be drawing: click again until the details open.
    for _ in 0..20 {
        js(&b, &click).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        if js(&b, "!!document.querySelector('#timeline-details')").await == serde_json::json!(true)
        {
            break;
        }
    }
    b.wait_for("#timeline-details", LONG).await;
    let details = b
        .wait_js(
            "document.querySelector('#timeline-details').innerText",
            LONG,
        )
        .await;
    let text = details.as_str().unwrap();
    assert!(text.contains("Launched by"), "{text}");
    let parents = js(&b, "document.querySelector('#details-parents') && document.querySelector('#details-parents').innerText").await;
    let short_op: String = op.chars().take(60).collect();
    assert!(
        parents.as_str().unwrap_or("").contains(&short_op),
        "{parents} does not name {op}"
    );
    b.screenshot("timeline").await;

    // The keyboard selects too (the canvas has the focus): up goes from the
    // kernel to the op around its launch, down back to a GPU op of that op,
    // and Escape clears the selection.
    let press = |k: &str| {
        format!(
            "(() => {{ const c = document.getElementById('timeline-canvas'); c.focus();
               c.dispatchEvent(new KeyboardEvent('keydown', {{key: '{k}', bubbles: true}})); return true; }})()"
        )
    };
    js(&b, &press("ArrowUp")).await;
    b.wait_js(
        &format!(
            "document.querySelector('#timeline-details h3') && document.querySelector('#timeline-details h3').title === {}",
            serde_json::to_string(&op).unwrap()
        ),
        LONG,
    )
    .await;
    js(&b, &press("ArrowDown")).await;
    b.wait_js(
        "document.querySelector('#timeline-details h3') && /^(kernel|memcpy|memset) /.test(document.querySelector('#timeline-details p').innerText)",
        LONG,
    )
    .await;
    js(&b, &press("Escape")).await;
    b.wait_js("document.querySelector('#timeline-details') === null", LONG)
        .await;

    // Show on timeline from the kernels table: the name highlighted, the count shown.
    b.client
        .goto(&format!(
            "{}{}?tab=kernels&kernel={}",
            srv.url,
            created.url,
            js_sys_free_encode(&k.name)
        ))
        .await
        .unwrap();
    b.wait_for("#kernel-on-timeline", LONG)
        .await
        .click()
        .await
        .unwrap();
    let matches = b.wait_js("document.querySelector('#timeline-matches') && document.querySelector('#timeline-matches').innerText", LONG).await;
    assert_eq!(matches.as_str().unwrap(), format!("{} matches", k.calls));

    // The canvas follows the window's size (the shared viewport refits it
    // on every resize and the view is drawn again at the new width).
    let before = b
        .wait_js(
            "window.__timelineLayout && JSON.parse(window.__timelineLayout).width",
            LONG,
        )
        .await
        .as_f64()
        .unwrap();
    let inner = js(&b, "window.innerWidth").await.as_f64().unwrap();
    let narrower = (inner as u32).saturating_sub(300).max(700);
    let (_, _, _, outer_h) = b.client.get_window_rect().await.unwrap();
    b.client
        .set_window_size(
            narrower
                + (js(&b, "window.outerWidth - window.innerWidth")
                    .await
                    .as_f64()
                    .unwrap() as u32),
            outer_h as u32,
        )
        .await
        .unwrap();
    let after = b
        .wait_js(
            &format!(
                "window.innerWidth !== {inner} && window.__timelineLayout && JSON.parse(window.__timelineLayout).width !== {before} && JSON.parse(window.__timelineLayout).width"
            ),
            LONG,
        )
        .await
        .as_f64()
        .unwrap();
    assert!(
        after < before,
        "the plot narrowed with the window: {before} -> {after}"
    );
    let css_width = js(
        &b,
        "document.getElementById('timeline-canvas').getBoundingClientRect().width",
    )
    .await
    .as_f64()
    .unwrap();
    assert!(
        (css_width - after - 170.0).abs() < 2.0,
        "the canvas is the plot and its gutter wide: {css_width} vs {after}"
    );

    // At 1920x1080 and at 1400x900 the canvas fills the box that holds it
    // and no more (sized from the box, not the window: at 1920 px a canvas
    // sized from the window hid its last 320 px), and its height is its
    // lanes', so the details below it are in view.
    for (w, h) in [(1920u32, 1080u32), (1400, 900)] {
        set_inner_size(&b, w, h).await;
        let fit = b
            .wait_js(
                &format!(
                    "window.innerWidth === {w} && (() => {{ \
                       const c = document.getElementById('timeline-canvas'); \
                       const box = c.parentElement; \
                       const cw = c.getBoundingClientRect().width; \
                       return Math.abs(cw - box.clientWidth) <= 1 \
                         && Math.abs(JSON.parse(window.__timelineLayout).width + 170 - cw) <= 1 \
                         && [cw, box.clientWidth, c.getBoundingClientRect().height]; }})()"
                ),
                LONG,
            )
            .await;
        let fit = fit.as_array().unwrap();
        let (cw, ch) = (fit[0].as_f64().unwrap(), fit[2].as_f64().unwrap());
        assert!(
            cw > 0.7 * w as f64 && cw < w as f64,
            "at {w}x{h} the canvas is {cw} px wide in a box of {}",
            fit[1]
        );
        assert!(ch < h as f64, "at {w}x{h} the canvas is {ch} px high");
    }

    // A window that cannot be fetched says so on the page (the run was
    // deleted meanwhile), where it used to leave the old picture silently.
    assert!(js(&b, "document.querySelector('#window-error') === null")
        .await
        .as_bool()
        .unwrap());
    let del = srv
        .http
        .delete(format!("{}/api/runs/{id}", srv.url))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    js(
        &b,
        "[...document.querySelectorAll('#timeline button')].find(x => x.innerText === 'Whole trace').click() || true",
    )
    .await;
    let shown = b
        .wait_js(
            "document.querySelector('#window-error') && document.querySelector('#window-error').innerText",
            LONG,
        )
        .await;
    assert!(
        shown.as_str().unwrap().contains("could not be loaded"),
        "{shown}"
    );
    b.close().await;
}

/// Percent-encodes a query value (no JS here).
fn js_sys_free_encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// Timeline timing (`make bench-ui` runs it on the 30 x 78 trace; `make
/// test` on a small one as a smoke test): first frame after the WASM
/// started, then 60 scripted zoom and pan steps from the whole trace down to
/// one kernel, each timed from the input event to the end of the redraw
/// that answers it (Canvas 2D commands submitted; the finer data that
/// arrives later is drawn again), and the JS heap at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_timing() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let full = std::env::var("KINETOSCOPE_UI_BENCH").is_ok();
    // `KINETOSCOPE_UI_STEPS=300 make bench-ui`: the 300-step story.
    let steps: u32 = std::env::var("KINETOSCOPE_UI_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full { 30 } else { 2 });
    let layers = if full { 78 } else { 8 };
    // The cache `kinetoscope serve` has by default: the 300-step index
    // (about 100 MB loaded) does not fit the tests' 64 MB.
    let srv = TestServer::start(Opts {
        timeline_cache_mb: 512,
        ..Default::default()
    })
    .await;
    let p = kinetoscope_generate::DecodeParams {
        steps,
        layers,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    let created = srv
        .upload(zstd::encode_all(&json[..], 3).unwrap(), "timeline-timing")
        .await;
    drop(json);
    assert_eq!(
        srv.wait(&created.id, Duration::from_secs(600)).await.status,
        kinetoscope_types::RunStatus::Done
    );
    // At 1400 and 1920 px wide (the bench; the smoke test at 1400 only).
    let widths: &[u32] = if full { &[1400, 1920] } else { &[1400] };
    for &width in widths {
        let b = Browser::start().await;
        let height = js(&b, "window.innerHeight").await.as_u64().unwrap() as u32;
        set_inner_size(&b, width, height).await;
        b.client
            .goto(&format!("{}{}?tab=timeline", srv.url, created.url))
            .await
            .unwrap();
        let first = b
            .wait_js(
                "window.__timelineLayout && JSON.parse(window.__timelineLayout).fetched > 0 && JSON.parse(window.__timelineLayout).at - window.__kinetoscopeStart",
                LONG,
            )
            .await
            .as_f64()
            .unwrap();
        // Where the first frame's time went: each API request the page made
        // until then, from and to (ms after the WASM started).
        let requests = js(
            &b,
            "performance.getEntriesByType('resource').filter(e => e.name.includes('/api/')).map(e => \
             e.name.replace(/^.*\\/api\\/runs\\/[^/?]+/, '').replace(/\\?.*$/, '') + ' ' + \
             Math.round(e.startTime - window.__kinetoscopeStart) + '-' + \
             Math.round(e.responseEnd - window.__kinetoscopeStart)).join(', ')",
        )
        .await;
        println!(
            "Before the first frame ({width} px): {}",
            requests.as_str().unwrap_or("")
        );
        let (frames, heap_mb, span) = zoom_and_pan(&b, "timeline-canvas", "__timelineLayout").await;
        // The last view settles and fetches.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let fetched = js(
            &b,
            "performance.getEntriesByType('resource').filter(e => e.name.includes('/timeline/window')).length",
        )
        .await
        .as_f64()
        .unwrap();
        println!(
            "Timeline timing ({steps} steps x {layers} layers, {width} px): first frame {first:.0} ms after the WASM started; 60 zoom/pan steps down to a {span:.0} ns view: median {:.1} ms, p95 {:.1} ms, max {:.1} ms (input event to redraw submitted); {:.2} window fetches per wheel event ({fetched} for 40); JS heap {heap_mb:.0} MB",
            frames[30],
            frames[56],
            frames[59],
            fetched / 40.0,
        );
        // The view reached a single kernel's scale.
        assert!(span < 100_000.0, "{span}");
        b.close().await;
    }
    srv.stop().await;
}

/// 60 scripted zoom and pan steps on a canvas (wheel zooms in around the
/// middle, every third step a `d` key pans), each timed from the input event
/// to the end of the redraw that answers it (the layout record's `at`
/// moves); returns the sorted frame times, the JS heap (MB) and the final
/// span (ns).
async fn zoom_and_pan(b: &Browser, canvas: &str, layout: &str) -> (Vec<f64>, f64, f64) {
    let script = r#"const done = arguments[arguments.length - 1];
            (async () => {
              const c = document.getElementById('CANVAS');
              const r = c.getBoundingClientRect();
              const lay = () => JSON.parse(window.LAYOUT);
              performance.clearResourceTimings();
              const frames = [];
              for (let k = 0; k < 60; k++) {
                const before = lay().at;
                const t0 = performance.now();
                if (k % 3 === 2) {
                  c.dispatchEvent(new KeyboardEvent('keydown', {key: 'd', bubbles: true, cancelable: true}));
                } else {
                  c.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: r.left + 170 + (r.width - 170) / 2,
                    clientY: r.top + 60, bubbles: true, cancelable: true}));
                }
                let t1 = null;
                for (let i = 0; i < 500 && t1 === null; i++) {
                  await new Promise(res => setTimeout(res, 0));
                  const l = lay();
                  if (l.at > before && l.at >= t0) t1 = l.at;
                }
                frames.push((t1 === null ? performance.now() : t1) - t0);
                await new Promise(res => requestAnimationFrame(res));
              }
              const l = lay();
              done({frames, heap: performance.memory ? performance.memory.usedJSHeapSize : 0, span: l.end - l.start});
            })();"#
        .replace("CANVAS", canvas)
        .replace("LAYOUT", layout);
    let out = b.client.execute_async(&script, vec![]).await.unwrap();
    let mut frames: Vec<f64> = out["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(frames.len(), 60);
    frames.sort_by(f64::total_cmp);
    (
        frames,
        out["heap"].as_f64().unwrap() / 1e6,
        out["span"].as_f64().unwrap(),
    )
}

/// Diff timeline timing (`make bench-ui`: two 30 x 78 runs, baseline and
/// gather-then-cast; `make test`: a small pair as a smoke test): first frame
/// of the aligned view after the WASM started, 60 zoom/pan steps, JS heap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_timeline_timing() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let full = std::env::var("KINETOSCOPE_UI_BENCH").is_ok();
    let (steps, layers) = if full { (30, 78) } else { (2, 8) };
    let srv = TestServer::start(Opts::default()).await;
    let (a, b_run) = baseline_and_patch(&srv, steps, layers).await;
    let b = Browser::start().await;
    b.client
        .goto(&format!(
            "{}/diff/{}/{}?view=timeline",
            srv.url, a.id, b_run.id
        ))
        .await
        .unwrap();
    let first = b
        .wait_js(
            "window.__stackedLayout && (() => { const l = JSON.parse(window.__stackedLayout); \
             return l.fetched >= l.lanes && l.at - window.__kinetoscopeStart; })()",
            LONG,
        )
        .await
        .as_f64()
        .unwrap();
    let (frames, heap_mb, span) = zoom_and_pan(&b, "stacked-canvas", "__stackedLayout").await;
    println!(
        "Diff timeline timing (2 runs x {steps} steps x {layers} layers): first frame with both runs {first:.0} ms after the WASM started; 60 zoom/pan steps down to a {span:.0} ns view: median {:.1} ms, p95 {:.1} ms, max {:.1} ms; JS heap {heap_mb:.0} MB",
        frames[30],
        frames[56],
        frames[59],
    );
    assert!(span < 100_000.0, "{span}");
    b.close().await;
    srv.stop().await;
}

/// The app runs under its Content-Security-Policy: every page and tab
/// (timeline and diff included) renders, and no browser reports a
/// violation; responses carry the security and cache headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_runs_under_its_security_policy() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let a = srv
        .upload_file(
            &shared_trace("tracelens-h100-qwen1.5-0.5b-chat-infer.json.gz"),
            "a",
        )
        .await;
    let b_run = srv
        .upload_file(
            &shared_trace("tracelens-mi300x-qwen1.5-0.5b-chat-infer.json.gz"),
            "b",
        )
        .await;
    for id in [&a.id, &b_run.id] {
        assert_eq!(
            srv.wait(id, LONG).await.status,
            kinetoscope_types::RunStatus::Done
        );
    }
    // Headers.
    let page = srv
        .http
        .get(format!("{}{}", srv.url, a.url))
        .send()
        .await
        .unwrap();
    let h = page.headers();
    let csp = h["content-security-policy"].to_str().unwrap().to_string();
    assert!(
        csp.contains("script-src 'self' 'wasm-unsafe-eval' 'sha256-"),
        "{csp}"
    );
    assert!(
        csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    let api = srv
        .http
        .get(format!("{}/api/runs/{}/summary", srv.url, a.id))
        .send()
        .await
        .unwrap();
    assert_eq!(api.headers()["cache-control"], "private, no-store");

    let b = Browser::start().await;
    let mut pages: Vec<(String, &str)> = vec![(String::new(), "#runs-table, table")];
    for tab in [
        "findings", "ops", "kernels", "steps", "layers", "gpu", "timeline",
    ] {
        pages.push((format!("{}?tab={tab}", a.url), "#tab-body"));
    }
    pages.push((format!("/diff/{}/{}", a.id, b_run.id), "body"));
    for (path, css) in &pages {
        b.client.goto(&format!("{}{path}", srv.url)).await.unwrap();
        b.wait_for(css, LONG).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    b.wait_js("window.__timelineLayout || true", LONG).await;
    b.close().await;
    // Reports travel asynchronously: give them a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = srv
        .http
        .get(format!("{}/metrics", srv.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("kinetoscope_csp_violations_total"))
        .unwrap_or("missing");
    assert_eq!(
        line, "kinetoscope_csp_violations_total 0",
        "violations were reported"
    );
}

/// A trace made with `profile_memory=True` and PM sampling: the Memory tab
/// draws the curve and lists what the cast allocates; the timeline draws
/// the memory curve and the counters as line tracks under the slices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_tab_and_counter_tracks() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let p = kinetoscope_generate::DecodeParams {
        steps: 2,
        layers: 6,
        memory: true,
        counters: true,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    let created = srv
        .upload(zstd::encode_all(&json[..], 3).unwrap(), "memory")
        .await;
    assert_eq!(
        srv.wait(&created.id, LONG).await.status,
        kinetoscope_types::RunStatus::Done
    );
    let b = Browser::start().await;
    b.client
        .goto(&format!("{}{}?tab=memory", srv.url, created.url))
        .await
        .unwrap();
    b.wait_for(".memory-chart path.mem-allocated", LONG).await;
    let first_op = b
        .wait_js(
            "document.querySelector('.memory-signatures tbody tr td') && document.querySelector('.memory-signatures tbody tr td').textContent",
            LONG,
        )
        .await;
    assert_eq!(first_op.as_str(), Some("aten::_to_copy"));
    b.screenshot("memory-tab").await;
    b.client
        .goto(&format!("{}{}?tab=timeline", srv.url, created.url))
        .await
        .unwrap();
    let layout = b
        .wait_js(
            "window.__timelineLayout && JSON.parse(window.__timelineLayout).line_tracks.length >= 3 && window.__timelineLayout",
            LONG,
        )
        .await;
    let l: serde_json::Value = serde_json::from_str(layout.as_str().unwrap()).unwrap();
    let tracks: Vec<&str> = l["line_tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tracks,
        [
            "memory cuda:0 allocated",
            "GPU 0 · DRAM Throughput",
            "GPU 0 · SM Active"
        ]
    );
    b.screenshot("timeline-line-tracks").await;
    b.close().await;
    srv.stop().await;
}

/// Every element with text of its own, visible and enabled, whose colour is
/// below 4.5:1 on the background it is drawn over (its nearest opaque
/// ancestor's, with translucent layers composited), in the theme now set:
/// `[text, colour, background, ratio]` each.
const LOW_CONTRAST: &str = r#"(() => {
  const rgba = s => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return [0,0,0,0];
    const p = m[1].split(',').map(x => parseFloat(x)); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, under) => { const a = top[3];
    return [0,1,2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]); };
  const bg = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let out = [255, 255, 255, 1];
    for (let i = layers.length - 1; i >= 0; i--) out = over(layers[i], out);
    return out; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg') || el.disabled || el.closest('[disabled]')) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const r = el.getBoundingClientRect(); const st = getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || st.visibility === 'hidden' || parseFloat(st.opacity) === 0) continue;
    const b = bg(el); const fg = over(rgba(st.color), b);
    const l1 = lum(fg), l2 = lum(b);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < 4.5) bad.push([el.textContent.trim().slice(0, 40), st.color, 'rgb(' + b.slice(0, 3).map(Math.round).join(',') + ')', Math.round(ratio * 100) / 100]);
  }
  return bad; })()"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_titled_readable_in_both_themes_and_tabs_follow_the_arrows() {
    require_app();
    let _one_at_a_time = BROWSER_LOCK.lock().await;
    let srv = TestServer::start(Opts::default()).await;
    let (a, b_run) = baseline_and_patch(&srv, 3, 6).await;
    let b = Browser::start().await;
    // Each run tab: its query, what shows it is drawn, and its name.
    let tabs = [
        ("", "#findings", "Findings"),
        ("?tab=ops", "#ops-table tbody tr", "Ops"),
        ("?tab=kernels", "#kernels-table tbody tr", "Kernels"),
        ("?tab=steps", "#tab-body table", "Steps"),
        ("?tab=layers", "#layers-table tbody tr", "Layers"),
        ("?tab=memory", "figure.memory-chart", "Memory"),
        ("?tab=timeline", "#timeline-canvas", "Timeline"),
        ("?tab=gpu", "#tab-body table", "GPU time"),
    ];
    let mut pages: Vec<(String, &str, String)> = tabs
        .iter()
        .map(|(query, ready, tab)| {
            (
                format!("{}{}{query}", srv.url, a.url),
                *ready,
                format!("baseline · {tab} · Kinetoscope"),
            )
        })
        .collect();
    pages.push((
        format!("{}/", srv.url),
        "table.runs tbody tr",
        "Runs · Kinetoscope".to_string(),
    ));
    pages.push((
        format!("{}/diff/{}/{}", srv.url, a.id, b_run.id),
        "#diff-headline",
        "baseline → gather-cast · Diff · Kinetoscope".to_string(),
    ));
    // A screenshot's name: the page's first two title parts.
    let shot_name = |title: &str| {
        title
            .split(" · ")
            .take(2)
            .collect::<Vec<_>>()
            .join("-")
            .replace(['→', ' '], "")
    };
    let mut low = Vec::new();
    for (url, ready, title) in &pages {
        b.client.goto(url).await.unwrap();
        b.wait_for(ready, LONG).await;
        let got = b
            .wait_js(
                &format!("document.title === {title:?} && document.title"),
                LONG,
            )
            .await;
        assert_eq!(got.as_str(), Some(title.as_str()));
        let shot = shot_name(title);
        b.screenshot(&format!("page-{shot}")).await;
        for theme in ["light", "dark"] {
            js(
                &b,
                &format!("(document.documentElement.dataset.theme = {theme:?}, 1)"),
            )
            .await;
            for bad in js(&b, LOW_CONTRAST).await.as_array().unwrap() {
                low.push(format!("{url} ({theme}): {bad}"));
            }
        }
    }
    assert!(low.is_empty(), "text below 4.5:1: {low:#?}");
    // Every page again at 1920x1080, for the screenshots (`-1920`).
    set_inner_size(&b, 1920, 1080).await;
    for (url, ready, title) in &pages {
        b.client.goto(url).await.unwrap();
        b.wait_for(ready, LONG).await;
        let shot = shot_name(title);
        b.screenshot(&format!("page-{shot}-1920")).await;
    }
    set_inner_size(&b, 1400, 900).await;
    // The check finds a pair below 4.5:1 (grey #999 on white: 2.85:1),
    // also under a translucent layer.
    js(
        &b,
        "(document.body.insertAdjacentHTML('beforeend', \
         '<div style=\"background:#fff\"><p style=\"background:rgba(255,255,255,0.5)\"><span id=probe style=\"color:#999\">probe</span></p></div>'), 1)",
    )
    .await;
    let found = js(&b, LOW_CONTRAST).await;
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r[0] == "probe" && r[3].as_f64().unwrap() < 3.0),
        "{found}"
    );

    // The run's tabs move with the arrow keys (the ARIA tabs pattern).
    b.client
        .goto(&format!("{}{}", srv.url, a.url))
        .await
        .unwrap();
    b.wait_for("#findings", LONG).await;
    b.client
        .execute(
            "document.getElementById('tab-findings').focus(); return 1;",
            vec![],
        )
        .await
        .unwrap();
    let active = b.client.active_element().await.unwrap();
    active.send_keys("\u{E014}").await.unwrap(); // ArrowRight
    let tab = b
        .wait_js(
            "new URLSearchParams(location.search).get('tab') === 'ops' && document.activeElement.id",
            LONG,
        )
        .await;
    assert_eq!(tab.as_str(), Some("tab-ops"));

    // "On timeline" from the first finding that names an op or kernel (on
    // this story trace: the FP8 -> BF16 cast) selects that op's kernel,
    // the one its launches spend the most time in, at its longest call
    // (the cast, not a small copy of the same kernel), and fits the view
    // to it and its launch.
    let summary: Summary = srv.get_json(&format!("/api/runs/{}/summary", a.id)).await;
    let f = summary
        .findings
        .iter()
        .find(|f| {
            f.name.is_some()
                && matches!(
                    f.tab,
                    Some(
                        kinetoscope_types::FindingTab::Ops | kinetoscope_types::FindingTab::Kernels
                    )
                )
        })
        .unwrap()
        .clone();
    let op = f.name.clone().unwrap();
    let kernel = if f.tab == Some(kinetoscope_types::FindingTab::Kernels) {
        op.clone()
    } else {
        summary
            .kernels
            .iter()
            .map(|k| (k.launched_from(&op).1, k.name.clone()))
            .max_by(|x, y| x.0.total_cmp(&y.0))
            .unwrap()
            .1
    };
    b.client
        .goto(&format!("{}{}", srv.url, a.url))
        .await
        .unwrap();
    b.wait_for("#findings .show-on-timeline", LONG)
        .await
        .click()
        .await
        .unwrap();
    let picked = b
        .wait_js(
            "document.querySelector('#timeline-details h3') && window.__timelineLayout && \
             [document.querySelector('#timeline-details h3').title, \
              new URLSearchParams(location.search).get('event'), \
              [JSON.parse(window.__timelineLayout).start, JSON.parse(window.__timelineLayout).end]]",
            LONG,
        )
        .await;
    assert_eq!(
        picked[0].as_str(),
        Some(kernel.as_str()),
        "{} selects its kernel",
        f.text
    );
    assert!(
        picked[1].as_str().is_some(),
        "the event is in the URL: {picked}"
    );
    let event: u32 = picked[1].as_str().unwrap().parse().unwrap();
    let found: kinetoscope_types::TimelineSearch = srv
        .get_json(&format!(
            "/api/runs/{}/timeline/search?rank=0&px=100&q={}",
            a.id,
            urlencode(&kernel)
        ))
        .await;
    assert_eq!(
        found.longest.map(|l| l.event),
        Some(event),
        "the longest call"
    );
    let span = picked[2][1].as_f64().unwrap() - picked[2][0].as_f64().unwrap();
    assert!(
        span < 5e7,
        "the view fits the kernel and its launch: {span} ns"
    );
    // The details sit beside the canvas (in view while panning), and say
    // what the call moved against the device's peak (issue 45).
    let beside = js(
        &b,
        "(() => { const d = document.getElementById('timeline-details').getBoundingClientRect(); \
          const c = document.querySelector('.timeline-canvas-wrap').getBoundingClientRect(); \
          return d.left >= c.right - 1 && d.top < c.bottom; })()",
    )
    .await;
    assert_eq!(beside, serde_json::json!(true), "details beside the canvas");
    if summary.device.as_ref().and_then(|d| d.peak_gbps).is_some() {
        let moved = b
            .wait_js(
                "document.querySelector('#details-bandwidth') && document.querySelector('#details-bandwidth').innerText",
                LONG,
            )
            .await;
        let moved = moved.as_str().unwrap();
        assert!(
            moved.starts_with("Moved ") && moved.contains("of the device's"),
            "{moved}"
        );
    }
    b.screenshot("on-timeline-from-a-finding").await;

    // A burst of wheel events fetches each lane's window once, when the
    // view settles (it fetched 2-3 times per event).
    b.wait_js(
        "window.__timelineLayout && JSON.parse(window.__timelineLayout).fetched >= JSON.parse(window.__timelineLayout).lanes.length",
        LONG,
    )
    .await;
    let fetches = b
        .client
        .execute_async(
            "const done = arguments[0]; performance.clearResourceTimings(); \
             const c = document.getElementById('timeline-canvas'); const r = c.getBoundingClientRect(); \
             for (let k = 0; k < 10; k++) c.dispatchEvent(new WheelEvent('wheel', {deltaY: -120, clientX: r.left + r.width / 2, clientY: r.top + 40, bubbles: true, cancelable: true})); \
             setTimeout(() => done([performance.getEntriesByType('resource').filter(e => e.name.includes('/timeline/window')).length, \
               JSON.parse(window.__timelineLayout).lanes.length]), 1500);",
            vec![],
        )
        .await
        .unwrap();
    let (n, lanes) = (fetches[0].as_u64().unwrap(), fetches[1].as_u64().unwrap());
    assert!(
        n >= 1 && n <= lanes,
        "10 wheel events fetched {n} windows for {lanes} lanes"
    );
    println!("10 wheel events: {n} window fetches for {lanes} lanes");

    // The timeline asks only for what the run has: no request answers 4xx
    // (the memory and counter probes, the favicon).
    b.client
        .goto(&format!("{}{}?tab=timeline", srv.url, a.url))
        .await
        .unwrap();
    b.wait_js(
        "window.__timelineLayout && JSON.parse(window.__timelineLayout).fetched > 0",
        LONG,
    )
    .await;
    // A resource's entry is written once its body is read: give the
    // page's own requests a second to end.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let failed = js(
        &b,
        "performance.getEntriesByType('resource').filter(e => e.responseStatus >= 400).map(e => e.name)",
    )
    .await;
    assert_eq!(failed, serde_json::json!([]), "requests that failed");
    // The check sees a request that fails.
    let seen = b
        .client
        .execute_async(
            "const done = arguments[0]; fetch('/api/runs/none-such/summary').then(r => r.text()).then(() => setTimeout(() => \
             done(performance.getEntriesByType('resource').filter(e => e.name.endsWith('/none-such/summary')).map(e => e.responseStatus)), 200));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(seen, serde_json::json!([404]));
    b.close().await;
    srv.stop().await;
}
