//! The command-line tools of the `kinetoscope` binary.

pub mod analyze;
pub mod capture;
pub mod diff;
pub mod generate;
pub mod token;
pub mod upload;

/// Turns a failed HTTP answer into an error with the server's `detail`.
pub(crate) async fn http_error(resp: reqwest::Response) -> anyhow::Error {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<kinetoscope_types::ApiError>(&text)
        .map(|e| e.detail)
        .unwrap_or(text);
    anyhow::anyhow!("the server answered {status}: {detail}")
}
