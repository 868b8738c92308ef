//! Configurations, stores and sweepers over the test server's tables, and checks of what a sweep
//! reports.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use ttl_sweeper::config::Config;
use ttl_sweeper::engine::{run_ticks, Stop, SweepOptions, SweepReport, Sweeper, Ticks};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::lambda::HandlerSettings;
use ttl_sweeper::store::{DynamoStore, Store, StoreError, TableSchema};

use super::{client, clock, now, put_items, sessions, simple_table};

/// Configuration for `table` with defaults and `pairs` overriding them.
pub fn config(table: &str, pairs: &[(&str, &str)]) -> Config {
    let mut map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("TABLE_NAME".into(), table.into());
    Config::from_lookup(|k| map.get(k).cloned()).expect("valid test config")
}

/// `DescribeTable` checks for a configuration's table, index and layout.
#[allow(async_fn_in_trait)]
pub trait DescribeConfig {
    async fn describe_config(&self, config: &Config) -> Result<TableSchema, StoreError>;
}

impl DescribeConfig for DynamoStore {
    async fn describe_config(&self, config: &Config) -> Result<TableSchema, StoreError> {
        let target = config.target.clone();
        let opened =
            ttl_sweeper::store::open(self, &target, ttl_sweeper::store::IndexCheck::Required);
        Ok(opened.await?.schema)
    }
}

pub fn store(client: Client) -> DynamoStore {
    DynamoStore::new(client)
}

/// A `DynamoStore` on the test server and the schema of `config`'s table.
pub async fn store_and_schema(config: &Config) -> (DynamoStore, TableSchema) {
    let store = store(client().await);
    let schema = store.describe_config(config).await.expect("describe table");
    (store, schema)
}

/// A sweeper over `config`'s table on the test server (described through a client of its own),
/// with `config`'s sweep options and the store `wrap` makes of a `DynamoStore` on that client:
/// `Instrumented::new` to watch it, `|_| other` to sweep through another store (a proxy's).
pub async fn sweeper_over<S: Store>(
    config: &Config,
    wrap: impl FnOnce(DynamoStore) -> S,
) -> Sweeper<S> {
    let (store, schema) = store_and_schema(config).await;
    Sweeper::new(wrap(store), schema, config.options.clone())
}

/// Ticks every `every`, with a full sweep every `full_every`, for `run_for` from now.
pub fn ticks(every: Duration, full_every: Duration, run_for: Duration) -> Ticks {
    let until = Some(tokio::time::Instant::now() + run_for);
    Ticks {
        every,
        full_every,
        until,
    }
}

/// Ticks every second, with a full sweep every minute, for `run_for` from now.
pub fn ticks_for(run_for: Duration) -> Ticks {
    ticks(Duration::from_secs(1), Duration::from_secs(60), run_for)
}

/// The Lambda handler's settings, namespace `Test`: ticking every `tick` s (none: one sweep an
/// invocation), invoked every `schedule` s, each invocation's overlap with the next `handoff` s.
pub fn handler_settings(tick: Option<u64>, schedule: u64, handoff: u64) -> HandlerSettings {
    HandlerSettings {
        namespace: "Test".into(),
        tick: tick.map(Duration::from_secs),
        schedule: Duration::from_secs(schedule),
        handoff: Duration::from_secs(handoff),
    }
}

/// The default sweep options, with `change` made to them.
pub fn opts(change: impl FnOnce(&mut SweepOptions)) -> SweepOptions {
    let mut options = SweepOptions::default();
    change(&mut options);
    options
}

/// Ticks of `sweeper` ([`ticks_for`]) from now, as of the wall clock, until `end` (epoch
/// seconds; a second from now at the least), never stopped early; `on_tick` sees each tick's
/// report.
pub async fn tick_until<S: Store>(
    sweeper: &Sweeper<S>,
    end: i64,
    on_tick: impl FnMut(&SweepReport),
) -> SweepReport {
    let ticks = ticks_for(Duration::from_secs((end - now()).max(1) as u64));
    let stop = Stop::never();
    run_ticks(
        sweeper,
        Timestamp::from_secs(now()),
        &clock,
        &ticks,
        &stop,
        on_tick,
    )
    .await
}

/// A sweeper over `config`'s table on the test server, with `config`'s sweep options.
pub async fn sweeper_for(config: &Config) -> Sweeper<DynamoStore> {
    sweeper_over(config, |s| s).await
}

/// A sweeper over `table` on the test server, with `pairs` overriding the default settings.
pub async fn sweeper(table: &str, pairs: &[(&str, &str)]) -> Sweeper<DynamoStore> {
    sweeper_for(&config(table, pairs)).await
}

/// A table of 30 sessions expired 2–31 s before `now` and 5 due two minutes after it, and a
/// sweeper for it with the default settings.
pub async fn sessions_and_sweeper(
    prefix: &str,
    now: i64,
) -> (Client, String, Sweeper<DynamoStore>) {
    let (client, table) = simple_table(prefix).await;
    let mut items = sessions("old", 30, |i| now - 2 - i);
    items.extend(sessions("new", 5, |i| now + 120 + i));
    put_items(&client, &table, items).await;
    let sweeper = sweeper(&table, &[]).await;
    (client, table, sweeper)
}

/// A sweep as of an instant in epoch seconds, never stopped early.
#[allow(async_fn_in_trait)]
pub trait SweepAt {
    async fn sweep_at(&self, secs: i64) -> SweepReport;
}

impl<S: Store> SweepAt for Sweeper<S> {
    async fn sweep_at(&self, secs: i64) -> SweepReport {
        self.sweep(Timestamp::from_secs(secs), &Stop::never()).await
    }
}

/// The expired items a sweep report accounts for: deleted by the sweep, or found already gone.
/// In batch mode a key whose `BatchWriteItem` answer was lost after DynamoDB applied it (an
/// attempt that timed out on a loaded machine) is retried, as a conditional delete once its read
/// is older than `BATCH_MAX_READ_AGE`, and then found gone: the split between the two counts
/// depends on the machine's pace, their sum does not.
pub fn removed(report: &ttl_sweeper::engine::SweepReport) -> u64 {
    report.items_deleted + report.items_gone
}

/// Checks of a report's fields by name.
pub trait AssertFields {
    /// Asserts each `field=value` of `fields` (values in JSON), printing the report on failure.
    fn assert_fields(&self, fields: &str);
}

impl<T: serde::Serialize> AssertFields for T {
    #[track_caller]
    fn assert_fields(&self, fields: &str) {
        let report = serde_json::to_value(self).unwrap();
        for pair in fields.split_whitespace() {
            let (field, want) = pair.split_once('=').expect("field=value");
            let want: serde_json::Value = serde_json::from_str(want).expect("a JSON value");
            assert_eq!(report[field], want, "{field}: {report}");
        }
    }
}

/// Asserts that every item a sweep found has one outcome.
#[track_caller]
pub fn assert_accounted(r: &SweepReport) {
    let outcomes = r.items_deleted + r.items_skipped + r.items_gone + r.items_failed + r.items_left;
    assert_eq!(
        r.items_found, outcomes,
        "every item found has one outcome: {r:?}"
    );
}

/// [`removed`] for a report printed as JSON.
pub fn removed_json(report: &serde_json::Value) -> u64 {
    let count = |field: &str| {
        report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("no {field}: {report}"))
    };
    count("items_deleted") + count("items_gone")
}
