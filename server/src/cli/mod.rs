//! The command-line tools of the `kinetoscope` binary.

pub mod analyze;
pub mod capture;
pub mod diff;
pub mod generate;
pub mod mcp;
pub mod token;
pub mod upload;
pub mod watch;

use kinetoscope_types::{RunInfo, RunStatus};
use std::time::Duration;

/// Turns a failed HTTP answer into an error with the server's `detail`.
pub(crate) async fn http_error(resp: reqwest::Response) -> anyhow::Error {
    let status = resp.status();
    if status.is_redirection() {
        let to = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .unwrap_or("nowhere");
        return anyhow::anyhow!(
            "the server answered {status}, redirecting to {}: the CLI follows no redirect \
             (an upload would turn into a GET, and the token would go along): give the \
             final address as --server",
            kinetoscope_types::escape::visible(to)
        );
    }
    let text = resp.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<kinetoscope_types::ApiError>(&text)
        .map(|e| e.detail)
        .unwrap_or(text);
    anyhow::anyhow!("the server answered {status}: {detail}")
}

/// The CLI's HTTP client: it follows no redirect, so an upload is never
/// turned into a GET that counts as success, and a token never travels to
/// where a redirect points (RELIABILITY.md).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("the HTTP client builds")
}

/// Waits for a run's analysis (or capture) to end, printing its stage on
/// stderr as it changes; the run as it ended, done or failed.
pub(crate) async fn wait_for_run(
    client: &reqwest::Client,
    server: &str,
    id: &str,
    token: Option<&str>,
) -> anyhow::Result<RunInfo> {
    let mut last = String::new();
    // Every 100 ms at first, then less often up to every 500 ms: a small
    // run is reported done within a tenth of a second of being done, a long
    // one costs the server two requests a second.
    let mut every = Duration::from_millis(100);
    loop {
        let mut req = client.get(format!("{server}/api/runs/{id}"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await?;
        if !resp.status().is_success() {
            return Err(http_error(resp).await);
        }
        let run: RunInfo = resp.json().await?;
        let now = if run.stage.is_empty() {
            run.status.to_string()
        } else {
            format!("{} ({})", run.status, run.stage)
        };
        if now != last {
            eprintln!("{now}");
            last = now;
        }
        match run.status {
            RunStatus::Done | RunStatus::Failed => return Ok(run),
            _ => {
                tokio::time::sleep(every).await;
                every = (every * 5 / 4).min(Duration::from_millis(500));
            }
        }
    }
}
