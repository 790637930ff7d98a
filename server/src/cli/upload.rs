//! `kinetoscope upload`: streams traces to a server, compressing plain JSON
//! with zstd on the way, with a progress bar; then, if asked, waits for the
//! analysis, compares the run with a baseline (the regression gate of
//! `kinetoscope diff`) and marks it a baseline.

use super::diff::{fetch, report, run_id_of, DiffFormat, Links};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kinetoscope_trace::diff::{diff, Side};
use kinetoscope_trace::gate::{gate, parse_op_budget, parse_pct, Budgets};
use kinetoscope_trace::import::read_head;
use kinetoscope_types::{Baseline, Compression, Created, RunStatus};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Arguments of `upload`.
#[derive(Args, Clone, Debug)]
pub struct UploadArgs {
    /// Trace files: one, or one per rank of a multi-rank run.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The server's base URL.
    #[arg(
        long,
        env = "KINETOSCOPE_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Run name [default: the first file's name].
    #[arg(long)]
    pub name: Option<String>,
    /// Comma-separated tags.
    #[arg(long)]
    pub tags: Option<String>,
    /// Write token, when the server requires one (an admin token for
    /// `--baseline-of`).
    #[arg(long, env = "KINETOSCOPE_TOKEN")]
    pub token: Option<String>,
    /// Wait for the analysis to finish (implied by the options below).
    #[arg(long)]
    pub wait: bool,
    /// Once analyzed, make the run the baseline of this name (with
    /// `--compare-to`, only when it passes the gate).
    #[arg(long, value_name = "NAME")]
    pub baseline_of: Option<String>,
    /// Once analyzed, compare the run against `baseline:NAME`, a run link or
    /// a run id, print the diff link, and with `--fail-above` or
    /// `--fail-op` exit as `kinetoscope diff`'s gate does (0 within budget,
    /// 1 over it, 2 when they cannot be compared).
    #[arg(long, value_name = "baseline:NAME|RUN")]
    pub compare_to: Option<String>,
    /// The gate: exit 1 when the run's median step (per step kind) is more
    /// than PCT percent slower than the baseline's.
    #[arg(long, value_name = "PCT", value_parser = parse_pct, requires = "compare_to")]
    pub fail_above: Option<f64>,
    /// A budget for one op's time per step, `aten::copy_=10%` (repeatable).
    #[arg(long = "fail-op", value_name = "OP=PCT%", value_parser = parse_op_budget, requires = "compare_to")]
    pub fail_op: Vec<(String, f64)>,
    /// Judge a step-time rise even when B's step is bound by a host that
    /// ran uniformly slower (every host op alike slower: another machine,
    /// its clock, contention); without it that is exit 2, not comparable.
    #[arg(long, requires = "compare_to")]
    pub strict: bool,
    /// How to print the comparison.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
}

