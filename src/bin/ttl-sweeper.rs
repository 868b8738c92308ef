//! The `ttl-sweeper` command line: runs the same engine as the Lambda, and prints window keys.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::time::Duration;
use ttl_sweeper::config::Config;
use ttl_sweeper::event::{parse_time, sweep_instant, Trigger};
use ttl_sweeper::telemetry::{self, LogFormat};

use aws_sdk_dynamodb::types::AttributeValue;
use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use ttl_sweeper::backfill::{default_segments, BackfillOptions, BackfillState};
use ttl_sweeper::config::parse_duration;
use ttl_sweeper::item::Layout;
use ttl_sweeper::runner::{run_ticks, Ticks};
use ttl_sweeper::store::{DynamoStore, TableInfo, TableSchema};
use ttl_sweeper::sweep::{Stop, SweepReport};
use ttl_sweeper::window::{
    parse_ttl, partition_key, shard_of, Window, MAX_SHARDS, MAX_WINDOW_SECONDS,
};

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
    /// Sweep every interval until SIGINT/SIGTERM, then print the merged report (for ECS, EKS,
    /// systemd or a laptop).
    Run(Box<RunArgs>),
    /// Give every item with a numeric ttl its window attribute (parallel Scan, conditional
    /// updates, resumable); prints a JSON summary.
    Backfill(Box<BackfillArgs>),
    /// Report expired-but-present items by age, and items the sweeper cannot see (missing or
    /// wrong window, millisecond or non-numeric ttl); exits 1 past the thresholds.
    Audit(Box<AuditArgs>),
    /// Print the window key for a ttl (epoch seconds), to check a writer's implementation.
    Window {
        /// The ttl, in epoch seconds.
        ttl: String,
        /// Window width in seconds.
        #[arg(long, env = "WINDOW_SECONDS", default_value = "60")]
        window_seconds: u32,
        /// Shards per window; with more than 1, --key is required.
        #[arg(long, env = "WINDOW_SHARDS", default_value = "1")]
        shards: u32,
        /// The item's partition key value, as DynamoDB JSON: {"S":"user#42"}, {"N":"42"},
        /// {"B":"<base64>"}, or a one-attribute key {"id":{"S":"user#42"}}.
        #[arg(long)]
        key: Option<String>,
    },
}

#[derive(Debug, Args)]
struct BackfillArgs {
    /// Parallel Scan segments [default: one per 256 MiB of table, 4 to 256].
    #[arg(long)]
    segments: Option<u32>,
    /// Write capacity units per second at most.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Count what would be written; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Progress file [default: ttl-sweeper-backfill-<table>.json].
    #[arg(long)]
    state: Option<std::path::PathBuf>,
    /// Continue from the progress file of an earlier, interrupted run.
    #[arg(long)]
    resume: bool,
    /// Items per Scan page; progress is saved after every page.
    #[arg(long, default_value = "500")]
    page_size: i32,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Debug, Args)]
