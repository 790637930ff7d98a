//! Helpers shared by the server's integration tests: a real server on a free
//! port with a temporary data folder, uploads, waiting for analyses, and a
//! headless Chromium driven through ChromeDriver.

#![allow(dead_code)]

use kinetoscope_types::{Created, RunInfo};
use server::config::{ServeArgs, StoreArgs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// A shared trace.
pub fn shared_trace(name: &str) -> PathBuf {
    let p = repo().join("../shared/traces").join(name);
    assert!(p.exists(), "missing shared trace {}", p.display());
    p.canonicalize().unwrap()
}

/// The PostgreSQL server of the test machine (trust auth, database `test`).
pub fn postgres_admin_url() -> String {
    std::env::var("KINETOSCOPE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Creates a fresh PostgreSQL database for one test and returns its URL.
pub async fn fresh_postgres() -> String {
    use sqlx::Connection;
    let admin = postgres_admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {admin} is needed for this test: {e}"));
    // Test databases are named with their creation time; those left by
    // runs over an hour ago are dropped (one in use refuses, which is fine).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let old: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database WHERE datname LIKE 'kinetoscope_test_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for db in old {
        let born: u64 = db
            .split('_')
            .nth(2)
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        if now.saturating_sub(born) > 3600 {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {db}"))
                .execute(&mut conn)
                .await;
        }
    }
    let name = format!(
        "kinetoscope_test_{now}_{}",
        server::api::new_id().to_lowercase().replace('-', "_")
    );
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or(admin);
    format!("{base}/{name}")
}

/// Options of a test server.
#[derive(Clone)]
pub struct Opts {
    pub database_url: Option<String>,
    pub workers: usize,
    pub max_upload_bytes: u64,
    pub upload_min_bytes_per_sec: u64,
    pub upload_pace_window_secs: u64,
    pub header_timeout_secs: u64,
    pub max_uploads_per_client: usize,
    pub limit_loopback: bool,
    pub writes_per_minute: u32,
    pub max_trace_bytes: u64,
    pub engines: Option<String>,
    pub orphan_age_secs: u64,
    pub capture_idle_secs: u64,
    pub capture_timeout_secs: u64,
    pub auth: server::api::auth::AuthMode,
    pub private: bool,
    pub analysis_deadline_secs: u64,
    /// Memory for loaded timeline indexes (64 MB in tests; `kinetoscope
    /// serve` has 512 by default, what the browser benchmarks use).
    pub timeline_cache_mb: u64,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            database_url: None,
            workers: 1,
            max_upload_bytes: 8 << 30,
            upload_min_bytes_per_sec: 1024,
            upload_pace_window_secs: 30,
            header_timeout_secs: 30,
            max_uploads_per_client: 4,
            limit_loopback: false,
            writes_per_minute: 120,
            max_trace_bytes: 16 << 30,
            engines: None,
            orphan_age_secs: 3600,
            capture_idle_secs: 120,
            capture_timeout_secs: 600,
            auth: server::api::auth::AuthMode::Open,
            private: false,
            analysis_deadline_secs: 600,
            timeline_cache_mb: 64,
        }
    }
}

/// Arguments for a server over `data`.
pub fn serve_args(data: &Path, o: &Opts) -> ServeArgs {
    ServeArgs {
        store: StoreArgs {
            data: data.to_path_buf(),
            database_url: o.database_url.clone(),
            blobs: None,
            max_trace_bytes: o.max_trace_bytes,
            max_depth: 64,
            engines: o.engines.clone(),
            capture_timeout_secs: o.capture_timeout_secs,
            capture_idle_secs: o.capture_idle_secs,
            lease_secs: 30,
            analysis_deadline_secs: o.analysis_deadline_secs,
        },
        listen: "127.0.0.1:0".into(),
        workers: o.workers,
        static_dir: repo().join("app/dist"),
        max_upload_bytes: o.max_upload_bytes,
        upload_min_bytes_per_sec: o.upload_min_bytes_per_sec,
        upload_pace_window_secs: o.upload_pace_window_secs,
        header_timeout_secs: o.header_timeout_secs,
        max_uploads_per_client: o.max_uploads_per_client,
        limit_loopback: o.limit_loopback,
        writes_per_minute: o.writes_per_minute,
        orphan_age_secs: o.orphan_age_secs,
        timeline_cache_mb: o.timeline_cache_mb,
        frame_ancestors: "'none'".into(),
        auth: o.auth,
        private: o.private,
        public_host: Vec::new(),
        trusted_proxy: Vec::new(),
        answer_cache_mb: 64,
        summary_cache_mb: 128,
    }
}

