//! The commands `sweep`, `run`, `backfill`, `audit` and `window` (`main.rs` defines their
//! arguments): each checks what clap cannot, hands off to the library, and prints what comes back.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use ttl_sweeper::config::{window_shape, Config};
use ttl_sweeper::daemon;
use ttl_sweeper::engine::tables::sweep_each;
use ttl_sweeper::engine::SweepReport;
use ttl_sweeper::expiry::window::{parse_ttl, window_attribute};
use ttl_sweeper::expiry::{partition_key_bytes, Clock, Held, Timestamp};
use ttl_sweeper::index::follow::{require_index_table, Following, Gathering};
use ttl_sweeper::lambda::event::parse_time;
use ttl_sweeper::store;
use ttl_sweeper::store::keys::partition_key_from_json;
use ttl_sweeper::store::stream::StreamClient;
use ttl_sweeper::telemetry;
use ttl_sweeper::tools::audit::{self, AuditReport};
use ttl_sweeper::tools::backfill::{
    self, default_state_path, BackfillOptions, Finished, ProgressFile,
};
use ttl_sweeper::tools::local;

use crate::aws::Target;
use crate::exit_status;
use crate::{AuditArgs, BackfillArgs, RunArgs};

/// `ttl-sweeper window`: the window attribute for a ttl (and, with shards, a partition key), from
/// raw `WINDOW_SECONDS` and `WINDOW_SHARDS` values checked as every command checks them.
pub(crate) fn window(
    ttl: &str,
    window_seconds: Option<&str>,
    shards: Option<&str>,
    key: Option<&str>,
) -> anyhow::Result<String> {
    let (window_seconds, shards) = window_shape(window_seconds, shards)?;
    let ttl = parse_ttl(ttl)?;
    let key_bytes = match (key, shards) {
        (_, 1) => Vec::new(),
        (None, _) => anyhow::bail!(
            "--shards {shards} needs --key: the shard comes from the item's partition key"
        ),
        (Some(json), _) => {
            let value = partition_key_from_json(json).context("--key")?;
            partition_key_bytes(&value).expect("S, N and B are key types")
        }
    };
    Ok(window_attribute(ttl, window_seconds, shards, &key_bytes)?)
}

/// `ttl-sweeper sweep`: one sweep of every table as of `at` (RFC 3339), or as of the clock; one
/// report per table. The sweep clock is `wall` held to DynamoDB's ([`ttl_sweeper::connect`]), and
/// an `--at` ahead of it is refused. `aws` checks the AWS configuration once the arguments are.
pub(crate) async fn sweep(
    configs: &[Config],
    at: Option<&str>,
    wall: impl Fn() -> Timestamp + Send + Sync + 'static,
    aws: impl Future<Output = anyhow::Result<Target>>,
) -> anyhow::Result<Vec<SweepReport>> {
    let at = at.map(parse_time).transpose().context("--at")?;
    let instant = |held: Held| match at {
        Some(at) if !held.ahead.is_zero() => Err(anyhow::anyhow!(
            "--at {at} is in the future (the clock says {}): sweeping as of it would delete \
             items that have not expired",
            held.clock
        )),
        _ => Ok(held.at),
    };
    // The same rule twice: before any request by the host clock alone (a future --at needs no
    // table to be refused), then by the sweep clock, held to DynamoDB's, which has the last word.
    instant(wall.hold(at))?;
    let target = aws.await?;
    let connected = ttl_sweeper::connect(configs, wall).await;
    let ttl_sweeper::Connected { tables, clock } = connected.map_err(|e| target.explain(e))?;
    let now = instant(clock.hold(at))?;
    Ok(sweep_each(&tables, now, &*clock).await)
}