struct AuditArgs {
    /// Parallel Scan segments.
    #[arg(long, default_value = "4")]
    segments: u32,
    /// Read about this many items instead of the whole table.
    #[arg(long)]
    sample: Option<u64>,
    /// Fail when an expired item is still present this long after its ttl, e.g. `5m`.
    #[arg(long, default_value = "5m")]
    max_expired_age: String,
    /// Fail when more items than this have writer problems (missing/wrong window, bad ttl).
    #[arg(long, default_value = "0")]
    max_problems: u64,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Interval between sweeps, e.g. `1s`, `500ms`, `1m`.
    #[arg(long, default_value = "1s")]
    every: String,
    #[command(flatten)]
    config: ConfigArgs,
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
    /// Shards per window, as the writers use [default: 1].
    #[arg(long, env = "WINDOW_SHARDS")]
    window_shards: Option<String>,
    /// Sweep period of the long-running loop's full sweeps [default: 60].
    #[arg(long, env = "SCHEDULE_SECONDS")]
    schedule_seconds: Option<String>,
    /// Table holding the catch-up checkpoint (partition key `id`, String).
    #[arg(long, env = "CHECKPOINT_TABLE")]
    checkpoint_table: Option<String>,
    /// Longest catch-up after an outage, e.g. `24h` [default: 24h].
    #[arg(long, env = "MAX_CATCHUP")]
    max_catchup: Option<String>,
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
            "WINDOW_SHARDS" => self.window_shards.clone(),
            "SCHEDULE_SECONDS" => self.schedule_seconds.clone(),
            "CHECKPOINT_TABLE" => self.checkpoint_table.clone(),
            "MAX_CATCHUP" => self.max_catchup.clone(),
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
            shards,
            key,
        } => {
            anyhow::ensure!(
                (1..=MAX_WINDOW_SECONDS).contains(&window_seconds),
                "--window-seconds (WINDOW_SECONDS) must be from 1 to 86400, got {window_seconds}"
            );
            anyhow::ensure!(
                (1..=MAX_SHARDS).contains(&shards),
                "--shards (WINDOW_SHARDS) must be from 1 to {MAX_SHARDS}, got {shards}"
            );
            let window = Window::containing(parse_ttl(&ttl)?, window_seconds);
            let shard = match (&key, shards) {
                (_, 1) => 0,
                (None, _) => anyhow::bail!(
                    "--shards {shards} needs --key: the shard comes from the item's partition key"
                ),
                (Some(json), _) => shard_of(&partition_key_bytes(json)?, shards),
            };
            println!("{}", partition_key(window, shard, shards));
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill(args) => backfill(*args).await,
        Command::Audit(args) => audit(*args).await,
        Command::Run(args) => {
            let config = Config::from_lookup(|v| args.config.lookup(v))?;
            let every = parse_duration(&args.every)
                .filter(|d| *d >= Duration::from_millis(100))
                .with_context(|| {
                    format!(
                        "--every {:?}: expected a duration of at least 100ms, e.g. `1s`",
                        args.every
                    )
                })?;
            let sweeper = ttl_sweeper::connect(&config).await?;
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            let ticks = Ticks {
                every,
                full_every: Duration::from_secs(u64::from(config.schedule_seconds)),
                until: None,
            };
            let stop = Stop::never().with_cancel(shutdown);
            let clock = || chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
            tracing::info!(table = %config.table_name, every = ?every, "running until SIGINT or SIGTERM");
            let first = chrono::Utc::now().timestamp();
            let report =
                run_ticks(&sweeper, first, clock, &ticks, &stop, telemetry::log_tick).await;
            tracing::info!("stopped");
            finish(&report)
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
            let report = sweeper.sweep(now, &Stop::never()).await;
            finish(&report)
        }
    }
}

/// The bytes the shard hash is taken over, from a partition key value in DynamoDB JSON:
/// parsed into an attribute value, then hashed by the same rule writers use.
fn partition_key_bytes(json: &str) -> anyhow::Result<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_str(json).context("--key is not JSON")?;
    let obj = value
        .as_object()
        .filter(|o| o.len() == 1)
        .context("--key must be one typed value like {\"S\":\"user#42\"} or a one-attribute key")?;
    let (name, inner) = obj.iter().next().expect("one entry");
    let attribute = match (name.as_str(), inner) {
        ("S", serde_json::Value::String(s)) => AttributeValue::S(s.clone()),
        ("N", serde_json::Value::String(n)) => AttributeValue::N(n.clone()),
        ("B", serde_json::Value::String(b64)) => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .context("--key: the B value is not base64")?;
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(bytes))
        }
        (_, serde_json::Value::Object(_)) => return partition_key_bytes(&inner.to_string()),
        _ => anyhow::bail!("--key: unsupported value {value}; use S, N or B"),
    };
    Ok(ttl_sweeper::item::partition_key_bytes(&attribute).expect("S, N and B are key types"))
}

/// Cancels `token` on SIGINT or SIGTERM: the sweep in flight finishes its requests and stops.
async fn cancel_on_signal(token: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("signal received: finishing the requests in flight");
    token.cancel();
}

