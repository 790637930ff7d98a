//! `kinetoscope`: the server, the worker, and the command-line tools.

use clap::{Parser, Subcommand};
use server::cli;
use server::config::{ServeArgs, StoreArgs, WorkerArgs};
use std::path::PathBuf;

/// Kinetoscope: upload PyTorch profiler (Kineto) traces, read what slows the
/// step down, diff a baseline against a patch.
#[derive(Parser)]
#[command(name = "kinetoscope", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and the app, with an embedded worker (the default).
    Serve(ServeArgs),
    /// Run jobs only (scale-out: point several at the same database and blobs).
    Worker(WorkerArgs),
    /// Analyze a local trace and print the op table, top kernels and findings.
    Analyze {
        /// A trace: .json, .json.gz or .json.zst (detected from its bytes).
        file: PathBuf,
        /// Print the summary JSON (what the server stores) instead.
        #[arg(long)]
        json: bool,
        /// Rows of the op table.
        #[arg(long, default_value_t = 25)]
        rows: usize,
        /// Op, annotation or module name that marks one layer.
        #[arg(long)]
        layer_marker: Option<String>,
        /// Layers per step.
        #[arg(long)]
        layer_period: Option<u64>,
        /// Op, annotation or Python frame name (a substring) that spans one step.
        #[arg(long)]
        step_marker: Option<String>,
        /// The device's peak memory bandwidth in GB/s, for a GPU the device
        /// table does not know (or to measure against another).
        #[arg(long, value_name = "GBPS")]
        peak_gbps: Option<f64>,
        /// The device's dense BF16 tensor peak in TFLOP/s.
        #[arg(long, value_name = "TFLOPS")]
        peak_tflops: Option<f64>,
    },
    /// Compare baseline A against patch B (trace files or stored runs); with
    /// --fail-above, a regression gate (exit 0 within budget, 1 over it, 2
    /// when they cannot be compared).
    Diff(cli::diff::DiffArgs),
    /// Upload traces to a server (several files are the ranks of one run).
    Upload(cli::upload::UploadArgs),
    /// Upload each new trace file written into a folder (recursively), once
    /// complete; the ranks of one profiling cycle become one run.
    Watch(cli::watch::WatchArgs),
    /// A Model Context Protocol server over stdio: tools for a coding agent
    /// over a Kinetoscope server's runs (findings, tables, timeline, diffs).
    Mcp(cli::mcp::McpArgs),
    /// Ask the server's worker to capture from a configured inference engine.
    Capture(cli::capture::CaptureArgs),
    /// Manage tokens (the first one puts the server in tokens mode for good).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Write a generated decode trace (the founding story's shape by default).
    Generate(cli::generate::GenerateArgs),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token: prints it once; only its hash is stored.
    Create {
        /// A unique name, used to list and revoke it (e.g. `ci`).
        name: String,
        /// `read` may list, search and (on a private server) read runs;
        /// `upload` may also create runs and captures; `admin` may also
        /// edit, delete and re-analyze.
        #[arg(long, value_enum, default_value = "admin")]
        scope: cli::token::ScopeArg,
        /// Stop accepting it after this long: e.g. 90d, 12h or 30m.
        #[arg(long, value_name = "LIFETIME", value_parser = cli::token::parse_lifetime)]
        expires_in: Option<i64>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List tokens: name, scope, created, last used, expiry or revocation (never secrets).
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a token by name; requests that present it are refused at once.
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("KINETOSCOPE_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn"));
    let json = std::env::var("KINETOSCOPE_LOG_FORMAT").is_ok_and(|f| f == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        None => {
            init_tracing();
            rt.block_on(server::serve(cli.serve))
        }
        Some(Command::Serve(args)) => {
            init_tracing();
            rt.block_on(server::serve(args))
        }
        Some(Command::Worker(args)) => {
            init_tracing();
            rt.block_on(server::run_worker(args))
        }
        Some(Command::Analyze {
            file,
            json,
            rows,
            layer_marker,
            layer_period,
            step_marker,
            peak_gbps,
            peak_tflops,
        }) => cli::analyze::run(
            &file,
            json,
            rows,
            &kinetoscope_trace::AnalysisOptions {
                layer_marker,
                layer_period,
                step_marker,
                peak_gbps,
                peak_tflops,
            },
        ),
        Some(Command::Diff(args)) => {
            let code = cli::diff::run(args, &rt)?;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Some(Command::Upload(args)) => {
            let code = rt.block_on(cli::upload::run(args))?;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Some(Command::Watch(args)) => cli::watch::run(args, &rt),
        Some(Command::Mcp(args)) => rt.block_on(cli::mcp::run(args)),
        Some(Command::Capture(args)) => rt.block_on(cli::capture::run(args)),
        Some(Command::Token { command }) => match command {
            TokenCommand::Create {
                name,
                scope,
                expires_in,
                store,
            } => rt.block_on(cli::token::create(&name, scope, expires_in, &store)),
            TokenCommand::List { store } => rt.block_on(cli::token::list(&store)),
            TokenCommand::Revoke { name, store } => rt.block_on(cli::token::revoke(&name, &store)),
        },
        Some(Command::Generate(args)) => cli::generate::run(args),
    }
}
