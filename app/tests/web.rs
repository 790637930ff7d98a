//! Unit tests of the dashboard's logic and components, run in headless
//! Chromium by wasm-bindgen-test-runner (`make test`).

use app::logic::*;
use kinetoscope_types::units;
use kinetoscope_types::{DiffBasis, KernelCategory, KernelRow, OpRow, ShapeGroup, StepRow};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn op(name: &str, self_device: f64, calls: u64) -> OpRow {
    OpRow {
        name: name.into(),
        kind: kinetoscope_types::OpKind::Op,
        calls,
        self_device_us: self_device,
        device_pct: self_device / 10.0,
        ..Default::default()
    }
}

#[wasm_bindgen_test]
fn units_format_for_people() {
    assert_eq!(units::time_us(0.5), "500 ns");
    assert_eq!(units::time_us(828.0), "828 µs");
    assert_eq!(units::time_us(93_200.0), "93.2 ms");
    assert_eq!(units::time_us(2_500_000.0), "2.50 s");
    assert_eq!(units::bytes(856e6), "856 MB");
    assert_eq!(units::rate_gbps(1031.0), "1.03 TB/s");
    assert_eq!(units::pct(69.31), "69.3%");
}

#[wasm_bindgen_test]
fn ops_sort_by_any_column_with_stable_ties() {
    let mut rows = vec![op("b", 5.0, 1), op("a", 5.0, 3), op("c", 9.0, 2)];
    sort_ops(&mut rows, "self_device", false);
    let names: Vec<&str> = rows.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["c", "a", "b"]);
    sort_ops(&mut rows, "calls", true);
    let names: Vec<&str> = rows.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["b", "c", "a"]);
    sort_ops(&mut rows, "name", false);
    assert_eq!(rows[0].name, "c");
}

#[wasm_bindgen_test]
fn kernels_sort_and_filter() {
    let k = |name: &str, short: &str, total: f64, cat: &str| KernelRow {
        name: name.into(),
        short_name: short.into(),
        total_us: total,
        category: cat.parse().unwrap(),
        ..Default::default()
    };
    let mut rows = vec![
        k("void x<1>", "x", 1.0, "gemm"),
        k("void y<2>", "y", 3.0, "memory"),
    ];
    sort_kernels(&mut rows, "total", false);
    assert_eq!(rows[0].short_name, "y");
    sort_kernels(&mut rows, "category", true);
    assert_eq!(rows[0].category, KernelCategory::Gemm);
    assert_eq!(filter_kernels(&rows, "Y<2").len(), 1);
}

#[wasm_bindgen_test]
fn filters_match_every_word_case_insensitively() {
    let rows = vec![
        op("aten::copy_", 1.0, 1),
        op("aten::to", 1.0, 1),
        op("nccl:all_reduce", 1.0, 1),
    ];
    assert_eq!(filter_ops(&rows, "COPY").len(), 1);
    assert_eq!(filter_ops(&rows, "aten").len(), 2);
    assert_eq!(filter_ops(&rows, "aten copy").len(), 1);
    assert_eq!(filter_ops(&rows, "").len(), 3);
}

