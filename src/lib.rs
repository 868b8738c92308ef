//! ttl-sweeper: precise item expiry for Amazon DynamoDB.
//!
//! DynamoDB's native Time to Live deletes expired items "within a few days of their expiration
//! time"; this crate deletes them within seconds: a scheduled sweep queries an index keyed on
//! (window, ttl) for the recent windows' `ttl < now` and deletes what it finds. The index is the
//! sweeper's own expiry index table, fed by the table's stream, or a GSI on the table with an
//! *expiration window* attribute the writers set.
//!
//! # Layout
//! The rooms, each importing only from the rooms listed after it:
//!
//! - Entry points, `src/bin/`: `ttl-sweeper-lambda` (the Lambda) and `ttl-sweeper` (the CLI:
//!   arguments in `main.rs`, the commands in `commands.rs`) parse their input, read the clock
//!   and hand off; [`connect`] builds one sweeper per table and the one sweep clock (the host
//!   clock held to DynamoDB's), and [`connect_tool`] the table of a tool.
//! - [`config`]: every setting ([`config::Settings`], read from flags or environment variables
//!   of the same names; what each accepts is a [`config::Rule`], which `ttl-sweeper settings`
//!   prints as JSON for the infrastructure code), validated once, per table, straight into the
//!   narrow structs of the rooms below ([`config::Config`]: a [`store::TableTarget`] with its
//!   [`expiry::Layout`], [`engine::SweepOptions`], [`lambda::HandlerSettings`],
//!   [`events::EventsConfig`]), and the binaries' async runtime ([`config::Threads`]). Nothing
//!   below imports it.
//! - [`daemon`]: `run`'s loop: every table swept by ticks and full sweeps until shutdown, a table
//!   that cannot be opened reported and opened again, each period's summary and EMF record, the
//!   endpoint's counters, each table's stream followed beside its ticks ([`daemon::Follow`]).
//! - [`lambda`]: one invocation, from event to report for every table; a batch of a table's
//!   DynamoDB Streams records goes to the stream indexer instead.
//! - [`telemetry`]: tracing subscribers (JSON lines with the Powertools keys), the summary log
//!   line, the one table of a report's metrics ([`telemetry::counters`]) that CloudWatch EMF
//!   records, the daemon's `/metrics` and docs/operations.md are made from, `/healthz`, and the
//!   probe of `ttl-sweeper health` ([`telemetry::endpoint`]).
//! - [`tools`]: adopting the sweeper on an existing table (parallel scan, backfill, audit), and
//!   TTL for a local test server (`--local`: a Scan and a conditional delete per expired item,
//!   on a server its table ARNs prove local).
//! - [`index`]: the expiry index table's stream side, in one home: from stream records to packs
//!   of entries, each due after it is written, never the application's table; the daemon's
//!   follower of the table's stream ([`index::follow`]), which holds the entries due later
//!   across batches to pack each due second's together. Both reach a table through
//!   [`index::IndexTarget`] (its store, its schema, and the delete path where items written
//!   already expired go), not a whole sweeper.
//! - [`events`]: expiry events: the event model and stable id, the sinks (EventBridge, SQS,
//!   Firehose) behind [`events::Sink`], batched publishing with retries; it is the engine's
//!   [`engine::hook::ExpiryHook`].
//! - [`engine`]: the sweep: paginated queries within one read-ahead budget, batched (each key
//!   confirmed by a read of the table) or conditional deletes with backoff, the report,
//!   checkpoint planning, ticks, several tables side by side, the leader lease
//!   ([`engine::lease`]), archive mode's journal of expiries not yet settled in the expiry index
//!   table ([`engine::journal`]), and which packs of that table a sweep reads from its cursor
//!   (`engine::packs`).
//! - [`store`]: the only code that talks to DynamoDB, behind the typed [`store::Store`] seam and,
//!   beside it, [`store::Scan`] (the adoption tools' requests); which index a table is swept
//!   through ([`store::Index`]: a GSI or the expiry index table); errors, start-up checks, the
//!   key dialect of reports and events (DynamoDB JSON), the table's stream ([`store::stream`]:
//!   what the follower reads, `StreamRead`, and keeps, `StreamPositions`), the expiry index
//!   table's entries ([`store::entries`]) and packs of entries with the one way they are written,
//!   by the indexer and by sweeps carrying keys ([`store::packs`]), and the one backoff every
//!   retry loop counts its attempts and waits through ([`store::Backoff`]).
//! - [`streams`]: for consumers of the table's DynamoDB Stream: [`streams::is_expiry_removal`]
//!   tells a `REMOVE` of an expired item from an application's delete.
//! - [`expiry`]: the expiry model: [`expiry::Timestamp`], window math, the layout, the writer and
//!   reader helpers for application code, and the [`expiry::Clock`] trait. Pure: no I/O, and it
//!   never reads a clock itself.
//!
//! # Features
//! - `sweeper` (default): the Lambda, the CLI and every module above but [`streams`] and
//!   [`expiry`], with the AWS SDKs, tokio, lambda_runtime and hyper.
//! - `aws-sdk-dynamodb` (part of `sweeper`): the [`expiry`] helpers also take the SDK's
//!   `AttributeValue`.
//!
//! With `default-features = false` the crate is [`expiry`] and [`streams`] alone, for application
//! code that writes or reads swept tables.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

