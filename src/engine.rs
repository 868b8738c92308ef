//! The engine: one sweep over the windows that can hold expired items, and repeated sweeps.
//!
//! For each window (and shard) a sweep pages through the GSI or the sweeper's own expiry index
//! table for `ttl < now`, checks every item it reads, and deletes the expired ones
//! ([`DeleteMode`]). It takes `now` and its stop condition as inputs and talks to DynamoDB only
//! through [`crate::store::Store`].
//!
//! - [`sweep`]: [`Sweeper`], the pass; `partition` (private): one partition's pages and chunks;
//!   `delete` (private): batched and conditional deletes; `pace` (private): the read-ahead budget
//!   and batch mode's page pace; `entries` (private): expiry index entries removed once judged;
//!   `ahead` (private): a tick's keys confirmed by the table before the tick.
//! - [`report`], [`hook`] (expiry events around deletes), [`retry`] ([`Stop`]), [`lease`] (the
//!   leader lease), [`checkpoint`], [`ticks`] (repeated sweeps), [`tables`] (several tables).

use std::fmt;
use std::time::Duration;

use crate::expiry::window::ShardRange;
use crate::store::Retry;

mod ahead;
pub mod checkpoint;
mod cursor;
mod delete;
mod entries;
pub mod hook;
pub mod journal;
pub mod lease;
mod pace;
mod packs;
mod partition;
pub mod report;
pub mod retry;
pub mod sweep;
pub mod tables;
pub mod ticks;

pub use ahead::CONFIRM_AHEAD;
pub use checkpoint::Checkpoint;
pub use lease::{Lease, LeaseConfig};
pub use report::{FailedKey, LagHistogram, LagStats, SweepErrorEntry, SweepReport};
pub use retry::Stop;
pub use sweep::Sweeper;
pub use ticks::{run_ticks, Ticks};

/// `BatchWriteItem` accepts at most 25 requests.
pub const BATCH_SIZE: usize = 25;

/// How long after the table's read of it (a strongly consistent `BatchGetItem`, dated at its
/// request; the index's listing never counts) a key may still be sent unconditionally in batch
/// mode (`BatchWriteItem` cannot check the ttl): right before every send a key read longer ago
/// is read again, and sent only if its ttl is unchanged; one that ages past this a second time
/// goes out as the conditional `DeleteItem`. With [`crate::store::BATCH_ATTEMPT_TIMEOUT`] this
/// bounds the window in which batch mode can delete a rewritten key: `docs/configuration.md`,
/// "Choosing a delete mode".
pub const BATCH_MAX_READ_AGE: Duration = Duration::from_secs(2);

/// A sweep holds at most this many rounds of `MAX_CONCURRENCY + 1` chunks of keys read but not yet
/// deleted, across its partitions: memory stays bounded whatever the pages or the partitions.
pub const READ_AHEAD_ROUNDS: usize = 4;

/// Catch-up reads at most this many partitions (windows × shards in range) between two moves of the
/// checkpoint: a long backlog is worked off oldest first, a slice of this size at a time.
pub const CATCHUP_SLICE_PARTITIONS: usize = 256;

/// How expired items are deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteMode {
    /// `BatchWriteItem`, 25 keys a request: cheapest and fastest. Every key is confirmed by a
    /// strongly consistent read of the table before it is sent, never by the index alone; a ttl
    /// changed within [`BATCH_MAX_READ_AGE`] of that read (plus the attempt) can still be lost.
    Batch,
    /// `DeleteItem` on condition that the ttl is the one read and expired: the table, not the
    /// index, has the last word, so an item whose ttl was extended or removed survives.
    Conditional,
}

impl fmt::Display for DeleteMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeleteMode::Batch => "batch",
            DeleteMode::Conditional => "conditional",
        })
    }
}

/// How the engine sweeps (the layout comes with the table's schema).
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Past windows read besides the current one.
    pub lookback_windows: u32,
    /// Batch or conditional deletes.
    pub delete_mode: DeleteMode,
    /// Partitions read, and delete requests sent, at once.
    pub max_concurrency: usize,
    /// How each chunk is tried (unprocessed keys, throttling, 5xx): `MAX_RETRIES` after the first
    /// attempt, waits from 50 ms doubling to 5 s.
    pub retry: Retry,
    /// Query page size (`Limit`); `None` lets DynamoDB fill 1 MB pages.
    pub page_limit: Option<i32>,
    /// Batch mode: [`BATCH_MAX_READ_AGE`], or less.
    pub batch_max_read_age: Duration,
    /// The catch-up checkpoint, if any.
    pub checkpoint: Option<Checkpoint>,
    /// The shards of each window this sweeper reads (`SHARD_RANGE`); `None` reads them all.
    pub shard_range: Option<ShardRange>,
    /// How far back a checkpoint may take a sweep, seconds.
    pub max_catchup_seconds: u64,
    /// Items the stream indexer found written already expired are deleted as they are indexed
    /// ([`Sweeper::delete_indexed`]); `false` leaves them to the next sweep.
    pub delete_when_indexed: bool,
}

impl Default for SweepOptions {
    /// The defaults of the settings, with backoff from 50 ms doubling to 5 s.
    fn default() -> Self {
        SweepOptions {
            lookback_windows: 15,
            delete_mode: DeleteMode::Batch,
            max_concurrency: 8,
            retry: Retry::default(),
            page_limit: None,
            batch_max_read_age: BATCH_MAX_READ_AGE,
            checkpoint: None,
            shard_range: None,
            max_catchup_seconds: 86_400,
            delete_when_indexed: true,
        }
    }
}