/// A server running in this process; its client API is reachable through
/// `Deref` (`srv.upload(..)`, `srv.url`, `srv.http`).
pub struct TestServer {
    pub data: tempfile::TempDir,
    running: Option<server::Running>,
    api: Api,
}

impl std::ops::Deref for TestServer {
    type Target = Api;
    fn deref(&self) -> &Api {
        &self.api
    }
}

impl TestServer {
    pub async fn start(o: Opts) -> TestServer {
        let data = tempfile::tempdir().unwrap();
        Self::start_in(data, o).await
    }

    pub async fn start_in(data: tempfile::TempDir, o: Opts) -> TestServer {
        let running = server::start(serve_args(data.path(), &o))
            .await
            .expect("server starts");
        TestServer {
            api: Api::new(&format!("http://{}", running.addr)),
            data,
            running: Some(running),
        }
    }

    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        self.data
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// ChromeDriver with a headless Chromium session.
pub struct Browser {
    driver: Child,
    pub client: fantoccini::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        let chromedriver =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        assert!(
            Path::new(&chromedriver).exists(),
            "ChromeDriver is needed for the browser tests ({chromedriver}); `make test` installs chromium and chromium-driver"
        );
        let port = free_port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let caps: serde_json::Map<String, serde_json::Value> = serde_json::from_value(serde_json::json!({
            "goog:chromeOptions": {
                "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                    "--window-size=1400,1000", format!("--user-data-dir={}", profile.path().display())
                ]
            }
        }))
        .unwrap();
        let start = Instant::now();
        let client = loop {
            match fantoccini::ClientBuilder::new(
                hyper_util::client::legacy::connect::HttpConnector::new(),
            )
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            {
                Ok(c) => break c,
                Err(e) if start.elapsed() < Duration::from_secs(30) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("could not start a Chromium session: {e}"),
            }
        };
        Browser {
            driver,
            client,
            _profile: profile,
        }
    }

    /// Waits until a CSS selector matches.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(timeout)
            .for_element(fantoccini::Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
    }

    /// Waits until a JavaScript expression is truthy.
    pub async fn wait_js(&self, expr: &str, timeout: Duration) -> serde_json::Value {
        let start = Instant::now();
        loop {
            let v = self
                .client
                .execute(&format!("return ({expr});"), vec![])
                .await
                .unwrap();
            if !(v.is_null()
                || v == serde_json::json!(false)
                || v == serde_json::json!("")
                || v == serde_json::json!(0))
            {
                return v;
            }
            assert!(start.elapsed() < timeout, "timed out waiting for {expr}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Saves a screenshot to the tests' output folder; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let png = self.client.screenshot().await.unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

/// Browser tests run one at a time (each starts a Chromium; the machine has
/// two cores).
pub static BROWSER_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Fails with a clear message when the app has not been built.
pub fn require_app() {
    let index = repo().join("app/dist/index.html");
    assert!(
        index.exists(),
        "{} is missing: build the app first (`make test` does: trunk build --release)",
        index.display()
    );
}

/// A database to run a test against: SQLite in the data folder, or a fresh
/// PostgreSQL database.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

impl Backend {
    /// The database URL for a server over `data`.
    pub async fn url(self, data: &Path) -> String {
        match self {
            Backend::Sqlite => format!("sqlite://{}", data.join("kinetoscope.db").display()),
            Backend::Postgres => fresh_postgres().await,
        }
    }
}

/// A raw connection for checks the API does not expose.
pub async fn raw_db(url: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::AnyPool::connect(url).await.unwrap()
}

/// Runs a query returning one i64.
pub async fn scalar(pool: &sqlx::AnyPool, sql: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(sql)
        .fetch_one(pool)
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

/// A `kinetoscope` process.
pub struct Proc {
    pub child: Child,
    pub url: Option<String>,
}

impl Proc {
    /// Starts `kinetoscope ARGS` with `envs`; for `serve`, waits for /healthz.
    pub async fn start(args: &[&str], envs: &[(&str, String)]) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kinetoscope"));
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.env("KINETOSCOPE_STATIC", "/nonexistent");
        let mut url = None;
        if args.first() == Some(&"serve") {
            let port = free_port();
            cmd.env("KINETOSCOPE_LISTEN", format!("127.0.0.1:{port}"));
            url = Some(format!("http://127.0.0.1:{port}"));
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start kinetoscope");
        let p = Proc { child, url };
        if let Some(u) = &p.url {
            let start = Instant::now();
            loop {
                if reqwest::get(format!("{u}/healthz"))
                    .await
                    .is_ok_and(|r| r.status().is_success())
                {
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "kinetoscope serve did not start"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        p
    }

    /// SIGKILL: no clean-up of any kind.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A client for a server by URL.
pub struct Api {
    pub url: String,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(url: &str) -> Api {
        Api {
            url: url.to_string(),
            http: reqwest::Client::new(),
        }
    }

    pub async fn upload(&self, bytes: Vec<u8>, name: &str) -> Created {
        let resp = self
            .http
            .post(format!("{}/api/runs", self.url))
            .query(&[("name", name)])
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            201,
            "upload refused: {}",
            resp.text().await.unwrap_or_default()
        );
        resp.json().await.unwrap()
    }

    pub async fn run(&self, id: &str) -> RunInfo {
        self.http
            .get(format!("{}/api/runs/{id}", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits until the run is done or failed.
    pub async fn wait(&self, id: &str, timeout: Duration) -> RunInfo {
        let start = Instant::now();
        loop {
            let r = self.run(id).await;
            if matches!(r.status.as_str(), "done" | "failed") && r.stage.is_empty() {
                return r;
            }
            assert!(
                start.elapsed() < timeout,
                "run {id} still {} ({}) after {timeout:?}",
                r.status,
                r.stage
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn upload_file(&self, path: &Path, name: &str) -> Created {
        self.upload(std::fs::read(path).unwrap(), name).await
    }

    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp.json().await.unwrap()
    }
}

/// A small generated trace, zstd-compressed.
pub fn small_trace(steps: u32, layers: u32) -> Vec<u8> {
    let p = kinetoscope_generate::DecodeParams {
        steps,
        layers,
        with_stack: false,
        ..Default::default()
    };
    let mut json = Vec::new();
    kinetoscope_generate::write_decode_trace(&p, &mut json).unwrap();
    zstd::encode_all(&json[..], 3).unwrap()
}

/// A request body fed chunk by chunk through the returned sender (so a test
/// can stop half-way).
pub fn streaming_body() -> (
    tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    reqwest::Body,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    let body = reqwest::Body::wrap_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    (tx, body)
}

/// Posts a form streamed part by part ([`form_part`], sent through the
/// returned sender) to `url`, in the background.
pub fn post_form(
    http: reqwest::Client,
    url: String,
) -> (
    tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>,
) {
    let (tx, body) = streaming_body();
    let sent = tokio::spawn(async move {
        http.post(url)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={FORM_BOUNDARY}"),
            )
            .body(body)
            .send()
            .await
    });
    (tx, sent)
}

/// The boundary of the forms [`form_part`] writes.
pub const FORM_BOUNDARY: &str = "kinetoscope-test-form";

/// One file field of a `multipart/form-data` body with [`FORM_BOUNDARY`],
/// ended by the delimiter that follows it (the next field's, or with
/// `last` the form's end): a server sees a field end only once that
/// delimiter arrives, so a test that streams a form part by part
/// ([`streaming_body`]) can act between its files. `first` opens the form.
pub fn form_part(file: &str, bytes: &[u8], first: bool, last: bool) -> bytes::Bytes {
    let mut out = Vec::new();
    if first {
        out.extend_from_slice(format!("--{FORM_BOUNDARY}\r\n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "Content-Disposition: form-data; name=\"file\"; filename=\"{file}\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    let end = if last { "--" } else { "" };
    out.extend_from_slice(format!("\r\n--{FORM_BOUNDARY}{end}\r\n").as_bytes());
    out.into()
}

/// Polls `sql` (one i64) until it equals `want`, failing after `timeout`.
pub async fn wait_scalar(pool: &sqlx::AnyPool, sql: &str, want: i64, timeout: Duration) {
    let start = std::time::Instant::now();
    loop {
        let got = scalar(pool, sql).await;
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{sql}: {got} after {timeout:?}, waiting for {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
