//! `kinetoscope capture`: asks a server's worker to profile a configured
//! inference engine, then follows the run until it is analyzed.

use clap::Args;
use kinetoscope_types::{CaptureRequest, Created, RunStatus};

/// Arguments of `capture`.
#[derive(Args, Clone, Debug)]
pub struct CaptureArgs {
    /// A configured engine's name (see GET /api/engines).
    #[arg(long)]
    pub engine: String,
    /// Steps to profile.
    #[arg(long, default_value_t = 30)]
    pub steps: u32,
    /// Run name.
    #[arg(long, default_value = "")]
    pub name: String,
    /// The server's base URL.
    #[arg(
        long,
        env = "KINETOSCOPE_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Write token, when the server requires one.
    #[arg(long, env = "KINETOSCOPE_TOKEN")]
    pub token: Option<String>,
    /// Return once the capture is queued instead of following it.
    #[arg(long)]
    pub no_wait: bool,
}

/// Runs `capture`.
pub async fn run(args: CaptureArgs) -> anyhow::Result<()> {
    let server = args.server.trim_end_matches('/').to_string();
    let client = super::client();
    let mut req = client
        .post(format!("{server}/api/captures"))
        .json(&CaptureRequest {
            engine: args.engine.clone(),
            num_steps: args.steps,
            name: args.name.clone(),
            ..Default::default()
        });
    if let Some(t) = &args.token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await?;
    if !resp.status().is_success() {
        return Err(super::http_error(resp).await);
    }
    let created: Created = resp.json().await?;
    println!("{server}{}", created.url);
    if args.no_wait {
        return Ok(());
    }
    let run = super::wait_for_run(&client, &server, &created.id, args.token.as_deref()).await?;
    if run.status == RunStatus::Failed {
        anyhow::bail!("the capture failed: {}", run.error.unwrap_or_default());
    }
    Ok(())
}
