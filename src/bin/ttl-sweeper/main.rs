//! The `ttl-sweeper` command line: runs the same engine as the Lambda, and prints window keys.
//! This file defines the arguments, once, each command with the settings it uses; [`commands`]
//! runs them, and [`aws`] loads and checks the AWS configuration and says what went wrong there.
//!
//! Exit status: 0 success; 1 some keys or windows failed, or an audit past its thresholds; 2 bad
//! configuration (arguments, settings, Region, credentials, a missing table or index); 3
//! DynamoDB could not be reached.

mod aws;
mod commands;

use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use ttl_sweeper::config::{parse_duration, CliCommand, Settings, Threads};
use ttl_sweeper::engine::SweepReport;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::index::follow::{HOLD_ENTRIES, MAX_HOLD};
use ttl_sweeper::telemetry::{self, LogFormat};
use ttl_sweeper::tools::backfill::{parse_max_rcu, parse_max_wcu, parse_page_size};
use ttl_sweeper::tools::scan::parse_segments;

/// mimalloc: less CPU per delete than the system allocator (docs/BENCHMARKS.md). Built without
/// transparent huge pages (feature `no_thp`), with which peak memory was about 1.6 times as high.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

/// Precise item expiry for Amazon DynamoDB.
#[derive(Debug, Parser)]
#[command(name = "ttl-sweeper", version, about)]
struct Cli {
    /// More logging on stderr: -v our debug lines, -vv also the AWS SDK's and the HTTP client's.
    /// RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = GLOBAL)]
    verbose: u8,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, help_heading = GLOBAL)]
    log_format: LogFormat,
    /// AWS Region, e.g. `eu-west-1` [default: AWS_REGION, else the profile's].
    #[arg(long, global = true, value_name = "REGION", help_heading = GLOBAL)]
    region: Option<String>,
    /// Profile of the AWS config and credentials files to take credentials and Region from
    /// [default: AWS_PROFILE, else `default`].
    #[arg(long, global = true, value_name = "PROFILE", help_heading = GLOBAL)]
    profile: Option<String>,
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
    /// Give every item with a numeric ttl its window attribute and DELETE those already expired
    /// (--index-only: delete nothing; with EXPIRY_INDEX_TABLE: write their entries into it, and
    /// nothing else); parallel Scan, resumable; prints a JSON summary.
    Backfill(Box<BackfillArgs>),
    /// Report expired-but-present items by age, and items the sweeper cannot see (missing or
    /// wrong window, or no entry in EXPIRY_INDEX_TABLE; millisecond or non-numeric ttl); exits 1
    /// past the thresholds.
    Audit(Box<AuditArgs>),
    /// Ask a running `run --metrics-addr` for /healthz: prints its answer; exits 0 if healthy
    /// (200), 1 if not, 3 if it cannot be reached. A container's health check (the image holds
    /// no HTTP client).
    Health {
        /// The address `run --metrics-addr` serves.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
        addr: std::net::SocketAddr,
        /// Give up after this long: 100ms to 60s.
        #[arg(long, default_value = "5s", value_parser = parse_probe_timeout)]
        timeout: Duration,
    },
    /// Print every setting (variable, flag, default, what it accepts as a rule and in words) as
    /// JSON: the file infra/settings.json, which the CDK construct reads and the SAM template,
    /// the Terraform module and docs/configuration.md are checked against.
    Settings,
    /// Print the window key for a ttl (epoch seconds), to check a writer's implementation.
    Window {
        /// The ttl, in epoch seconds.
        ttl: String,
        /// Window width in seconds [default: 60].
        #[arg(long, env = "WINDOW_SECONDS")]
        window_seconds: Option<String>,
        /// Shards per window; with more than 1, --key is required [default: 1].
        #[arg(long, visible_alias = "window-shards", env = "WINDOW_SHARDS")]
        shards: Option<String>,
        /// The item's partition key value, as DynamoDB JSON: {"S":"user#42"}, {"N":"42"},
        /// {"B":"<base64>"}, or a one-attribute key {"id":{"S":"user#42"}}.
        #[arg(long)]
        key: Option<String>,
    },
}

