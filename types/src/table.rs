//! The one filter-and-sort of the op and kernel tables, used by the API
//! (`/api/runs/{id}/ops?q=&sort=&dir=`) and by the app, so a link gives the
//! same rows in both.

use crate::{KernelRow, OpRow};

/// A row of a filterable, sortable table.
pub trait TableRow {
    /// The columns: (key in URLs and query strings, header).
    const COLUMNS: &'static [(&'static str, &'static str)];
    /// The column sorted by when none is given.
    const DEFAULT_SORT: &'static str;
    /// The full name.
    fn name(&self) -> &str;
    /// The short name (the full name where there is none).
    fn short_name(&self) -> &str {
        self.name()
    }
    /// The number a numeric column sorts by; `None` for text columns.
    fn sort_value(&self, col: &str) -> Option<f64>;
    /// The text a text column sorts by; `None` for numeric columns.
    fn sort_text(&self, col: &str) -> Option<&str>;
}

/// Columns of the op table.
pub const OP_COLUMNS: &[(&str, &str)] = &[
    ("name", "Op"),
    ("calls", "Calls"),
    ("self_cpu", "Self CPU"),
    ("cpu_total", "CPU total"),
    ("self_device", "Self device"),
    ("device_total", "Device total"),
    ("avg_device", "Avg device"),
    ("device_pct", "Share"),
    ("bytes", "Bytes/call"),
    ("gbps", "Rate"),
];

/// Columns of the kernel table.
pub const KERNEL_COLUMNS: &[(&str, &str)] = &[
    ("name", "Kernel"),
    ("category", "Category"),
    ("calls", "Calls"),
    ("total", "Total"),
    ("avg", "Avg"),
    ("min", "Min"),
    ("max", "Max"),
    ("pct", "Share"),
];

impl TableRow for OpRow {
    const COLUMNS: &'static [(&'static str, &'static str)] = OP_COLUMNS;
    const DEFAULT_SORT: &'static str = "self_device";
    fn name(&self) -> &str {
        &self.name
    }
    fn sort_value(&self, col: &str) -> Option<f64> {
        OpRow::sort_value(self, col)
    }
    fn sort_text(&self, col: &str) -> Option<&str> {
        (col == "name").then_some(self.name.as_str())
    }
}

impl TableRow for KernelRow {
    const COLUMNS: &'static [(&'static str, &'static str)] = KERNEL_COLUMNS;
    const DEFAULT_SORT: &'static str = "total";
    fn name(&self) -> &str {
        &self.name
    }
    fn short_name(&self) -> &str {
        &self.short_name
    }
    fn sort_value(&self, col: &str) -> Option<f64> {
        KernelRow::sort_value(self, col)
    }
    fn sort_text(&self, col: &str) -> Option<&str> {
        match col {
            "name" => Some(&self.short_name),
            "category" => Some(self.category.as_str()),
            _ => None,
        }
    }
}

/// Whether a row matches a filter: case-insensitively, every
/// space-separated word appears in its name or in its short name.
pub fn matches<T: TableRow>(row: &T, filter: &str) -> bool {
    let (name, short) = (row.name().to_lowercase(), row.short_name().to_lowercase());
    filter.split_whitespace().all(|w| {
        let w = w.to_lowercase();
        name.contains(&w) || short.contains(&w)
    })
}

/// The rows that match `filter`, sorted by column `col` (`None`: the
/// table's default), ascending or descending; ties keep name order. An
/// unknown column is an error that names the known ones.
pub fn filter_sort<'a, T: TableRow>(
    rows: &'a [T],
    filter: &str,
    col: Option<&str>,
    asc: bool,
) -> Result<Vec<&'a T>, String> {
    let col = col.filter(|c| !c.is_empty()).unwrap_or(T::DEFAULT_SORT);
    if !T::COLUMNS.iter().any(|(k, _)| *k == col) {
        let known: Vec<&str> = T::COLUMNS.iter().map(|(k, _)| *k).collect();
        return Err(format!(
            "cannot sort by {col:?}: use one of {}",
            known.join(", ")
        ));
    }
    let mut out: Vec<&T> = rows.iter().filter(|r| matches(*r, filter)).collect();
    out.sort_by(|a, b| {
        let ord = match (a.sort_value(col), b.sort_value(col)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => a
                .sort_text(col)
                .unwrap_or("")
                .cmp(b.sort_text(col).unwrap_or("")),
        };
        let ord = if asc { ord } else { ord.reverse() };
        ord.then_with(|| a.name().cmp(b.name()))
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, short: &str, total: f64) -> KernelRow {
        KernelRow {
            name: name.into(),
            short_name: short.into(),
            total_us: total,
            ..Default::default()
        }
    }

    #[test]
    fn every_word_matches_name_or_short_name() {
        let rows = vec![
            kernel(
                "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
                "unrolled_elementwise_kernel (direct_copy)",
                5.0,
            ),
            kernel("sm90_xmma_gemm_bf16", "sm90_xmma_gemm_bf16", 9.0),
        ];
        let got = filter_sort(&rows, "COPY unrolled", None, false).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            filter_sort(&rows, "", None, false).unwrap()[0].total_us,
            9.0
        );
        assert_eq!(
            filter_sort(&rows, "", Some("total"), true).unwrap()[0].total_us,
            5.0
        );
        assert_eq!(
            filter_sort(&rows, "", Some("name"), true).unwrap()[0].total_us,
            9.0
        );
        assert!(filter_sort(&rows, "", Some("bogus"), true)
            .unwrap_err()
            .contains("total"));
    }
}
