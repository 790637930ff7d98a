//! `kinetoscope diff A B`: a baseline against a patch, as text, JSON or a
//! pull-request comment (markdown), and the regression gate: with
//! `--fail-above PCT` (or `--fail-op OP=PCT%`) it exits 1 when B is slower
//! than A by more than the budget, 0 when within it, and 2 when the two
//! cannot be compared (no common steps, a bad file, a run that is not
//! there), each with a one-line reason on stderr.
//!
//! A and B are trace files, or runs on a server: a run link
//! (`http://host/runs/ID`), or a run id with `--server`. A stored run's
//! summary is fetched; the trace is never downloaded.

use super::analyze::render_diff;
use anyhow::Context;
use clap::{Args, ValueEnum};
use kinetoscope_trace::diff::{diff, Side};
use kinetoscope_trace::gate::{gate, parse_op_budget, parse_pct, Budgets};
use kinetoscope_types::escape::{md_code, md_text, visible};
use kinetoscope_types::units::{bytes, change_pct, pct, time_us};
use kinetoscope_types::{Diff, Gate, GateVerdict, GatedDiff, Summary};
use std::fmt::Write as _;
use std::path::Path;

/// How the diff is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Tables for a terminal.
    #[default]
    Text,
    /// A pull-request comment: the verdict, step time before and after, the
    /// top changes with their signatures, and the run links.
    Markdown,
    /// The diff JSON (what the server's /api/diff returns), with `gate`.
    Json,
}

/// Arguments of `diff`.
#[derive(Args, Clone, Debug)]
pub struct DiffArgs {
    /// Run A, the baseline: a trace file, a run link, or a run id (with
    /// `--server`).
    pub a: String,
    /// Run B, the patch: the same kinds as A.
    pub b: String,
    /// Print the diff JSON (the same as `--format json`).
    #[arg(long)]
    pub json: bool,
    /// Rows of each delta table (text).
    #[arg(long, default_value_t = 15)]
    pub rows: usize,
    /// The gate: exit 1 when B's median step (per step kind: decode against
    /// decode) is more than PCT percent slower than A's.
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub fail_above: Option<f64>,
    /// A budget for one op's time per step, `aten::copy_=10%` (repeatable).
    #[arg(long = "fail-op", value_name = "OP=PCT%", value_parser = parse_op_budget)]
    pub fail_op: Vec<(String, f64)>,
    /// Judge a step-time rise even when B's step is bound by a host that
    /// ran uniformly slower (every host op alike slower: another machine,
    /// its clock, contention); without it that is exit 2, not comparable.
    #[arg(long)]
    pub strict: bool,
    /// How to print it.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// The server that holds runs named by id.
    #[arg(long, env = "KINETOSCOPE_SERVER")]
    pub server: Option<String>,
    /// Read token, when the server's runs are private.
    #[arg(long, env = "KINETOSCOPE_TOKEN")]
    pub token: Option<String>,
}

/// Where one side's summary comes from.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// A trace file, analyzed here.
    File(std::path::PathBuf),
    /// A stored run on a server.
    Run { server: String, id: String },
}

impl Source {
    fn of(text: &str, server: Option<&str>) -> anyhow::Result<Source> {
        let path = Path::new(text);
        if path.exists() {
            return Ok(Source::File(path.to_path_buf()));
        }
        if let Some((scheme, rest)) = text
            .split_once("://")
            .filter(|(s, _)| matches!(*s, "http" | "https"))
        {
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            let path = path.split(['?', '#']).next().unwrap_or("");
            let id = path
                .strip_prefix("runs/")
                .or_else(|| path.strip_prefix("api/runs/"))
                .map(|r| r.split('/').next().unwrap_or(""))
                .filter(|id| is_run_id(id))
                .ok_or_else(|| anyhow::anyhow!("{text} is not a run link (http://host/runs/ID)"))?;
            return Ok(Source::Run {
                server: format!("{scheme}://{host}"),
                id: id.to_string(),
            });
        }
        match server {
            Some(s) if is_run_id(text) => Ok(Source::Run {
                server: s.trim_end_matches('/').to_string(),
                id: text.to_string(),
            }),
            _ if is_run_id(text) => {
                anyhow::bail!("{text} looks like a run id: name its server with --server")
            }
            _ => anyhow::bail!("{text}: no such file, and not a run link"),
        }
    }

