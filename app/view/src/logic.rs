//! Pure logic of the dashboard: sorting, filtering, grouping, colours,
//! outliers, URLs. No DOM here, so it is unit-tested in the browser and on
//! the host alike.

use kinetoscope_types::{KernelCategory, KernelRow, OpRow, ShapeGroup, StepRow};

use kinetoscope_types::table::{filter_sort, TableRow};
pub use kinetoscope_types::table::{KERNEL_COLUMNS, OP_COLUMNS};

/// Filters and sorts a table as the API does (one rule for both); an
/// unknown column falls back to the table's default.
fn shown<T: TableRow + Clone>(rows: &[T], filter: &str, col: &str, asc: bool) -> Vec<T> {
    filter_sort(rows, filter, Some(col), asc)
        .or_else(|_| filter_sort(rows, filter, None, asc))
        .unwrap_or_default()
        .into_iter()
        .cloned()
        .collect()
}

/// Sorts ops by a column (text columns by name; ties by name).
pub fn sort_ops(rows: &mut [OpRow], col: &str, asc: bool) {
    let sorted = shown(rows, "", col, asc);
    rows.clone_from_slice(&sorted);
}

/// Sorts kernels by a column.
pub fn sort_kernels(rows: &mut [KernelRow], col: &str, asc: bool) {
    let sorted = shown(rows, "", col, asc);
    rows.clone_from_slice(&sorted);
}

/// The ops whose name matches the filter (every word, case-insensitively).
pub fn filter_ops(rows: &[OpRow], filter: &str) -> Vec<OpRow> {
    rows.iter()
        .filter(|o| kinetoscope_types::table::matches(*o, filter))
        .cloned()
        .collect()
}

/// The kernels whose full or short name matches the filter.
pub fn filter_kernels(rows: &[KernelRow], filter: &str) -> Vec<KernelRow> {
    rows.iter()
        .filter(|k| kinetoscope_types::table::matches(*k, filter))
        .cloned()
        .collect()
}

/// One op row per (op, input shapes) for the "group by shapes" view.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeRow {
    /// The op's name.
    pub op: String,
    /// One of its input signatures.
    pub group: ShapeGroup,
}

/// Expands ops into their shape groups, sorted by self device time.
pub fn group_by_shapes(rows: &[OpRow]) -> Vec<ShapeRow> {
    let mut out: Vec<ShapeRow> = rows
        .iter()
        .flat_map(|o| {
            o.input_shapes.iter().map(move |g| ShapeRow {
                op: o.name.clone(),
                group: g.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.group
            .self_device_us
            .total_cmp(&a.group.self_device_us)
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.group.shapes.cmp(&b.group.shapes))
    });
    out
}

/// The colour of a kernel category (CSS variable name, one per category;
/// a new category does not compile until it has one).
pub fn category_color(cat: KernelCategory) -> &'static str {
    match cat {
        KernelCategory::Gemm => "var(--c-gemm)",
        KernelCategory::Attention => "var(--c-attention)",
        KernelCategory::Communication => "var(--c-communication)",
        KernelCategory::Memory => "var(--c-memory)",
        KernelCategory::Elementwise => "var(--c-elementwise)",
        KernelCategory::Reduction => "var(--c-reduction)",
        KernelCategory::Norm => "var(--c-norm)",
        KernelCategory::Other => "var(--c-other)",
    }
}

/// Kernel categories in legend order (a test checks it holds each once).
pub const CATEGORIES: [KernelCategory; 8] = [
    KernelCategory::Gemm,
    KernelCategory::Attention,
    KernelCategory::Memory,
    KernelCategory::Communication,
    KernelCategory::Elementwise,
    KernelCategory::Reduction,
    KernelCategory::Norm,
    KernelCategory::Other,
];

/// Which steps are slow: the rule the findings follow
/// ([`kinetoscope_types::steps::slow_steps`]).
pub fn step_outliers(steps: &[StepRow]) -> Vec<bool> {
    kinetoscope_types::steps::slow_steps(steps)
}

