//! Configuration: command-line flags, each with an environment variable.

use clap::Args;
use std::path::PathBuf;
use worker::engines::Engine;

/// Where data lives and the limits every process shares (server and worker).
#[derive(Args, Clone, Debug)]
pub struct StoreArgs {
    /// Folder for the embedded database and blobs.
    #[arg(long, env = "KINETOSCOPE_DATA", default_value = "./data")]
    pub data: PathBuf,
    /// Database URL: `sqlite://PATH` or `postgres://...` [default: sqlite://$KINETOSCOPE_DATA/kinetoscope.db]
    #[arg(long = "database-url", env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Blob store: a folder or `s3://bucket/prefix` [default: $KINETOSCOPE_DATA/blobs]
    #[arg(long, env = "KINETOSCOPE_BLOBS")]
    pub blobs: Option<String>,
    /// Largest decompressed trace accepted, in bytes (zstd/gzip bombs fail the job).
    #[arg(long, env = "KINETOSCOPE_MAX_TRACE_BYTES", default_value_t = 16 << 30)]
    pub max_trace_bytes: u64,
    /// Deepest JSON nesting accepted in a trace.
    #[arg(long, env = "KINETOSCOPE_MAX_DEPTH", default_value_t = 64)]
    pub max_depth: usize,
    /// Inference engines capture jobs may target, as a JSON array of
    /// `{name, url, flavour, trace_dir, ranks}`.
    #[arg(long, env = "KINETOSCOPE_ENGINES")]
    pub engines: Option<String>,
    /// How long a capture waits for the engine's trace files, in seconds.
    #[arg(long, env = "KINETOSCOPE_CAPTURE_TIMEOUT_SECS", default_value_t = 600)]
    pub capture_timeout_secs: u64,
    /// How long a capture waits for the first step before calling the engine idle, in seconds.
    #[arg(long, env = "KINETOSCOPE_CAPTURE_IDLE_SECS", default_value_t = 120)]
    pub capture_idle_secs: u64,
    /// The longest one analysis may take, in seconds; past it the run fails
    /// with the reason. The default is about ten times what the largest
    /// accepted trace (16 GB of JSON) takes on a 2-core machine.
    #[arg(
        long,
        env = "KINETOSCOPE_ANALYSIS_DEADLINE_SECS",
        default_value_t = 600
    )]
    pub analysis_deadline_secs: u64,
    /// How long a job claim lasts without a heartbeat, in seconds: a job
    /// whose worker died is taken over this long after its last heartbeat.
    #[arg(long, env = "KINETOSCOPE_LEASE_SECS", default_value_t = 30)]
    pub lease_secs: u64,
}

impl StoreArgs {
    /// The database URL, defaulting to SQLite in the data folder.
    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| format!("sqlite://{}", self.data.join("kinetoscope.db").display()))
    }

    /// The blob store spec, defaulting to a folder in the data folder.
    pub fn blobs(&self) -> String {
        self.blobs
            .clone()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| self.data.join("blobs").display().to_string())
    }

    /// Parsing limits for traces.
    pub fn limits(&self) -> kinetoscope_trace::import::Limits {
        kinetoscope_trace::import::Limits {
            max_json_bytes: self.max_trace_bytes,
            max_depth: self.max_depth.clamp(8, 1024),
            ..Default::default()
        }
    }

    /// The configured engines.
    pub fn engines(&self) -> anyhow::Result<Vec<Engine>> {
        match self
            .engines
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => Ok(Vec::new()),
            Some(json) => serde_json::from_str(json).map_err(|e| {
                anyhow::anyhow!("KINETOSCOPE_ENGINES is not a JSON array of engines: {e}")
            }),
        }
    }
}