/// Adds each named counter of `$from` to `$to`'s (`to = from` where the names differ).
macro_rules! add_counts {
    ($to:expr, $from:expr; $($field:ident $(= $source:ident)?),* $(,)?) => {
        $($to.$field += add_counts!(@ $from, $field $(, $source)?);)*
    };
    (@ $from:expr, $field:ident) => { $from.$field };
    (@ $from:expr, $field:ident, $source:ident) => { $from.$source };
}

#[cfg(feature = "sweeper")]
pub mod config;
#[cfg(feature = "sweeper")]
pub mod daemon;
#[cfg(feature = "sweeper")]
pub mod engine;
#[cfg(feature = "sweeper")]
pub mod events;
pub mod expiry;
#[cfg(feature = "sweeper")]
pub mod index;
#[cfg(feature = "sweeper")]
pub mod lambda;
#[cfg(feature = "sweeper")]
pub mod store;
pub mod streams;
#[cfg(feature = "sweeper")]
pub mod telemetry;
#[cfg(feature = "sweeper")]
pub mod tools;

/// The production sweepers, one per table, and the clock they sweep by, from [`connect`].
#[cfg(feature = "sweeper")]
#[derive(Debug)]
pub struct Connected {
    /// The tables, in the order configured, each with its sweeper once opened.
    pub tables: Vec<engine::tables::Table<store::DynamoStore>>,
    /// The one sweep clock: the host clock held to DynamoDB's (see [`store::clock`]). Every sweep
    /// instant comes from it, through [`expiry::Clock::hold`].
    pub clock: std::sync::Arc<store::GuardedClock>,
}

