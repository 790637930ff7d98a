//! `kinetoscope analyze` and `kinetoscope diff` on local files.

use anyhow::Context;
use kinetoscope_trace::import::ReadOptions;
use kinetoscope_trace::AnalysisOptions;
use kinetoscope_types::units::{bytes, count, pct, rate_gbps, time_us};
use kinetoscope_types::{Diff, Summary};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

fn load(file: &Path, opts: &AnalysisOptions) -> anyhow::Result<Summary> {
    kinetoscope_trace::analyze_file(file, &ReadOptions::default(), opts)
        .with_context(|| format!("{}", file.display()))
}

/// `NVIDIA H200: 4.80 TB/s · 989 TFLOP/s BF16 · 1.98 PFLOP/s FP8 (device table)`.
pub fn device_line(d: &kinetoscope_types::Device) -> String {
    let source = match d.source {
        kinetoscope_types::PeakSource::Table => "device table",
        kinetoscope_types::PeakSource::Override => "given peaks",
        kinetoscope_types::PeakSource::Unknown => "not in the device table: no peaks",
    };
    match d.peaks_text() {
        p if p.is_empty() => format!("{} ({source})", v(&d.name)),
        p => format!("{}: {p} ({source})", v(&d.name)),
    }
}

/// Trace text as the terminal shows it: hidden characters as escapes
/// (no line a workflow reads as a command, no terminal sequence).
fn v(s: &str) -> std::borrow::Cow<'_, str> {
    kinetoscope_types::escape::visible(s)
}

