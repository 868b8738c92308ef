//! The daemon's stream follower (`ttl-sweeper run --follow-stream`, `FOLLOW_STREAM`): reads the
//! table's DynamoDB stream itself, as an event source mapping does for the Lambda, and hands each
//! batch of records to the stream indexer ([`crate::index`]), so that writers need set only the
//! ttl. A child shard is read only after its parent, and a shard is held at a failing record
//! until it is indexed; at most [`MAX_BATCHES`] batches are held at once, read and not yet
//! indexed, however many shards the stream has. The rest (where the position is saved, expired
//! iterators, trimmed records): `docs/operations.md`, "Writers set only the ttl".

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::engine::Stop;
use crate::expiry::Clock;
use crate::index::{index_records_holding, item_id, IndexReport, IndexTarget};
use crate::store::stream::{
    From, ReadError, Shard, StreamClient, StreamPositions, StreamRead, TableStream,
};
use crate::store::{Backoff, Index, Retry, StoreError, TableSchema};
pub use gather::{
    Gathering, DEFAULT_HOLD, DEFAULT_MAX_ENTRIES, HOLD_ENTRIES, HOLD_FROM, MAX_HOLD, WRITE_BEFORE,
};
pub use plan::{Position, ShardPosition};
use reader::Reader;

mod gather;
mod hold;
mod plan;
mod reader;

/// Wait between reads of a shard that had nothing new.
pub const POLL: Duration = Duration::from_millis(250);
/// How a shard's iterator, read or held entries are tried again: until it works or the stop,
/// waits of [`POLL`] doubling to 30 s.
const READ_AGAIN: Retry = Retry {
    attempts: u32::MAX,
    base: POLL,
    cap: Duration::from_secs(30),
};
/// How often the shard list is read again (and at once when a shard was read to its end).
const DISCOVER_EVERY: Duration = Duration::from_secs(10);
/// The position is saved at most this often.
pub const SAVE_EVERY: Duration = Duration::from_secs(1);
/// The longest wait between attempts at a failing record, which are made until it is indexed
/// (or passed as never indexable), the shard held at it.
pub const RETRY_CAP: Duration = Duration::from_secs(5);
/// Batches read and not yet indexed, at most (each up to 1,000 records, 1 MB).
pub const MAX_BATCHES: usize = 8;
/// Shards read at once; a stream with more open shards than this waits for a slot.
pub const MAX_SHARDS: usize = 256;
/// A progress line is logged at most this often, when records came.
const LOG_EVERY: Duration = Duration::from_secs(60);

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
    /// Records that can never be indexed and were passed (malformed, or their entry refused as
    /// invalid when written alone): their items need `backfill`. A record that fails otherwise
    /// (throttling, 5xx, timeouts, access denied) is tried again, the shard held at it.
    pub skipped_records: u64,
    /// Times records were lost to the stream's 24-hour trim before they were read (or the stream
    /// was replaced): their items need `backfill`.
    pub trimmed: u64,
    /// Shards read to their end.
    pub shards_done: u64,
    /// How far behind the follower is (ms), the largest over the shards: for a shard held at a
    /// failing record, the age of its oldest record not yet indexed, as of the last attempt;
    /// otherwise the age of the newest record of its last batch once handled, 0 once read up to
    /// its end. What Lambda reports as `IteratorAge` for an event source mapping.
    pub record_age_ms: u64,
    /// Entries held to be packed with other batches' (`FOLLOW_HOLD`), as of the last write of
    /// held entries.
    pub entries_held: u64,
}

/// Refuses to follow `table`'s stream unless it is swept through an expiry index table
/// (`index`, as `EXPIRY_INDEX_TABLE` names it): the stream's records are indexed into it, and
/// nowhere else. Nothing is read: a daemon checks every table before it starts.
pub fn require_index_table(table: &str, index: &Index) -> Result<(), FollowError> {
    let table = table.to_owned();
    index
        .table()
        .map(|_| ())
        .ok_or(FollowError::NoIndexTable { table })
}