/// Settings of `kinetoscope serve`.
#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    /// Store.
    pub store: StoreArgs,
    /// Address to listen on.
    #[arg(long, env = "KINETOSCOPE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Embedded worker job loops (0: this process serves only).
    #[arg(long, env = "KINETOSCOPE_WORKERS", default_value_t = 1)]
    pub workers: usize,
    /// Folder of the built app (Trunk's output).
    #[arg(
        long = "static-dir",
        env = "KINETOSCOPE_STATIC",
        default_value = "app/dist"
    )]
    pub static_dir: PathBuf,
    /// Who may embed the app in a frame: the CSP `frame-ancestors` sources
    /// (`'none'`: nobody; `'self' https://wiki.example.com`, say).
    #[arg(long, env = "KINETOSCOPE_FRAME_ANCESTORS", default_value = "'none'")]
    pub frame_ancestors: String,
    /// Memory for loaded timeline indexes, in MB (least recently used go first).
    #[arg(long, env = "KINETOSCOPE_TIMELINE_CACHE_MB", default_value_t = 512)]
    pub timeline_cache_mb: u64,
    /// Memory for serialized answers (run views, diffs), in MB.
    #[arg(long, env = "KINETOSCOPE_ANSWER_CACHE_MB", default_value_t = 64)]
    pub answer_cache_mb: u64,
    /// Memory for parsed summaries, in MB (weighed at twice their JSON).
    #[arg(long, env = "KINETOSCOPE_SUMMARY_CACHE_MB", default_value_t = 128)]
    pub summary_cache_mb: u64,
    /// Largest upload accepted, in bytes (compressed, all files together).
    #[arg(long, env = "KINETOSCOPE_MAX_UPLOAD_BYTES", default_value_t = 8 << 30)]
    pub max_upload_bytes: u64,
    /// The slowest an upload body may arrive, in bytes per second averaged
    /// over `--upload-pace-window-secs`; slower gets 408 (0: no limit).
    #[arg(
        long,
        env = "KINETOSCOPE_UPLOAD_MIN_BYTES_PER_SEC",
        default_value_t = 1024
    )]
    pub upload_min_bytes_per_sec: u64,
    /// The window over which an upload's pace is measured, in seconds.
    #[arg(
        long,
        env = "KINETOSCOPE_UPLOAD_PACE_WINDOW_SECS",
        default_value_t = 30
    )]
    pub upload_pace_window_secs: u64,
    /// Seconds a client may take to send a request's headers (the whole
    /// head, from its first byte or from an idle keep-alive); slower
    /// connections are closed, so trickling clients can't hold the server.
    #[arg(long, env = "KINETOSCOPE_HEADER_TIMEOUT_SECS", default_value_t = 30)]
    pub header_timeout_secs: u64,
    /// Concurrent uploads one client address may have in progress; more get
    /// 429 (0: no cap).
    #[arg(long, env = "KINETOSCOPE_MAX_UPLOADS_PER_CLIENT", default_value_t = 4)]
    pub max_uploads_per_client: usize,
    /// Writes (uploads, edits, deletes, re-analyses, captures) one client
    /// address may make per minute, in bursts of as many; more get 429
    /// (0: no limit).
    #[arg(long, env = "KINETOSCOPE_WRITES_PER_MINUTE", default_value_t = 120)]
    pub writes_per_minute: u32,
    /// Apply the per-client upload cap and write rate to loopback clients too (off: on the
    /// embedded default the only client is the user's own machine).
    #[arg(long, env = "KINETOSCOPE_LIMIT_LOOPBACK", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub limit_loopback: bool,
    /// Access mode: `open` (anyone who reaches the server may write) or
    /// `tokens` (writes and the run list need a token). Creating the first
    /// token switches a server to `tokens` for good.
    #[arg(long, env = "KINETOSCOPE_AUTH", value_enum, default_value = "open")]
    pub auth: crate::api::auth::AuthMode,
    /// Every read needs a token too (implies `--auth tokens`): a run's link
    /// then carries nothing secret.
    #[arg(long, env = "KINETOSCOPE_PRIVATE", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub private: bool,
    /// Host names the server answers to besides loopback names and IP
    /// addresses (comma-separated, e.g. `kinetoscope.example.com`): any
    /// other `Host` is refused, so a DNS-rebound name reads nothing.
    #[arg(
        long = "public-host",
        env = "KINETOSCOPE_PUBLIC_HOST",
        value_delimiter = ','
    )]
    pub public_host: Vec<String>,
    /// Addresses or ranges of proxies (a load balancer) whose
    /// `X-Forwarded-For` names the client, comma-separated (`10.0.0.0/8`):
    /// the per-client limits then count each client, not the proxy.
    #[arg(
        long = "trusted-proxy",
        env = "KINETOSCOPE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxy: Vec<String>,
    /// Blobs of unknown runs and staging files older than this many seconds
    /// are removed at start-up.
    #[arg(long, env = "KINETOSCOPE_ORPHAN_AGE_SECS", default_value_t = 3600)]
    pub orphan_age_secs: u64,
}

/// Settings of `kinetoscope worker`.
#[derive(Args, Clone, Debug)]
pub struct WorkerArgs {
    #[command(flatten)]
    /// Store.
    pub store: StoreArgs,
    /// Job loops in this process.
    #[arg(long, env = "KINETOSCOPE_WORKERS", default_value_t = 1)]
    pub workers: usize,
}