/// `--sample`: a whole number of items, at least 1.
fn parse_sample(text: &str) -> Result<u64, String> {
    let n = text.trim().parse().ok().filter(|&n| n >= 1);
    n.ok_or_else(|| format!("{text:?} items: expected a whole number of items, at least 1"))
}

/// `--every`: from 100 ms (ticks faster than that only add requests) to one day (the longest
/// window; a longer interval is a typo, and one in years overflows the tick schedule).
fn parse_every(text: &str) -> Result<Duration, String> {
    let range = Duration::from_millis(100)..=Duration::from_secs(86_400);
    duration_in(text, range, "from 100ms to 1d (24h), e.g. `1s`")
}

/// `--follow-hold` (`FOLLOW_HOLD`): a duration from 0 (nothing held) to [`MAX_HOLD`].
fn parse_hold(text: &str) -> Result<Duration, String> {
    let range = Duration::ZERO..=MAX_HOLD;
    duration_in(text, range, "from 0 (nothing held) to 6h, e.g. `30m`")
}

/// A duration within `range`; else an error saying the value and `expected` (`from … to …`).
fn duration_in(
    text: &str,
    range: std::ops::RangeInclusive<Duration>,
    expected: &str,
) -> Result<Duration, String> {
    parse_duration(text)
        .filter(|d| range.contains(d))
        .ok_or_else(|| format!("{text:?}: expected a duration {expected}"))
}

/// `--follow-hold-entries` (`FOLLOW_HOLD_ENTRIES`): a whole number in [`HOLD_ENTRIES`].
fn parse_hold_entries(text: &str) -> Result<usize, String> {
    let n = text.trim().parse().ok();
    let n = n.filter(|n| HOLD_ENTRIES.contains(n));
    n.ok_or_else(|| format!("{text:?}: expected a whole number of entries from 1000 to 10000000"))
}

/// `health --timeout`: from 100 ms to a minute (a health check's own timeout is seconds).
fn parse_probe_timeout(text: &str) -> Result<Duration, String> {
    let range = Duration::from_millis(100)..=Duration::from_secs(60);
    duration_in(text, range, "from 100ms to 60s, e.g. `5s`")
}

/// `--max-expired-age`: a duration such as `5m`, or seconds.
fn parse_age(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("{text:?}: expected a duration such as 5m"))
}

// The numeric flags allow negative numbers, so that `--max-wcu -5` reaches the value check and
// its message naming the flag, instead of `-5` being taken for an unknown short flag.
#[derive(Debug, Args)]
struct BackfillArgs {
    /// Parallel Scan segments, 1 to 1000 [default: one per 256 MiB of table, 4 to 256].
    #[arg(long, value_parser = parse_segments, allow_negative_numbers = true)]
    segments: Option<u32>,
    /// Write capacity units per second at most, for writes and deletes: 0.01 to 1000000.
    #[arg(long, value_parser = parse_max_wcu, allow_negative_numbers = true)]
    max_wcu: Option<f64>,
    /// Read capacity units per second at most, for the scan: 0.01 to 1000000.
    #[arg(long, value_parser = parse_max_rcu, allow_negative_numbers = true)]
    max_rcu: Option<f64>,
    /// Count what would be written and deleted; write and delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write windows only and delete nothing: items already expired are counted
    /// (`expired_not_deleted`) and left to native TTL. With EXPIRY_INDEX_TABLE nothing is ever
    /// deleted: the entries are all it writes.
    #[arg(long)]
    index_only: bool,
    /// Progress file [default: ttl-sweeper-backfill-<table>.json]; a complete run's file is
    /// replaced by the next run.
    #[arg(long)]
    state: Option<std::path::PathBuf>,
    /// Continue from the progress file of an earlier, interrupted run.
    #[arg(long)]
    resume: bool,
    /// Items per Scan page, 1 to 1000; progress is saved after every page.
    #[arg(
        long,
        default_value = "500",
        value_parser = parse_page_size,
        allow_negative_numbers = true
    )]
    page_size: i32,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Args)]