/// Builds the production sweepers for `configs`: one SDK client from the standard AWS
/// configuration chain, each table opened and checked ([`store::open`]), with its expiry-event
/// sink if any. The one place the sweep clock is built: `wall`, the host clock, held to
/// DynamoDB's as the store learns it.
///
/// One table that fails its start-up checks fails the start-up. Of several, such a table is
/// reported and opened again every `SCHEDULE_SECONDS` ([`engine::tables::Table`]).
#[cfg(feature = "sweeper")]
pub async fn connect(
    configs: &[config::Config],
    wall: impl Fn() -> expiry::Timestamp + Send + Sync + 'static,
) -> Result<Connected, store::StoreError> {
    use engine::tables::{Open, Table};
    use std::sync::Arc;
    use store::{DynamoStore, GuardedClock};
    let store = DynamoStore::from_env().await;
    // The host clock as it reads, for the leases; held to DynamoDB's, for the sweeps.
    let wall: Arc<dyn expiry::Clock> = Arc::new(wall);
    let host = wall.clone();
    let clock = Arc::new(GuardedClock::new(
        move || host.now(),
        store.server_clock().clone(),
    ));
    if let [config] = configs {
        let (config, clocks) = (Arc::new(config.clone()), (clock.clone(), wall));
        let sweeper = open_table(store, config, clocks).await?;
        let tables = vec![Table::ready(sweeper)];
        return Ok(Connected { tables, clock });
    }
    let mut tables = Vec::with_capacity(configs.len());
    for config in configs {
        let (store, config) = (store.clone(), Arc::new(config.clone()));
        let clocks = (clock.clone(), wall.clone());
        let (retry_every, name) = (config.handler.schedule, config.target.table_name.clone());
        let open: Open<DynamoStore> =
            Box::new(move || Box::pin(open_table(store.clone(), config.clone(), clocks.clone())));
        tables.push(Table::lazy(&name, open, retry_every));
    }
    // Opened now, so that the start-up logs say which tables cannot be swept.
    futures::future::join_all(tables.iter().map(Table::sweeper)).await;
    Ok(Connected { tables, clock })
}

/// The table of a tool (`backfill`, `audit`), opened with the checks of [`connect`] but for a
/// missing index, only a warning: the tools may run before it is created.
#[cfg(feature = "sweeper")]
pub async fn connect_tool(
    config: &config::Config,
) -> Result<(store::DynamoStore, store::OpenedTable), store::StoreError> {
    let store = store::DynamoStore::from_env().await;
    let opened = store::open(&store, &config.target, store::IndexCheck::IfPresent).await?;
    Ok((store, opened))
}

/// One table's sweeper: the table opened and checked, the sweep clock and the host's wall clock
/// (for its lease, if any), its expiry-event sink.
#[cfg(feature = "sweeper")]
async fn open_table(
    store: store::DynamoStore,
    config: std::sync::Arc<config::Config>,
    (clock, wall): (
        std::sync::Arc<store::GuardedClock>,
        std::sync::Arc<dyn expiry::Clock>,
    ),
) -> Result<engine::Sweeper<store::DynamoStore>, store::StoreError> {
    use std::sync::Arc;
    let opened = store::open(&store, &config.target, store::IndexCheck::Required).await?;
    let server_time = store.server_clock().clone();
    let sweeper =
        engine::Sweeper::new(store, opened.schema, config.options.clone()).with_wall_clock(clock);
    let sweeper = match config.lease(lease_holder()) {
        None => sweeper,
        Some(lease) => {
            tracing::info!(table = %config.target.table_name, holder = %lease.holder, lease = ?lease.duration, item = %lease.id, layout = %lease.layout, "sweeping only while holding the leader lease");
            // The stream indexer's reports, in the expiry index table, count in the lease.
            let reports = sweeper.schema().index.table().map(str::to_owned);
            let lease = engine::Lease::new(lease, server_time, wall).with_reports_in(reports);
            sweeper.with_lease(lease)
        }
    };
    Ok(match &config.events {
        None => sweeper,
        Some(events) => {
            tracing::info!(table = %config.target.table_name, sink = %events.target, mode = %events.mode, "publishing expiry events");
            sweeper.with_events(Arc::new(events::connect(events).await))
        }
    })
}

/// This process's name in the leader lease ([`engine::lease::holder_id`]): `AWS_REGION` and the
/// Lambda function's name, or the host name and the process id.
#[cfg(feature = "sweeper")]
fn lease_holder() -> String {
    let var = |name| std::env::var(name).ok();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| var("HOSTNAME"))
        .unwrap_or_else(|| "localhost".to_owned());
    engine::lease::holder_id(
        var("AWS_REGION").as_deref(),
        var("AWS_LAMBDA_FUNCTION_NAME").as_deref(),
        &host,
        std::process::id(),
    )
}