struct Counting<R> {
    inner: R,
    bar: ProgressBar,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

/// Streams a file's bytes, zstd-compressing plain JSON on the fly; returns
/// the stream and the name the server should see.
fn file_body(path: &Path, bar: ProgressBar) -> anyhow::Result<(reqwest::Body, String)> {
    let (_, encoding) = std::fs::File::open(path)
        .and_then(|mut f| read_head(&mut f))
        .with_context(|| format!("reading {}", path.display()))?;
    let encoding = encoding.map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
    let file = std::fs::File::open(path)?;
    let base = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| "trace".into());
    let compress = encoding.compression() == Compression::None;
    let name = if compress {
        format!("{base}.zst")
    } else {
        base
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    std::thread::spawn(move || {
        let counted = Counting { inner: file, bar };
        let mut reader: Box<dyn Read> = if compress {
            match zstd::stream::read::Encoder::new(counted, 3) {
                Ok(e) => Box::new(e),
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        } else {
            Box::new(counted)
        };
        loop {
            let mut buf = vec![0u8; 1 << 20];
            match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(k) => {
                    buf.truncate(k);
                    if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    let stream = tokio_stream_from(rx);
    Ok((reqwest::Body::wrap_stream(stream), name))
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
) -> impl futures::Stream<Item = std::io::Result<Bytes>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Uploads files as one run (several files are its ranks; with `group`,
/// one file that is rank `group.1` of the upload group `group.0`).
pub(crate) async fn send(
    client: &reqwest::Client,
    server: &str,
    token: Option<&str>,
    files: &[PathBuf],
    query: &[(&str, String)],
    bar: &ProgressBar,
) -> anyhow::Result<Created> {
    let mut req = client.post(format!("{server}/api/runs")).query(query);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req = if files.len() == 1 {
        let (body, name) = file_body(&files[0], bar.clone())?;
        req.query(&[("file", name)])
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body)
    } else {
        // In the order the server ranks them (the rank in the names), so
        // it can analyze each rank as it arrives with no rank changing.
        let mut parts = files
            .iter()
            .map(|f| file_body(f, bar.clone()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        parts.sort_by_cached_key(|(_, name)| kinetoscope_trace::ranks::rank_key(name));
        let mut form = reqwest::multipart::Form::new();
        for (body, name) in parts {
            form = form.part(
                "file",
                reqwest::multipart::Part::stream(body).file_name(name),
            );
        }
        req.multipart(form)
    };
    let resp = req
        .send()
        .await
        .with_context(|| format!("sending to {server}"))?;
    if !resp.status().is_success() {
        return Err(super::http_error(resp).await);
    }
    anyhow::ensure!(
        resp.status() == reqwest::StatusCode::CREATED,
        "{server} answered {} without a run id: is it a Kinetoscope server?",
        resp.status()
    );
    let created: Created = resp
        .json()
        .await
        .with_context(|| format!("{server} answered 201 without a run"))?;
    // A run id is 22 URL-safe characters: anything else is not our server's
    // answer, and no link is printed for it.
    let id_ok = created.id.len() == 22
        && created
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    anyhow::ensure!(
        id_ok && created.url == format!("/runs/{}", created.id),
        "{server} answered 201 without a run id: is it a Kinetoscope server?"
    );
    Ok(created)
}

/// A progress bar of `total` bytes.
pub(crate) fn bytes_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message("uploading");
    bar
}

/// Runs `upload`; returns the process's exit status (the gate's, with
/// `--compare-to`).
pub async fn run(args: UploadArgs) -> anyhow::Result<i32> {
    if let Some(b) = &args.baseline_of {
        kinetoscope_types::check_baseline_name(b).map_err(anyhow::Error::msg)?;
    }
    let total: u64 = args
        .files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .map(|m| m.len())
                .with_context(|| format!("{}", f.display()))
        })
        .sum::<anyhow::Result<u64>>()?;
    let bar = bytes_bar(total);
    let server = args.server.trim_end_matches('/').to_string();
    let token = args.token.as_deref();
    let client = super::client();
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(n) = &args.name {
        query.push(("name", n.clone()));
    }
    if let Some(t) = &args.tags {
        query.push(("tags", t.clone()));
    }
    let created = send(&client, &server, token, &args.files, &query, &bar).await;
    bar.finish_and_clear();
    let created = created?;
    println!("{server}{}", created.url);
    let wait = args.wait || args.baseline_of.is_some() || args.compare_to.is_some();
    if !wait {
        eprintln!(
            "run {} is {}: it will be analyzed in the background",
            created.id, created.status
        );
        return Ok(0);
    }
    let run = super::wait_for_run(&client, &server, &created.id, token).await?;
    let budgets = Budgets {
        step_pct: args.fail_above,
        ops: args.fail_op.clone(),
        strict: args.strict,
    };
    if run.status == RunStatus::Failed {
        let why = format!(
            "the run's analysis failed: {}",
            run.error.unwrap_or_default()
        );
        if args.compare_to.is_some() && !budgets.is_empty() {
            eprintln!("kinetoscope upload: cannot compare: {why}");
            return Ok(2);
        }
        anyhow::bail!(why);
    }
    let mut code = 0;
    if let Some(reference) = &args.compare_to {
        code = compare(
            &client,
            &server,
            token,
            reference,
            &created.id,
            &budgets,
            &args,
        )
        .await?;
    }
    if let Some(name) = &args.baseline_of {
        if code != 0 {
            eprintln!("not marked the baseline of {name}: it did not pass the gate");
        } else {
            mark_baseline(&client, &server, token, &created.id, name).await?;
            eprintln!("run {} is now the baseline of {name}", created.id);
        }
    }
    Ok(code)
}

/// The run a `--compare-to` names: `baseline:NAME`, a run link, or an id.
async fn resolve(
    client: &reqwest::Client,
    server: &str,
    token: Option<&str>,
    reference: &str,
) -> anyhow::Result<String> {
    if let Some(name) = reference.strip_prefix("baseline:") {
        kinetoscope_types::check_baseline_name(name).map_err(anyhow::Error::msg)?;
        let mut req = client.get(format!("{server}/api/baselines/{name}"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await?;
        if !resp.status().is_success() {
            return Err(super::http_error(resp).await);
        }
        let b: Baseline = resp.json().await?;
        return Ok(b.run.id);
    }
    run_id_of(reference).map(str::to_string).ok_or_else(|| {
        anyhow::anyhow!("{reference}: name a baseline (baseline:NAME), a run link or a run id")
    })
}

/// Compares the new run against the reference; prints the diff link and
/// the report; the gate's exit status.
async fn compare(
    client: &reqwest::Client,
    server: &str,
    token: Option<&str>,
    reference: &str,
    new: &str,
    budgets: &Budgets,
    args: &UploadArgs,
) -> anyhow::Result<i32> {
    let gated = !budgets.is_empty();
    let loaded = async {
        let base = resolve(client, server, token, reference).await?;
        let sa = fetch(server, &base, token).await?;
        let sb = fetch(server, new, token).await?;
        anyhow::Ok((base, sa, sb))
    }
    .await;
    let (base, sa, sb) = match loaded {
        Ok(v) => v,
        Err(e) if gated => {
            eprintln!("kinetoscope upload: cannot compare: {e:#}");
            return Ok(2);
        }
        Err(e) => return Err(e),
    };
    let d = diff(
        &Side {
            id: &base,
            name: &format!("{reference} ({base})"),
            summary: &sa,
        },
        &Side {
            id: new,
            name: new,
            summary: &sb,
        },
    );
    let links = Links {
        a: Some(format!("{server}/runs/{base}")),
        b: Some(format!("{server}/runs/{new}")),
        diff: Some(format!("{server}/diff/{base}/{new}")),
    };
    if args.format != DiffFormat::Json {
        println!("{server}/diff/{base}/{new}");
    }
    let g = gated.then(|| gate(&sa, &sb, budgets));
    report(d, g, &links, args.format, 15, "kinetoscope upload")
}

/// `PATCH /api/runs/{id}` with `baseline_of`.
async fn mark_baseline(
    client: &reqwest::Client,
    server: &str,
    token: Option<&str>,
    id: &str,
    name: &str,
) -> anyhow::Result<()> {
    let mut req = client
        .patch(format!("{server}/api/runs/{id}"))
        .json(&serde_json::json!({ "baseline_of": name }));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await?;
    if !resp.status().is_success() {
        let e = super::http_error(resp).await;
        anyhow::bail!("could not mark run {id} the baseline of {name}: {e}");
    }
    Ok(())
}