/// Round tick values for an axis from 0 to `max`: steps of 1, 2 or 5 times
/// a power of ten, about `want` intervals, none above `max`.
pub fn nice_ticks(max: f64, want: usize) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) || want == 0 {
        return vec![0.0];
    }
    let rough = max / want as f64;
    let mag = 10f64.powf(rough.log10().floor());
    // The round step whose count of intervals is nearest the wanted one.
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .min_by(|a, b| {
            let off = |s: f64| (max / s - want as f64).abs();
            off(*a).total_cmp(&off(*b))
        })
        .unwrap_or(mag);
    (0..)
        .map(|k| k as f64 * step)
        .take_while(|v| *v <= max * (1.0 + 1e-9))
        .collect()
}

/// A name shortened to `n` characters by cutting its middle, which keeps the
/// namespace and the distinguishing tail readable.
pub fn shorten(name: &str, n: usize) -> String {
    let len = name.chars().count();
    if len <= n || n < 5 {
        return name.to_string();
    }
    let head = (n - 1) * 2 / 3;
    let tail = n - 1 - head;
    let start: String = name.chars().take(head).collect();
    let end: String = name.chars().skip(len - tail).collect();
    format!("{start}…{end}")
}

/// Percent-encodes a query value.
pub fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A query string from pairs, leaving out empty values: `?tab=ops&q=copy`.
pub fn query_string(pairs: &[(String, String)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// Number of pages of `n` rows at `per` rows a page.
pub fn pages(n: usize, per: usize) -> usize {
    n.div_ceil(per.max(1)).max(1)
}

/// What a highlight on the diff's timeline adds up to in the diff's tables:
/// the kernels whose name matches (else the ops), summed on each side in the
/// diff's basis (`per step`), with their calls. `None` for an empty query.
pub fn highlight_totals(d: &kinetoscope_types::Diff, query: &str) -> Option<String> {
    use kinetoscope_types::units::{change_pct, time_us};
    let terms = crate::timeline::terms(query);
    if terms.is_empty() {
        return None;
    }
    let hit = |r: &&kinetoscope_types::DeltaRow| {
        crate::timeline::matches(&terms, &r.name.to_lowercase())
            || r.b_name
                .as_ref()
                .is_some_and(|n| crate::timeline::matches(&terms, &n.to_lowercase()))
    };
    let kernels: Vec<_> = d.kernels.iter().filter(hit).collect();
    let (rows, what) = if kernels.is_empty() {
        (d.ops.iter().filter(hit).collect::<Vec<_>>(), "op")
    } else {
        (kernels, "kernel")
    };
    if rows.is_empty() {
        return Some("No kernel or op of that name in the diff's tables.".into());
    }
    let sum = |f: fn(&kinetoscope_types::DeltaRow) -> f64| rows.iter().map(|r| f(r)).sum::<f64>();
    let (a, b) = (sum(|r| r.a_us), sum(|r| r.b_us));
    let (ac, bc) = (sum(|r| r.a_calls), sum(|r| r.b_calls));
    let change = if a > 0.0 { (b - a) / a * 100.0 } else { 0.0 };
    let n = rows.len();
    let what = match (what, n) {
        ("op", 1) => "op matches (self device time)",
        ("op", _) => "ops match (self device time)",
        (_, 1) => "kernel matches",
        _ => "kernels match",
    };
    Some(format!(
        "{n} {what}, {}: A {} ({}), B {} ({}), {}",
        d.basis,
        time_us(a),
        kinetoscope_types::units::calls(ac.round()),
        time_us(b),
        kinetoscope_types::units::calls(bc.round()),
        change_pct(change)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_within_the_axis() {
        assert_eq!(
            nice_ticks(99_100.0, 4),
            vec![0.0, 20_000.0, 40_000.0, 60_000.0, 80_000.0]
        );
        assert_eq!(nice_ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 4), vec![0.0]);
        let t = nice_ticks(123.4, 4);
        assert!(
            t.len() >= 3 && t.len() <= 6 && *t.last().unwrap() <= 123.4,
            "{t:?}"
        );
    }

    #[test]
    fn the_legend_holds_every_category_once() {
        for c in KernelCategory::ALL {
            assert_eq!(CATEGORIES.iter().filter(|k| *k == c).count(), 1, "{c}");
        }
        assert_eq!(CATEGORIES.len(), KernelCategory::ALL.len());
    }
}
