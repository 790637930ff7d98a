//! `kinetoscope upload`: streams traces to a server, compressing plain JSON
//! with zstd on the way, with a progress bar.

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kinetoscope_trace::import::read_head;
use kinetoscope_types::{Compression, Created};
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
    /// Write token, when the server requires one.
    #[arg(long, env = "KINETOSCOPE_TOKEN")]
    pub token: Option<String>,
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

/// Runs `upload`.
pub async fn run(args: UploadArgs) -> anyhow::Result<()> {
    let total: u64 = args
        .files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .map(|m| m.len())
                .with_context(|| format!("{}", f.display()))
        })
        .sum::<anyhow::Result<u64>>()?;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message("uploading");
    let server = args.server.trim_end_matches('/').to_string();
    let client = reqwest::Client::new();
    let mut req = client.post(format!("{server}/api/runs"));
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(n) = &args.name {
        query.push(("name", n.clone()));
    }
    if let Some(t) = &args.tags {
        query.push(("tags", t.clone()));
    }
    req = req.query(&query);
    if let Some(t) = &args.token {
        req = req.bearer_auth(t);
    }
    req = if args.files.len() == 1 {
        let (body, _) = file_body(&args.files[0], bar.clone())?;
        req.header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(body)
    } else {
        let mut form = reqwest::multipart::Form::new();
        for f in &args.files {
            let (body, name) = file_body(f, bar.clone())?;
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
    bar.finish_and_clear();
    if !resp.status().is_success() {
        return Err(super::http_error(resp).await);
    }
    let created: Created = resp.json().await?;
    println!("{server}{}", created.url);
    eprintln!(
        "run {} is {}: it will be analyzed in the background",
        created.id, created.status
    );
    Ok(())
}