#[wasm_bindgen_test]
fn shapes_group_outliers_urls_and_names() {
    let mut o = op("aten::copy_", 10.0, 3);
    o.input_shapes = vec![
        ShapeGroup {
            shapes: "[[2]]".into(),
            calls: 2,
            self_device_us: 2.0,
            ..Default::default()
        },
        ShapeGroup {
            shapes: "[[8]]".into(),
            calls: 1,
            self_device_us: 8.0,
            ..Default::default()
        },
    ];
    let g = group_by_shapes(&[o]);
    assert_eq!(g[0].group.shapes, "[[8]]");
    let steps: Vec<StepRow> = [10.0, 11.0, 10.5, 30.0]
        .iter()
        .map(|&d| StepRow {
            cpu_us: d,
            ..Default::default()
        })
        .collect();
    assert_eq!(step_outliers(&steps), [false, false, false, true]);
    // A prefill is compared with prefills only; a trailing step left out is
    // never red.
    let kind = |k: &str| k.parse::<kinetoscope_types::StepKind>().ok();
    let steps: Vec<StepRow> = [
        (50.0, kind("prefill"), false),
        (10.0, kind("decode"), false),
        (11.0, kind("decode"), false),
        (10.5, kind("decode"), false),
        (30.0, kind("decode"), false),
        (0.1, kind("decode"), true),
    ]
    .iter()
    .map(|&(d, kind, left_out)| StepRow {
        cpu_us: d,
        kind,
        left_out,
        ..Default::default()
    })
    .collect();
    assert_eq!(
        step_outliers(&steps),
        [false, false, false, false, true, false]
    );
    assert_eq!(
        query_string(&[
            ("tab".into(), "ops".into()),
            ("q".into(), "copy_ x".into()),
            ("e".into(), "".into())
        ]),
        "?tab=ops&q=copy_%20x"
    );
    assert_eq!(pages(201, 100), 3);
    assert_eq!(shorten("abcdefghijklmnopqrstuvwxyz", 10), "abcdef…xyz");
    assert_eq!(shorten("short", 10), "short");
}

fn body() -> web_sys::HtmlElement {
    web_sys::window()
        .unwrap()
        .document()
        .unwrap()
        .body()
        .unwrap()
}

#[wasm_bindgen_test]
async fn components_render_names_as_text() {
    let name =
        r#"<img src=x onerror="window.__xssUnit=1"> void at::native::elementwise_kernel<128, 4>"#
            .to_string();
    let n = name.clone();
    let _handle = leptos::mount::mount_to(body(), move || {
        view! { <div id="unit"><app::widgets::Name name=n.clone() max=30/><app::widgets::ShareBar pct=42.0/></div> }
    });
    leptos::task::tick().await;
    let el = web_sys::window()
        .unwrap()
        .document()
        .unwrap()
        .get_element_by_id("unit")
        .unwrap();
    assert!(
        el.query_selector("img").unwrap().is_none(),
        "markup must stay text"
    );
    let span: web_sys::HtmlElement = el
        .query_selector(".name")
        .unwrap()
        .unwrap()
        .unchecked_into();
    assert_eq!(
        span.get_attribute("title").as_deref(),
        Some(name.as_str()),
        "full name on hover"
    );
    assert!(
        span.inner_text().chars().count() <= 30,
        "shortened: {}",
        span.inner_text()
    );
    assert!(el.text_content().unwrap().contains("42.0%"));
}

#[wasm_bindgen_test]
fn highlight_totals_add_up_the_matching_rows_per_step() {
    use kinetoscope_types::{DeltaRow, Diff};
    let row = |name: &str, a_us: f64, b_us: f64, calls: f64| DeltaRow {
        name: name.into(),
        a_us,
        b_us,
        a_calls: calls,
        b_calls: calls,
        ..Default::default()
    };
    let d = Diff {
        basis: DiffBasis::PerStep,
        kernels: vec![
            row(
                "void unrolled_elementwise_kernel<cast>",
                64_000.0,
                5_000.0,
                78.0,
            ),
            row("ncclKernel_AllReduce", 300.0, 300.0, 156.0),
            row("ncclDevKernel_AllGather", 100.0, 50.0, 2.0),
        ],
        ops: vec![row("aten::copy_", 64_100.0, 5_100.0, 780.0)],
        ..Default::default()
    };
    assert_eq!(highlight_totals(&d, " "), None);
    assert_eq!(
        highlight_totals(&d, "Elementwise").unwrap(),
        "1 kernel matches, per step: A 64.0 ms (78 calls), B 5.00 ms (78 calls), -92.2%"
    );
    // Either term; kernels before ops.
    assert_eq!(
        highlight_totals(&d, "allreduce|allgather").unwrap(),
        "2 kernels match, per step: A 400 µs (158 calls), B 350 µs (158 calls), -12.5%"
    );
    let ops = highlight_totals(&d, "copy_").unwrap();
    assert!(
        ops.starts_with("1 op matches (self device time), per step"),
        "{ops}"
    );
    assert!(highlight_totals(&d, "nothing")
        .unwrap()
        .starts_with("No kernel"));
}