    /// The run's page, for a run on a server.
    fn link(&self) -> Option<String> {
        match self {
            Source::Run { server, id } => Some(format!("{server}/runs/{id}")),
            Source::File(_) => None,
        }
    }

    fn name(&self) -> String {
        match self {
            Source::File(p) => p
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default(),
            Source::Run { id, .. } => id.clone(),
        }
    }
}

/// The run id a run id or run link names (`http://host/runs/ID?tab=ops`):
/// its last path segment, when it has a run id's shape.
pub(crate) fn run_id_of(text: &str) -> Option<&str> {
    let id = text
        .trim()
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    is_run_id(id).then_some(id)
}

/// Run ids are 22 characters of base64url.
pub(crate) fn is_run_id(s: &str) -> bool {
    s.len() == 22
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A stored run's summary (rank 0), from its server.
pub(crate) async fn fetch(server: &str, id: &str, token: Option<&str>) -> anyhow::Result<Summary> {
    let client = super::client();
    let mut req = client.get(format!("{server}/api/runs/{id}/summary"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("cannot reach {server}"))?;
    if !resp.status().is_success() {
        let e = super::http_error(resp).await;
        anyhow::bail!("run {id} on {server}: {e}");
    }
    resp.json::<Summary>()
        .await
        .with_context(|| format!("run {id} on {server}: not a summary"))
}

fn load(
    src: &Source,
    token: Option<&str>,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Summary> {
    match src {
        Source::File(p) => kinetoscope_trace::analyze_file(
            p,
            &Default::default(),
            &kinetoscope_trace::AnalysisOptions::default(),
        )
        .with_context(|| p.display().to_string()),
        Source::Run { server, id } => rt.block_on(fetch(server, id, token)),
    }
}

/// Runs `diff`; returns the process's exit status.
pub fn run(args: DiffArgs, rt: &tokio::runtime::Runtime) -> anyhow::Result<i32> {
    let budgets = Budgets {
        step_pct: args.fail_above,
        ops: args.fail_op.clone(),
        strict: args.strict,
    };
    let gated = !budgets.is_empty();
    let result = compare(&args, rt).map(|(d, sa, sb, links)| {
        let g = gated.then(|| gate(&sa, &sb, &budgets));
        (d, g, links)
    });
    let (d, g, links) = match result {
        Ok(r) => r,
        // A gate that cannot read its inputs says so and exits 2.
        Err(e) if gated => {
            eprintln!("kinetoscope diff: cannot compare: {e:#}");
            return Ok(2);
        }
        Err(e) => return Err(e),
    };
    let format = if args.json {
        DiffFormat::Json
    } else {
        args.format
    };
    report(d, g, &links, format, args.rows, "kinetoscope diff")
}

/// Prints a diff (and its gate's verdict) in `format`; returns the exit
/// status: 0 without a gate or within budget, 1 over it, 2 incomparable.
/// The verdict also goes to stderr after `who`, so a CI log shows it
/// whatever the format.
pub(crate) fn report(
    d: Diff,
    g: Option<Gate>,
    links: &Links,
    format: DiffFormat,
    rows: usize,
    who: &str,
) -> anyhow::Result<i32> {
    match format {
        DiffFormat::Text => {
            print!("{}", render_diff(&d, rows));
            if let Some(g) = &g {
                println!("\nGate: {}", visible(&verdict_line(g)));
            }
        }
        DiffFormat::Json => println!(
            "{}",
            serde_json::to_string(&GatedDiff {
                diff: d,
                gate: g.clone()
            })?
        ),
        DiffFormat::Markdown => print!("{}", markdown(&d, g.as_ref(), links)),
    }
    let Some(g) = g else { return Ok(0) };
    eprintln!("{who}: {}", visible(&verdict_line(&g)));
    Ok(match g.verdict {
        GateVerdict::Pass => 0,
        GateVerdict::Fail => 1,
        GateVerdict::Incomparable => 2,
    })
}

/// The links of a diff of stored runs: A's, B's and the diff's.
#[derive(Default)]
pub(crate) struct Links {
    /// A's run page.
    pub a: Option<String>,
    /// B's run page.
    pub b: Option<String>,
    /// The diff's page.
    pub diff: Option<String>,
}

type Compared = (Diff, Summary, Summary, Links);

fn compare(args: &DiffArgs, rt: &tokio::runtime::Runtime) -> anyhow::Result<Compared> {
    let server = args.server.as_deref();
    let (a, b) = (Source::of(&args.a, server)?, Source::of(&args.b, server)?);
    let token = args.token.as_deref();
    // Two files analyze side by side, one per core.
    let (sa, sb) = std::thread::scope(|scope| {
        let ha = scope.spawn(|| load(&a, token, rt));
        let hb = scope.spawn(|| load(&b, token, rt));
        (
            ha.join().expect("analysis panicked"),
            hb.join().expect("analysis panicked"),
        )
    });
    let (sa, sb) = (sa?, sb?);
    let d = diff(
        &Side {
            id: "a",
            name: &a.name(),
            summary: &sa,
        },
        &Side {
            id: "b",
            name: &b.name(),
            summary: &sb,
        },
    );
    let diff_link = match (&a, &b) {
        (Source::Run { server: sa, id: ia }, Source::Run { server: sb, id: ib }) if sa == sb => {
            Some(format!("{sa}/diff/{ia}/{ib}"))
        }
        _ => None,
    };
    let links = Links {
        a: a.link(),
        b: b.link(),
        diff: diff_link,
    };
    Ok((d, sa, sb, links))
}

/// `FAIL: decode step time (median) +18.6% (83.6 ms -> 99.1 ms), over the 5.0% budget`.
/// Raw: trace text in the reasons is escaped where it is written.
fn verdict_line(g: &Gate) -> String {
    let word = match g.verdict {
        GateVerdict::Pass => "PASS",
        GateVerdict::Fail => "FAIL",
        GateVerdict::Incomparable => "CANNOT COMPARE",
    };
    format!("{word}: {}", g.reasons.join("; "))
}

/// The pull-request comment.
fn markdown(d: &Diff, g: Option<&Gate>, links: &Links) -> String {
    let mut o = String::new();
    match g {
        Some(g) => {
            let _ = writeln!(o, "### Kinetoscope: {}\n", md_text(&verdict_line(g)));
        }
        None => {
            let _ = writeln!(o, "### Kinetoscope diff\n");
        }
    }
    let _ = writeln!(
        o,
        "A (baseline): {}  \nB (patch): {}\n",
        md_code(&d.a.name),
        md_code(&d.b.name)
    );
    if let Some(g) = g.filter(|g| !g.checks.is_empty()) {
        let _ = writeln!(
            o,
            "| budget | A | B | change | allowed | |\n|---|---:|---:|---:|---:|---|"
        );
        for c in &g.checks {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                md_text(&c.what),
                time_us(c.a_us),
                time_us(c.b_us),
                change_pct(c.change_pct),
                pct(c.budget_pct),
                if c.ok { "ok" } else { "**over**" }
            );
        }
        let _ = writeln!(o);
    }
    if d.a.steps > 0 && d.b.steps > 0 {
        let _ = writeln!(
            o,
            "Step time: mean {} -> {} ({}), p50 {} -> {} ({})\n",
            time_us(d.steps.a_mean_us),
            time_us(d.steps.b_mean_us),
            change_pct(d.steps.change_pct),
            time_us(d.steps.a_p50_us),
            time_us(d.steps.b_p50_us),
            change_pct(d.steps.p50_change_pct)
        );
    }
    for m in &d.memory {
        let churn = match (m.a_churn_bytes_per_step, m.b_churn_bytes_per_step) {
            (Some(a), Some(b)) => {
                format!(", made and dropped per step {} -> {}", bytes(a), bytes(b))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "Memory on {}: peak {} -> {} ({}){churn}\n",
            md_text(&m.device),
            bytes(m.a_peak_bytes as f64),
            bytes(m.b_peak_bytes as f64),
            change_pct(m.peak_change_pct)
        );
    }
    if !d.findings.is_empty() {
        let _ = writeln!(o, "**What changed**\n");
        for f in d.findings.iter().take(6) {
            let _ = writeln!(o, "- {}", md_text(&f.text));
        }
        let _ = writeln!(o);
    }
    for (side, bound) in [("A", &d.a.bound), ("B", &d.b.bound)] {
        if let Some(b) = bound {
            let _ = writeln!(o, "{side} is {}  ", md_text(&b.words()));
        }
    }
    let _ = writeln!(o);
    delta_table(&mut o, &format!("op ({})", d.basis), &d.ops);
    delta_table(
        &mut o,
        &format!("host ({}, self CPU)", d.basis),
        &d.host_ops,
    );
    let mut parts = Vec::new();
    if let Some(a) = &links.a {
        parts.push(format!("[baseline]({a})"));
    }
    if let Some(b) = &links.b {
        parts.push(format!("[patch]({b})"));
    }
    if let Some(l) = &links.diff {
        parts.push(format!("[diff]({l})"));
    }
    if !parts.is_empty() {
        let _ = writeln!(o, "{}", parts.join(" · "));
    }
    o
}

/// A markdown table of a diff's top five rows (names in code spans), and a
/// blank line; nothing for no rows.
fn delta_table(o: &mut String, title: &str, rows: &[kinetoscope_types::DeltaRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(o, "| {title} | A | B | change |\n|---|---:|---:|---:|");
    for r in rows.iter().take(5) {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            md_code(&r.name),
            time_us(r.a_us),
            time_us(r.b_us),
            change_pct(r.change_pct)
        );
    }
    let _ = writeln!(o);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        let id = "AAAAAAAAAAAAAAAAAAAAAA";
        assert_eq!(
            Source::of(&format!("http://h:8080/runs/{id}?tab=ops"), None).unwrap(),
            Source::Run {
                server: "http://h:8080".into(),
                id: id.into()
            }
        );
        assert_eq!(
            Source::of(id, Some("https://k.example/")).unwrap(),
            Source::Run {
                server: "https://k.example".into(),
                id: id.into()
            }
        );
        assert!(Source::of(id, None).is_err());
        assert!(Source::of("http://h/other", None).is_err());
        assert!(Source::of("no-such-file.json", None).is_err());
    }

    /// Trace text in the pull-request comment renders as text: the three
    /// injection names of the security review (a link and image, raw HTML
    /// that opens a comment, a mention and a reference with a line break
    /// that leaves the table), through a CommonMark renderer with GitHub's
    /// tables, give no link, image, HTML or mention, and every row stays a
    /// row of its table.
    #[test]
    fn trace_text_in_markdown_renders_as_text() {
        use kinetoscope_types::{DeltaRow, DiffFinding};
        use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
        let names = [
            "[click](https://evil.example/x) ![px](https://evil.example/p.png) www.evil.example",
            "<img src=x onerror=alert(1)><details><!-- hide the rest",
            "aten::mm` | @octocat #12\n| x | y |\r\n::error::boom \u{1b}]8;;x\u{7}",
        ]
        .map(|n| n.replace("\\n", "\n").replace("\\r", "\r"));
        let d = Diff {
            ops: names
                .iter()
                .map(|n| DeltaRow {
                    name: n.clone(),
                    ..Default::default()
                })
                .collect(),
            findings: names
                .iter()
                .map(|n| DiffFinding {
                    text: format!("{n} got slower"),
                })
                .collect(),
            ..Default::default()
        };
        let links = Links {
            a: None,
            b: None,
            diff: None,
        };
        let md = markdown(&d, None, &links);
        let mut rows = 0;
        let (mut text, mut prose) = (String::new(), String::new());
        for e in Parser::new_ext(&md, Options::ENABLE_TABLES) {
            match e {
                Event::Start(Tag::Link { .. } | Tag::Image { .. }) => panic!("a link: {md}"),
                Event::Html(h) | Event::InlineHtml(h) => panic!("HTML {h}: {md}"),
                Event::End(TagEnd::TableRow) => rows += 1,
                Event::Text(t) => {
                    prose.push_str(&t);
                    text.push_str(&t);
                }
                Event::Code(t) => text.push_str(&t),
                _ => {}
            }
        }
        assert_eq!(rows, names.len(), "{md}");
        // No mention or reference: `@` and `#` are followed by a word joiner
        // outside code spans, which GitHub does not link.
        let chars: Vec<char> = prose.chars().collect();
        for w in chars.windows(2) {
            assert!(
                !(matches!(w[0], '@' | '#') && w[1].is_ascii_alphanumeric()),
                "a mention or reference in {prose}"
            );
        }
        assert!(!md.contains('\r') && !md.contains('\u{1b}'), "{md:?}");
        assert!(!md.lines().any(|l| l.starts_with("::")), "{md}");
        assert!(text.contains("aten::mm"), "{text}");
    }
}