/// `ttl-sweeper sweep --local`: one [`local::sweep`] of every table as of `at` (RFC 3339; ahead of
/// the clock too) or the clock, each table refused unless its ARN proves a local test server;
/// each table's report printed as soon as it is swept, so that a later table's failure leaves
/// the earlier ones' deletions reported.
pub(crate) async fn sweep_local(
    configs: &[Config],
    at: Option<&str>,
    wall: impl Fn() -> Timestamp,
    aws: impl Future<Output = anyhow::Result<Target>>,
) -> anyhow::Result<()> {
    let at = at.map(parse_time).transpose().context("--at")?;
    let at = at.unwrap_or_else(wall);
    local_only(configs)?;
    let target = aws.await?;
    let store = store::DynamoStore::from_env().await;
    for config in configs {
        let table = &config.target;
        let swept = async {
            let table = local::open(&store, &table.table_name, &table.layout.ttl_attribute).await?;
            local::sweep(&store, &table, at).await
        };
        let report = swept.await.map_err(|e| target.explain(e))?;
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}

/// `ttl-sweeper run --local`: [`local::run`] over every table until `shutdown`; prints each
/// table's totals, also when an error ended the run.
pub(crate) async fn run_local(
    configs: &[Config],
    every: Duration,
    wall: impl Fn() -> Timestamp,
    aws: impl Future<Output = anyhow::Result<Target>>,
    shutdown: impl Future,
) -> anyhow::Result<()> {
    local_only(configs)?;
    let target = aws.await?;
    let store = store::DynamoStore::from_env().await;
    let tables: Vec<(String, String)> = configs
        .iter()
        .map(|c| &c.target)
        .map(|t| (t.table_name.clone(), t.layout.ttl_attribute.clone()))
        .collect();
    let (totals, ended) = local::run(&store, &tables, every, wall, shutdown).await;
    for report in totals {
        println!("{}", serde_json::to_string(&report)?);
    }
    ended.map_err(|e| target.explain(e))
}

/// Refuses what `--local` does not do, rather than leave it undone silently: expiry events.
fn local_only(configs: &[Config]) -> anyhow::Result<()> {
    if configs.iter().any(|c| c.events.is_some()) {
        anyhow::bail!(
            "--local publishes no expiry events: unset EXPIRY_EVENTS (make demo shows a sweeper \
             publishing them against DynamoDB Local)"
        );
    }
    Ok(())
}

/// `ttl-sweeper run`: [`daemon::run`] over every table until `shutdown` (SIGINT or SIGTERM); one
/// report per table. The tables are checked before the metrics endpoint opens.
pub(crate) async fn run(
    configs: &[Config],
    args: &RunArgs,
    wall: impl Fn() -> Timestamp + Send + Sync + 'static,
    aws: impl Future<Output = anyhow::Result<Target>>,
    shutdown: impl Future,
) -> anyhow::Result<Vec<SweepReport>> {
    if args.follow_stream {
        for config in configs {
            require_index_table(&config.target.table_name, &config.target.index)?;
        }
    }
    let target = aws.await?;
    let connected = ttl_sweeper::connect(configs, wall).await;
    let ttl_sweeper::Connected { tables, clock } = connected.map_err(|e| target.explain(e))?;
    let endpoint = match args.metrics_addr {
        Some(addr) => Some(telemetry::endpoint::bind(addr).await?),
        None => None,
    };
    let follow = match args.follow_stream {
        true => Some(Following {
            streams: StreamClient::from_env().await,
            gathering: Gathering {
                hold: args.follow_hold,
                max_entries: args.follow_hold_entries,
            },
        }),
        false => None,
    };
    // The function-wide settings are the same in every table's configuration.
    let options = daemon::Options {
        every: args.every,
        period: configs[0].handler.schedule,
        namespace: configs[0].handler.namespace.clone(),
        endpoint,
        follow,
        emf: std::sync::Mutex::new(Box::new(std::io::stderr())),
    };
    Ok(daemon::run(&tables, &*clock, options, shutdown).await?)
}

/// `ttl-sweeper backfill`: prints the JSON summary; exit 1 unless complete and error-free.
///
/// Without `--resume` a run starts fresh, also over the progress file of a complete run (which it
/// replaces); the file of an interrupted run is refused. `--resume` of a complete run prints that
/// run's saved summary and exits 0. See [`backfill::run_with_file`].
pub(crate) async fn backfill(
    config: &Config,
    args: &BackfillArgs,
    wall: impl Fn() -> Timestamp + Send + Sync + 'static,
    aws: impl Future<Output = anyhow::Result<Target>>,
) -> anyhow::Result<ExitCode> {
    let target = aws.await?;
    let connected = ttl_sweeper::connect_tool(config).await;
    let (store, opened) = connected.map_err(|e| target.explain(e))?;
    // Backfill deletes what has expired by the clock held, like a sweep's, to DynamoDB's.
    let clock = store::GuardedClock::new(wall, store.server_clock().clone());
    let path =
        (args.state.clone()).unwrap_or_else(|| default_state_path(&config.target.table_name));
    let file = ProgressFile {
        path: &path,
        table: &config.target.table_name,
        resume: args.resume,
        segments: args.segments,
    };
    let options = BackfillOptions {
        dry_run: args.dry_run,
        index_only: args.index_only,
        max_wcu: args.max_wcu,
        max_rcu: args.max_rcu,
        page_limit: Some(args.page_size),
    };
    let bar = scan_bar(opened.item_count.max(0) as u64);
    let progress = |n: u64| bar.set_position(n);
    let ran = backfill::run_with_file(&store, &opened, &options, &clock, file, &progress).await;
    bar.finish_and_clear();
    let context = if args.resume { "--resume" } else { "--state" };
    let (report, ok) = match ran.context(context)? {
        Finished::AlreadyComplete(report) => (report, true),
        Finished::Ran(done) => {
            let ok = done.report.errors.is_empty() && done.report.complete;
            (done.report, ok)
        }
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(exit_status(ok))
}

/// A progress bar on stderr (drawn only when it is a terminal) for a scan of about `total` items:
/// `ItemCount`, which DynamoDB updates about every six hours, so an estimate.
fn scan_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let template = "{spinner} {pos}/~{len} items scanned ({per_sec}, eta {eta})";
    let style = indicatif::ProgressStyle::with_template(template);
    bar.set_style(style.unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
    bar
}

/// `ttl-sweeper audit`: prints the JSON report; exit 1 past the thresholds. Items are judged as
/// of the clock once the table is open.
pub(crate) async fn audit(
    config: &Config,
    args: &AuditArgs,
    wall: impl Fn() -> Timestamp,
    aws: impl Future<Output = anyhow::Result<Target>>,
) -> anyhow::Result<ExitCode> {
    let target = aws.await?;
    let connected = ttl_sweeper::connect_tool(config).await;
    let (store, opened) = connected.map_err(|e| target.explain(e))?;
    audit::require_swept(&opened).map_err(anyhow::Error::msg)?;
    let sample = (!args.all).then(|| args.sample.unwrap_or(audit::DEFAULT_SAMPLE));
    let items = opened.item_count.max(0) as u64;
    let bar = scan_bar(sample.map_or(items, |n| n.min(items)));
    let progress = |n: u64| bar.set_position(n);
    let (segments, max_rcu) = (args.segments, args.max_rcu);
    let schema = &opened.schema;
    let audited = audit::audit(&store, schema, segments, sample, max_rcu, wall(), &progress).await;
    bar.finish_and_clear();
    let report: AuditReport = audited?;
    println!("{}", serde_json::to_string(&report)?);
    let verdict = audit::verdict(&report, args.max_expired_age, args.max_problems);
    verdict.log(&report);
    Ok(exit_status(verdict.passed()))
}
