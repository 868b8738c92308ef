//! What the follower reports: why it cannot start ([`FollowError`]) and what following the
//! stream came to ([`FollowReport`]).

use serde::Serialize;

use crate::indexer::IndexReport;
use crate::store::StoreError;

/// Why the follower cannot start.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The table has no stream.
    #[error(
        "table {table:?} has no stream enabled; enable one with: aws dynamodb update-table \
         --table-name {table} --stream-specification \
         StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES"
    )]
    NoStream {
        /// The table.
        table: String,
    },
    /// The stream's records do not carry the item.
    #[error(
        "the stream of table {table:?} has view type {view}, whose records lack the new image; a \
         stream's view cannot be changed: disable it with `aws dynamodb update-table --table-name \
         {table} --stream-specification StreamEnabled=false`, then enable it with \
         `--stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES` (other \
         readers of the stream start over on the new one)"
    )]
    NoNewImage {
        /// The table.
        table: String,
        /// Its stream's view type.
        view: String,
    },
    /// The table has no expiry index table for the stream's records to go to.
    #[error(
        "table {table:?} has no expiry index table: following its stream writes an entry per \
         item into one; create a table with partition key `window` (String) and sort key \
         `entry` (String), with native TTL on `expires`, and name it in EXPIRY_INDEX_TABLE"
    )]
    NoIndexTable {
        /// The table.
        table: String,
    },
    /// Reading the table, its stream or the saved position failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What following the stream came to.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FollowReport {
    /// `GetRecords` answers that held records.
    pub batches: u64,
    /// What the stream indexer did with them (`records`: each record once, however often tried).
    pub index: IndexReport,
    /// Records tried again after a failure.
    pub retried_records: u64,
    /// Records that failed [`MAX_ATTEMPTS`](super::MAX_ATTEMPTS) times and were passed: their items need `backfill`.
    pub skipped_records: u64,
    /// Times records were lost to the stream's 24-hour trim before they were read (or the stream
    /// was replaced): their items need `backfill`.
    pub trimmed: u64,
    /// Shards read to their end.
    pub shards_done: u64,
    /// How far behind the follower is, as of its last read of each shard: the age of the newest
    /// record of the shard's last batch (ms), 0 for a shard read up to its end; the largest over
    /// the shards. What Lambda reports as `IteratorAge` for an event source mapping.
    pub record_age_ms: u64,
}