struct AuditArgs {
    /// Parallel Scan segments, 1 to 1000.
    #[arg(long, default_value = "4", value_parser = parse_segments, allow_negative_numbers = true)]
    segments: u32,
    /// Read about this many items (at least 1), then stop [default: 100000].
    #[arg(long, value_parser = parse_sample, allow_negative_numbers = true, conflicts_with = "all")]
    sample: Option<u64>,
    /// Read the whole table instead of a sample (its read units: about the table's size in 8 KB
    /// units; --max-rcu paces it).
    #[arg(long)]
    all: bool,
    /// Read capacity units per second at most, for the scan: 0.01 to 1000000.
    #[arg(long, value_parser = parse_max_rcu, allow_negative_numbers = true)]
    max_rcu: Option<f64>,
    /// Fail when an expired item is still present this long after its ttl, e.g. `5m`.
    #[arg(long, default_value = "5m", value_parser = parse_age)]
    max_expired_age: Duration,
    /// Fail when more items than this have writer problems (missing/wrong window, bad ttl).
    #[arg(long, default_value = "0")]
    max_problems: u64,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Interval between sweeps, from 100ms to 1d, e.g. `1s`, `500ms`, `1m`.
    #[arg(long, default_value = "1s", value_parser = parse_every)]
    every: Duration,
    /// TTL for a local test server (docs/local-testing.md): every interval, scan the whole table
    /// and delete each item expired; no GSI, window or index table needed; waits for a table not
    /// created yet. Refused unless the table's ARN proves DynamoDB Local (Region `ddblocal`) or
    /// LocalStack (account 000000000000).
    #[arg(long, conflicts_with_all = ["follow_stream", "metrics_addr"])]
    local: bool,
    /// Serve Prometheus `/metrics` and `/healthz` on this address, e.g. `127.0.0.1:9464`
    /// (off unless given).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Also follow the table's DynamoDB stream and write an entry for every item written with a
    /// ttl into the expiry index table (EXPIRY_INDEX_TABLE, required), so writers need set only
    /// the ttl (the stream's view must include the new image). The position is saved beside the
    /// checkpoint (CHECKPOINT_TABLE).
    #[arg(
        long,
        env = "FOLLOW_STREAM",
        value_name = "BOOL",
        num_args = 0..=1,
        default_value = "false",
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    follow_stream: bool,
    /// With --follow-stream: how long an entry due more than 2 minutes ahead may be held, to be
    /// packed with other batches' entries due at the same instant (fewer, fuller packs); the
    /// saved stream position stays before its record meanwhile. From 0 (each entry written with
    /// its batch) to 6h.
    #[arg(long, env = "FOLLOW_HOLD", value_name = "DURATION", default_value = "30m", value_parser = parse_hold, allow_hyphen_values = true)]
    follow_hold: Duration,
    /// With --follow-stream: entries held at most, 1000 to 10000000 (their memory:
    /// docs/BENCHMARKS.md section 4); past it the soonest due are written.
    #[arg(long, env = "FOLLOW_HOLD_ENTRIES", value_name = "N", default_value = "1000000", value_parser = parse_hold_entries, allow_negative_numbers = true)]
    follow_hold_entries: usize,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Args)]
struct SweepArgs {
    /// Sweep as of this RFC 3339 instant instead of now; never one ahead of the clock, but with
    /// --local.
    #[arg(long)]
    at: Option<String>,
    /// TTL for a local test server (docs/local-testing.md): scan the whole table and delete each
    /// item expired as of --at (which may be ahead of the clock) or now; no GSI, window or index
    /// table needed. Refused unless the table's ARN proves DynamoDB Local (Region `ddblocal`) or
    /// LocalStack (account 000000000000).
    #[arg(long)]
    local: bool,
    #[command(flatten)]
    settings: Settings,
}

fn main() -> ExitCode {
    let cli = parse();
    // Before any other thread starts (it sets environment variables).
    aws::select(cli.region.as_deref(), cli.profile.as_deref());
    telemetry::init(cli.log_format, telemetry::cli_filter(cli.verbose), false);
    // One thread unless TOKIO_WORKER_THREADS asks for more (config::Threads says why).
    let runtime = Threads::runtime_from_env();
    let Ok(runtime) = runtime.inspect_err(|e| eprintln!("error: {e}")) else {
        return ExitCode::from(aws::CONFIGURATION);
    };
    runtime
        .block_on(dispatch(cli.command, cli.profile.as_deref()))
        .unwrap_or_else(|e| {
            let (message, code) = match e.downcast_ref::<aws::Failure>() {
                Some(failure) => (failure.message.clone(), failure.code),
                None => (said_once(e.as_ref()), aws::CONFIGURATION),
            };
            eprintln!("error: {message}");
            ExitCode::from(code)
        })
}