/// What the daemon follows tables' streams with (`--follow-stream`): the streams API's client
/// and how entries are gathered across batches.
#[derive(Debug, Clone)]
pub struct Following {
    /// The client of the DynamoDB Streams API.
    pub streams: StreamClient,
    /// How entries are gathered across batches (`FOLLOW_HOLD`, `FOLLOW_HOLD_ENTRIES`).
    pub gathering: Gathering,
}

/// The follower of one table's stream, checked and with its saved position loaded.
#[derive(Debug)]
pub struct Follower<C = StreamClient> {
    streams: C,
    stream: TableStream,
    /// The checkpoint table and the position item's id, when the position is saved.
    saved_at: Option<(String, String)>,
    start: Position,
    stream_replaced: bool,
    gathering: Gathering,
}

impl<C: StreamRead> Follower<C> {
    /// Checks that `schema`'s table has an expiry index table ([`require_index_table`]) and a
    /// stream whose records carry the new image, and that its shards can be listed, and loads the
    /// position saved in `saved_at` (checkpoint table, item id), if any. Entries are gathered
    /// across batches as `gathering` says.
    pub async fn open(
        store: &impl StreamPositions,
        streams: C,
        schema: &TableSchema,
        saved_at: Option<(String, String)>,
        gathering: Gathering,
    ) -> Result<Follower<C>, FollowError> {
        let table = schema.table_name.clone();
        require_index_table(&table, &schema.index)?;
        let Some(stream) = store.table_stream(&table).await? else {
            return Err(FollowError::NoStream { table });
        };
        if !stream.has_new_image() {
            let view = stream.view;
            return Err(FollowError::NoNewImage { table, view });
        }
        // The streams API answers (and may be called) before anything starts.
        streams.shards(&stream.arn).await?;
        let fresh = Position {
            stream: stream.arn.clone(),
            shards: BTreeMap::new(),
        };
        let saved = match &saved_at {
            Some((table, id)) => store.read_stream_position(table, id).await?,
            None => {
                tracing::warn!("no CHECKPOINT_TABLE: the stream position is not saved, and a restart reads the stream again from its oldest records (up to 24 hours)");
                None
            }
        };
        let (start, stream_replaced) = match saved.map(|s| serde_json::from_str::<Position>(&s)) {
            None => (fresh, false),
            Some(Ok(position)) if position.stream == stream.arn => (position, false),
            Some(Ok(position)) => {
                tracing::warn!(
                    saved = %position.stream, stream = %stream.arn,
                    "the table's stream is not the one the saved position is for (was it disabled and enabled again?): records written in between were not seen; run `ttl-sweeper backfill` to give their items a window"
                );
                (fresh, true)
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the saved stream position does not parse; reading every shard from its oldest record");
                (fresh, false)
            }
        };
        tracing::info!(stream = %stream.arn, view = %stream.view, shards_known = start.shards.len(), "following the table's stream");
        Ok(Follower {
            streams,
            stream,
            saved_at,
            start,
            stream_replaced,
            gathering,
        })
    }

    /// Follows the stream for `target`'s table until `stop`, then saves the position and returns
    /// what was done. Items written already expired are deleted through `target`'s delete path
    /// (a sweeper's: with their expiry events, as a sweep's deletes).
    /// `progress` sees the totals after every batch and every read that found nothing new.
    pub async fn run<T: IndexTarget<Store: StreamPositions>>(
        &self,
        target: &T,
        clock: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> FollowReport {
        let reader = Reader {
            follower: self,
            target,
            clock,
            stop,
            progress,
            batches: tokio::sync::Semaphore::new(MAX_BATCHES),
            ages: RefCell::default(),
            position: RefCell::new(self.start.clone()),
            listed: RefCell::new(Vec::new()),
            dirty: Cell::new(false),
            gathered: RefCell::new(gather::Gathered::new(self.gathering)),
            report: RefCell::new(FollowReport {
                trimmed: u64::from(self.stream_replaced),
                ..FollowReport::default()
            }),
        };
        reader.run().await;
        reader.write_held().await;
        reader.save().await;
        let report = reader.report.into_inner();
        tracing::info!(report = %serde_json::to_string(&report).unwrap_or_default(), "stopped following the stream");
        report
    }
}