/// Cuts a name to `n` characters, marking the cut (its hidden characters
/// shown as escapes first).
fn cut(s: &str, n: usize) -> String {
    let s = &*v(s);
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Runs `analyze`.
pub fn run(file: &Path, json: bool, rows: usize, opts: &AnalysisOptions) -> anyhow::Result<()> {
    opts.validate().map_err(anyhow::Error::msg)?;
    let s = load(file, opts)?;
    if json {
        // Written as it is made: a summary of many steps is tens of MB of
        // text, which a `String` would hold beside the summary itself.
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer(&mut out, &s)?;
        writeln!(out)?;
        out.flush()?;
    } else {
        print!("{}", render(&s, rows));
    }
    Ok(())
}

/// The text report: header, op table (like torch's
/// `key_averages().table(sort_by="self_cuda_time_total")`), top kernels,
/// steps, layers and findings.
pub fn render(s: &Summary, rows: usize) -> String {
    let mut o = String::new();
    let t = &s.trace;
    let _ = writeln!(
        o,
        "Trace: {} events, {} kernels, {} window{}{}",
        t.events,
        t.kernels,
        time_us(t.span_us),
        t.devices
            .first()
            .map(|d| format!(", {}", v(d)))
            .unwrap_or_default(),
        match (t.rank, t.world_size) {
            (Some(r), Some(w)) => format!(", rank {r} of {w}"),
            _ => String::new(),
        }
    );
    if let Some(d) = &s.device {
        let _ = writeln!(o, "Device: {}", device_line(d));
    }
    if s.steps_stats.count > 0 {
        let st = &s.steps_stats;
        let _ = writeln!(
            o,
            "Steps: {} ({}), mean {}, p50 {}, p90 {}, {} of GPU work per step",
            st.count,
            st.source,
            time_us(st.mean_us),
            time_us(st.p50_us),
            time_us(st.p90_us),
            time_us(st.mean_device_us)
        );
    }
    let _ = writeln!(
        o,
        "GPU: busy {} of the window, {} of GPU-op time",
        pct(s.gpu_time.busy_pct),
        time_us(s.gpu_time.gpu_op_us)
    );
    for note in &t.notes {
        let _ = writeln!(o, "Note: {}", v(note));
    }

    let _ = writeln!(
        o,
        "\nOps by self device time ({} of {})",
        rows.min(s.ops.len()),
        s.ops.len()
    );
    let header = format!(
        "{:<48} {:>10} {:>10} {:>11} {:>12} {:>10} {:>8} {:>7} {:>9} {:>10}",
        "Name",
        "Self CPU",
        "CPU total",
        "Self device",
        "Device total",
        "Avg device",
        "Calls",
        "Share",
        "Bytes",
        "Rate"
    );
    let _ = writeln!(o, "{header}\n{}", "-".repeat(header.chars().count()));
    for r in s.ops.iter().take(rows) {
        let _ = writeln!(
            o,
            "{:<48} {:>10} {:>10} {:>11} {:>12} {:>10} {:>8} {:>7} {:>9} {:>10}",
            cut(&r.name, 48),
            time_us(r.self_cpu_us),
            time_us(r.cpu_total_us),
            time_us(r.self_device_us),
            time_us(r.device_total_us),
            time_us(r.self_device_us / r.calls.max(1) as f64),
            r.calls,
            pct(r.device_pct),
            r.bytes_per_call.map(bytes).unwrap_or_default(),
            r.achieved_gbps.map(rate_gbps).unwrap_or_default(),
        );
        // Input signatures that split the op's time (most device time first).
        if r.input_shapes.len() > 1 && r.self_device_us > 0.0 {
            for g in r
                .input_shapes
                .iter()
                .take(3)
                .filter(|g| g.self_device_us > 0.0)
            {
                let label = match &g.conversion {
                    Some(c) => format!("  {c} {}", g.shapes),
                    None => format!("  {} {}", g.shapes, g.dtypes),
                };
                let _ = writeln!(
                    o,
                    "{:<48} {:>10} {:>10} {:>11} {:>12} {:>10} {:>8} {:>7} {:>9} {:>10}",
                    cut(&label, 48),
                    time_us(g.self_cpu_us),
                    "",
                    time_us(g.self_device_us),
                    "",
                    time_us(g.device_per_call_us()),
                    g.calls,
                    pct(g.device_pct),
                    g.bytes_per_call.map(bytes).unwrap_or_default(),
                    g.achieved_gbps.map(rate_gbps).unwrap_or_default(),
                );
            }
        }
    }

    let k_rows = rows.min(15);
    let _ = writeln!(
        o,
        "\nTop kernels ({} of {})",
        k_rows.min(s.kernels.len()),
        s.kernels.len()
    );
    let header = format!(
        "{:<60} {:<13} {:>8} {:>10} {:>10} {:>7}  {}",
        "Kernel", "Category", "Calls", "Total", "Avg", "Share", "Launched by"
    );
    let _ = writeln!(o, "{header}\n{}", "-".repeat(header.chars().count() + 20));
    for k in s.kernels.iter().take(k_rows) {
        let by = k
            .launched_by
            .first()
            .map(|c| {
                c.chain
                    .last()
                    .cloned()
                    .unwrap_or_else(|| format!("({})", c.launch))
            })
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "{:<60} {:<13} {:>8} {:>10} {:>10} {:>7}  {}",
            cut(&k.short_name, 60),
            k.category,
            k.calls,
            time_us(k.total_us),
            time_us(k.avg_us),
            pct(k.pct),
            v(&by)
        );
        // Launch geometries that split the kernel's time.
        if k.groups.len() > 1 {
            for g in k.groups.iter().take(3) {
                let geometry = match (g.grid, g.block) {
                    (Some(gr), Some(bl)) => format!("  grid {gr:?} block {bl:?}"),
                    _ => "  (no geometry)".into(),
                };
                let _ = writeln!(
                    o,
                    "{:<60} {:<13} {:>8} {:>10} {:>10} {:>7}  {}",
                    cut(&geometry, 60),
                    "",
                    g.calls,
                    time_us(g.total_us),
                    time_us(g.avg_us),
                    pct(g.pct),
                    v(&g.conversion
                        .clone()
                        .or_else(|| g.op.clone())
                        .unwrap_or_default())
                );
            }
        }
    }

    if s.layers.count > 0 {
        let _ = writeln!(
            o,
            "\nLayers: {} found by {} ({}); {} per layer on average",
            s.layers.count,
            s.layers.method,
            v(&s.layers.detail),
            time_us(
                s.layers.items.iter().map(|l| l.device_us).sum::<f64>() / s.layers.count as f64
            )
        );
    }

    if !s.findings.is_empty() {
        let _ = writeln!(o, "\nFindings");
        // Each cause numbered, its evidence under it.
        let mut k = 0;
        for f in &s.findings {
            if f.cause.is_some() {
                let _ = writeln!(o, "      - {}", v(&f.text));
            } else {
                k += 1;
                let _ = writeln!(o, "{k:>2}. {}", v(&f.text));
            }
        }
    }
    o
}