/// The command line, each command fitted to the settings it uses ([`Settings::fit`]), a setting
/// it does not use refused as an unknown argument ([`Settings::unused_flag`]). Exits on a usage
/// error.
fn parse() -> Cli {
    let mut command = command();
    let matches = command.get_matches_mut();
    if let Some((name, given)) = matches.subcommand() {
        let which = CliCommand::ALL.into_iter().find(|c| c.name() == name);
        if let Some(refusal) = which.and_then(|which| Settings::unused_flag(which, given)) {
            let sub = command
                .find_subcommand_mut(name)
                .expect("the command parsed");
            sub.error(ErrorKind::UnknownArgument, refusal).exit();
        }
    }
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The command line's definition, each command fitted to its settings.
fn command() -> clap::Command {
    CliCommand::ALL
        .into_iter()
        .fold(Cli::command(), |cmd, which| {
            cmd.mut_subcommand(which.name(), |sub| Settings::fit(sub, which))
        })
}

/// The error and its causes, `: `-separated, each said once (a store error's message already
/// carries the SDK error it has as its source).
pub(crate) fn said_once(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    for cause in std::iter::successors(Some(error), |e| e.source()) {
        let message = cause.to_string();
        if text.contains(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}

/// Logs each table's summary, prints its report as one JSON line, and exits 0 if all succeeded.
fn finish_all(reports: &[SweepReport]) -> anyhow::Result<ExitCode> {
    for report in reports {
        telemetry::log_summary(report);
        println!("{}", serde_json::to_string(report)?);
    }
    Ok(exit_status(reports.iter().all(SweepReport::is_success)))
}

/// Exit status 0 when `ok`, else 1.
pub(crate) fn exit_status(ok: bool) -> ExitCode {
    ExitCode::from(u8::from(!ok))
}

fn wall_clock() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now())
}

async fn dispatch(command: Command, profile: Option<&str>) -> anyhow::Result<ExitCode> {
    // Where a command's requests go, checked (Region, credentials) when it first needs AWS,
    // after its own checks.
    let aws = aws::check(profile);
    match command {
        Command::Window {
            ttl,
            window_seconds,
            shards,
            key,
        } => {
            let (seconds, shards) = (window_seconds.as_deref(), shards.as_deref());
            let window = commands::window(&ttl, seconds, shards, key.as_deref())?;
            println!("{window}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Settings => {
            print!("{}", ttl_sweeper::config::spec_text());
            Ok(ExitCode::SUCCESS)
        }
        Command::Health { addr, timeout } => {
            match telemetry::endpoint::probe(addr, timeout).await {
                Ok((status, body)) => {
                    println!("{}", body.trim_end());
                    Ok(exit_status(status == hyper::StatusCode::OK))
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::from(aws::UNREACHABLE))
                }
            }
        }
        Command::Sweep(args) if args.local => {
            let configs = args.settings.validate_tables()?;
            commands::sweep_local(&configs, args.at.as_deref(), wall_clock, aws).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) if args.local => {
            let configs = args.settings.validate_tables()?;
            commands::run_local(&configs, args.every, wall_clock, aws, signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep(args) => {
            let configs = args.settings.validate_tables()?;
            let reports = commands::sweep(&configs, args.at.as_deref(), wall_clock, aws).await?;
            finish_all(&reports)
        }
        Command::Run(args) => {
            let configs = args.settings.validate_run(args.every)?;
            let reports = commands::run(&configs, &args, wall_clock, aws, signal()).await?;
            finish_all(&reports)
        }
        Command::Backfill(args) => {
            let config = args.settings.validate_backfill(args.dry_run)?;
            commands::backfill(&config, &args, wall_clock, aws).await
        }
        Command::Audit(args) => {
            let config = args.settings.validate_one("audit")?;
            commands::audit(&config, &args, wall_clock, aws).await
        }
    }
}

/// SIGINT or SIGTERM, listened for from this call on: `run`'s shutdown, which lets the requests
/// in flight finish.
fn signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = signals else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tracing::info!("signal received: finishing the requests in flight");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
        super::command().debug_assert();
    }
}
