//! The `ttl-sweeper` command line: runs the same engine as the Lambda, and prints window keys.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use ttl_sweeper::config::Config;
use ttl_sweeper::event::{parse_time, sweep_instant, Trigger};
use ttl_sweeper::telemetry::{self, LogFormat};
use ttl_sweeper::window::{parse_ttl, window_key, Window};

/// Precise item expiry for Amazon DynamoDB.
#[derive(Debug, Parser)]
#[command(name = "ttl-sweeper", version, about)]
struct Cli {
    /// More logging on stderr (-v debug, -vv trace). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log format on stderr.
    #[arg(long, value_parser = ["text", "json"], default_value = "text", global = true)]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one sweep and print its report as one JSON line on stdout.
    Sweep(Box<SweepArgs>),
    /// Print the window key for a ttl (epoch seconds), to check a writer's implementation.
    Window {
        /// The ttl, in epoch seconds.
        ttl: String,
        /// Window width in seconds.
        #[arg(long, env = "WINDOW_SECONDS", default_value = "60")]
        window_seconds: u32,
    },
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// Sweep as of this RFC 3339 instant instead of now.
    #[arg(long)]
    at: Option<String>,
    /// Allow --at in the future. This deletes items that have not expired yet: for tests only.
    #[arg(long)]
    allow_future: bool,
    #[command(flatten)]
    config: ConfigArgs,
}

/// The shared settings; each flag falls back to its environment variable.
#[derive(Debug, Args)]
struct ConfigArgs {
    /// Table to sweep (name or ARN).
    #[arg(long, env = "TABLE_NAME")]
    table_name: Option<String>,
    /// GSI keyed on (window, ttl) [default: expirationWindowIndex].
    #[arg(long, env = "INDEX_NAME")]
    index_name: Option<String>,
    /// Number attribute with the expiry in epoch seconds [default: ttl].
    #[arg(long, env = "TTL_ATTRIBUTE")]
    ttl_attribute: Option<String>,
    /// String attribute with the window key [default: expirationWindow].
    #[arg(long, env = "WINDOW_ATTRIBUTE")]
    window_attribute: Option<String>,
    /// Window width in seconds [default: 60].
    #[arg(long, env = "WINDOW_SECONDS")]
    window_seconds: Option<String>,
    /// Past windows re-read by every sweep [default: 15].
    #[arg(long, env = "LOOKBACK_WINDOWS")]
    lookback_windows: Option<String>,
    /// `batch` or `conditional` [default: batch].
    #[arg(long, env = "DELETE_MODE")]
    delete_mode: Option<String>,
    /// Delete requests in flight [default: 8].
    #[arg(long, env = "MAX_CONCURRENCY")]
    max_concurrency: Option<String>,
    /// Retries per delete request [default: 8].
    #[arg(long, env = "MAX_RETRIES")]
    max_retries: Option<String>,
}

impl ConfigArgs {
    fn lookup(&self, var: &str) -> Option<String> {
        match var {
            "TABLE_NAME" => self.table_name.clone(),
            "INDEX_NAME" => self.index_name.clone(),
            "TTL_ATTRIBUTE" => self.ttl_attribute.clone(),
            "WINDOW_ATTRIBUTE" => self.window_attribute.clone(),
            "WINDOW_SECONDS" => self.window_seconds.clone(),
            "LOOKBACK_WINDOWS" => self.lookback_windows.clone(),
            "DELETE_MODE" => self.delete_mode.clone(),
            "MAX_CONCURRENCY" => self.max_concurrency.clone(),
            "MAX_RETRIES" => self.max_retries.clone(),
            _ => None,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = if cli.log_format == "json" {
        LogFormat::Json
    } else {
        LogFormat::Text
    };
    let level = ["info", "debug", "trace"][usize::from(cli.verbose.min(2))];
    telemetry::init(format, level, false);
    match run(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Window {
            ttl,
            window_seconds,
        } => {
            anyhow::ensure!(
                (1..=ttl_sweeper::window::MAX_WINDOW_SECONDS).contains(&window_seconds),
                "--window-seconds (WINDOW_SECONDS) must be from 1 to 86400, got {window_seconds}"
            );
            let t = parse_ttl(&ttl)?;
            let key = window_key(t, window_seconds)?;
            debug_assert_eq!(
                Window::parse_key(&key).map(|w| w.width()),
                Some(i64::from(window_seconds))
            );
            println!("{key}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep(args) => {
            let config = Config::from_lookup(|v| args.config.lookup(v))?;
            let clock = chrono::Utc::now();
            let now = match &args.at {
                None => clock.timestamp(),
                Some(at) => {
                    let at = parse_time(at).context("--at")?;
                    if args.allow_future {
                        at.timestamp()
                    } else {
                        let (now, clamped) = sweep_instant(Trigger::At(at), clock);
                        anyhow::ensure!(
                            !clamped,
                            "--at {at} is in the future: sweeping as of it would delete items that \
                             have not expired (pass --allow-future to do so on purpose)"
                        );
                        now
                    }
                }
            };
            let sweeper = ttl_sweeper::connect(&config).await?;
            let report = sweeper.sweep(now, None).await;
            telemetry::log_summary(&report);
            println!("{}", serde_json::to_string(&report)?);
            Ok(if report.is_success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
