//! ttl-sweeper: precise item expiry for Amazon DynamoDB.
//!
//! DynamoDB's native Time to Live deletes expired items "typically within 48 hours". This crate
//! deletes them within seconds: every item also carries an *expiration window* attribute, a GSI
//! is keyed on (window, ttl), and a scheduled sweep queries the recent windows for `ttl < now` and
//! deletes what it finds.
//!
//! # Layout
//! - [`window`]: pure time math — ttl to window key, and the windows a sweep reads.
//! - [`config`]: every setting, from environment variables or flags, validated once.
//! - [`store`]: the only code that talks to DynamoDB, behind the [`store::Store`] seam.
//! - [`sweep`]: the engine — paginated queries, batched deletes with backoff, the report.
//! - [`event`]: the Lambda input (EventBridge scheduled events, `{"time": ...}`, `{}`).
//! - [`runner`]: repeated sweeps — tick mode in Lambda, the long-running `run` command.
//! - [`handler`]: one Lambda invocation, from event to report, metrics and result.
//! - [`telemetry`]: tracing subscribers, the summary log line, CloudWatch EMF metrics.
//! - [`item`]: helpers for application code — the attributes writers store, the expiry check and
//!   filter readers use.
//! - [`scan`], [`backfill`], [`audit`]: adopting the sweeper on an existing table.
//!
//! The binaries in `src/bin/` only parse their input and call into these modules.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod audit;
pub mod backfill;
pub mod config;
pub mod event;
pub mod handler;
pub mod item;
pub mod runner;
pub mod scan;
pub mod store;
pub mod sweep;
pub mod telemetry;
pub mod window;

use config::Config;
use store::{DynamoStore, StoreError};
use sweep::{SweepOptions, Sweeper};

/// Builds the production sweeper: an SDK client from the standard AWS configuration chain, and
/// the table schema read (and checked) with `DescribeTable`.
pub async fn connect(config: &Config) -> Result<Sweeper<DynamoStore>, StoreError> {
    let store = DynamoStore::from_env().await;
    let schema = store.describe(config).await?;
    if let Some(table) = &config.checkpoint_table {
        store.check_checkpoint_table(table).await?;
    }
    Ok(Sweeper::new(
        store,
        schema,
        SweepOptions::from_config(config),
    ))
}