/// The text form of a diff.
pub fn render_diff(d: &Diff, rows: usize) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A: {}   B: {}   ({})",
        v(&d.a.name),
        v(&d.b.name),
        d.basis
    );
    if d.a.steps > 0 && d.b.steps > 0 {
        let _ = writeln!(
            o,
            "Step time: mean {} -> {} ({:+.1}%), p50 {} -> {} ({:+.1}%)",
            time_us(d.steps.a_mean_us),
            time_us(d.steps.b_mean_us),
            d.steps.change_pct,
            time_us(d.steps.a_p50_us),
            time_us(d.steps.b_p50_us),
            d.steps.p50_change_pct
        );
    }
    let _ = writeln!(
        o,
        "GPU busy: {} -> {} ({:+.1}%)",
        time_us(d.gpu_busy.a_us),
        time_us(d.gpu_busy.b_us),
        d.gpu_busy.change_pct
    );
    for m in &d.memory {
        let churn = match (m.a_churn_bytes_per_step, m.b_churn_bytes_per_step) {
            (Some(a), Some(b)) => {
                format!("; made and dropped per step {} -> {}", bytes(a), bytes(b))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "Memory on {}: peak {} -> {} ({:+.1}%){churn}",
            v(&m.device),
            bytes(m.a_peak_bytes as f64),
            bytes(m.b_peak_bytes as f64),
            m.peak_change_pct
        );
    }
    let _ = writeln!(o, "\nFindings");
    for (k, f) in d.findings.iter().enumerate() {
        let _ = writeln!(o, "{:>2}. {}", k + 1, v(&f.text));
    }
    for (side, bound) in [("A", &d.a.bound), ("B", &d.b.bound)] {
        if let Some(b) = bound {
            let _ = writeln!(o, "{side} is {}", b.words());
        }
    }
    let ops_title = match d.op_time {
        kinetoscope_types::TimeBasis::Device => "Ops (self device time)",
        kinetoscope_types::TimeBasis::Cpu => "Ops (self CPU time)",
    };
    for (title, table) in [
        (ops_title, &d.ops),
        ("Host (self CPU time, waits aside)", &d.host_ops),
        ("Kernels", &d.kernels),
    ] {
        if table.is_empty() {
            continue;
        }
        let _ = writeln!(o, "\n{title}, {}", d.basis);
        let _ = writeln!(
            o,
            "{:<60} {:>10} {:>10} {:>11} {:>8} {:>12}",
            "Name", "A", "B", "Delta", "Change", "Calls A->B"
        );
        for r in table.iter().take(rows) {
            let _ = writeln!(
                o,
                "{:<60} {:>10} {:>10} {:>11} {:>7.1}% {:>12}",
                cut(&r.name, 60),
                time_us(r.a_us),
                time_us(r.b_us),
                time_us(r.delta_us),
                r.change_pct,
                format!("{}->{}", count(r.a_calls), count(r.b_calls))
            );
        }
    }
    if !d.added_kernels.is_empty() || !d.removed_kernels.is_empty() {
        let _ = writeln!(o, "\nAdded kernels: {}", d.added_kernels.len());
        for k in d.added_kernels.iter().take(5) {
            let _ = writeln!(o, "  + {}", cut(k, 100));
        }
        let _ = writeln!(o, "Removed kernels: {}", d.removed_kernels.len());
        for k in d.removed_kernels.iter().take(5) {
            let _ = writeln!(o, "  - {}", cut(k, 100));
        }
    }
    o
}