/// Logs the summary, prints the report as one JSON line, and maps success to the exit status.
fn finish(report: &SweepReport) -> anyhow::Result<ExitCode> {
    telemetry::log_summary(report);
    println!("{}", serde_json::to_string(report)?);
    Ok(if report.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What the tools that scan need: the configuration, the store, the table's key schema, the
/// window layout, and the table's size (all from one `DescribeTable`).
struct ScanSetup {
    config: Config,
    store: DynamoStore,
    schema: TableSchema,
    layout: Layout,
    info: TableInfo,
}

async fn scan_setup(config: &ConfigArgs) -> anyhow::Result<ScanSetup> {
    let config = Config::from_lookup(|v| config.lookup(v))?;
    let store = DynamoStore::from_env().await;
    let info = store.table_info(&config.table_name).await?;
    let schema = TableSchema {
        table_name: config.table_name.clone(),
        index_name: config.index_name.clone(),
        key_attributes: info.key_attributes.clone(),
        window_attribute: config.window_attribute.clone(),
        ttl_attribute: config.ttl_attribute.clone(),
    };
    let layout = Layout::from_config(&config);
    Ok(ScanSetup {
        config,
        store,
        schema,
        layout,
        info,
    })
}

async fn backfill(args: BackfillArgs) -> anyhow::Result<ExitCode> {
    let ScanSetup {
        config,
        store,
        schema,
        layout,
        info,
    } = scan_setup(&args.config).await?;
    let path = args.state.clone().unwrap_or_else(|| {
        format!(
            "ttl-sweeper-backfill-{}.json",
            config.table_name.replace(['/', ':'], "_")
        )
        .into()
    });
    let state = if args.resume {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("--resume: cannot read {}", path.display()))?;
        let state: BackfillState = serde_json::from_str(&text).with_context(|| {
            format!(
                "--resume: {} is not a backfill progress file",
                path.display()
            )
        })?;
        anyhow::ensure!(
            state.table == config.table_name
                && state.window_seconds == layout.window_seconds
                && state.window_shards == layout.window_shards,
            "--resume: {} is for table {:?} with {} s windows and {} shards; this run is for {:?} with {} s and {}",
            path.display(), state.table, state.window_seconds, state.window_shards,
            config.table_name, layout.window_seconds, layout.window_shards
        );
        state
    } else {
        anyhow::ensure!(
            !path.exists() || args.dry_run,
            "{} exists: pass --resume to continue that run, or remove it to start over",
            path.display()
        );
        let segments = match args.segments {
            Some(n) => n.clamp(1, 1_000_000),
            None => default_segments(info.size_bytes),
        };
        BackfillState::new(&config.table_name, &layout, segments)
    };
    let bar = ProgressBar::new(info.item_count.max(0) as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos}/{len} items scanned ({per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let dry_run = args.dry_run;
    let save = |s: &BackfillState| {
        if !dry_run {
            if let Err(e) = write_atomically(&path, s) {
                tracing::warn!(error = %e, path = %path.display(), "could not save progress");
            }
        }
    };
    let progress = |n: u64| bar.set_position(n);
    let options = BackfillOptions {
        dry_run,
        max_wcu: args.max_wcu,
        page_limit: Some(args.page_size.max(1)),
        now: chrono::Utc::now().timestamp(),
    };
    let done = ttl_sweeper::backfill::backfill(
        &store, &schema, &layout, &options, state, &save, &progress,
    )
    .await;
    bar.finish_and_clear();
    println!("{}", serde_json::to_string(&done.report)?);
    Ok(if done.report.errors.is_empty() && done.report.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write_atomically(path: &std::path::Path, state: &BackfillState) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn audit(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let max_age = parse_duration(&args.max_expired_age).with_context(|| {
        format!(
            "--max-expired-age {:?}: expected a duration such as 5m",
            args.max_expired_age
        )
    })?;
    let ScanSetup {
        store,
        schema,
        layout,
        ..
    } = scan_setup(&args.config).await?;
    let now = chrono::Utc::now().timestamp();
    let report =
        ttl_sweeper::audit::audit(&store, &schema, &layout, args.segments, args.sample, now)
            .await?;
    println!("{}", serde_json::to_string(&report)?);
    let too_old = report.oldest_expired_age_seconds > max_age.as_secs() as i64;
    let too_many = report.writer_problems() > args.max_problems;
    if too_old {
        tracing::error!(
            age_s = report.oldest_expired_age_seconds,
            "expired items are present longer than --max-expired-age"
        );
    }
    if too_many {
        tracing::error!(
            problems = report.writer_problems(),
            "items the sweeper cannot see exceed --max-problems"
        );
    }
    Ok(if too_old || too_many {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
