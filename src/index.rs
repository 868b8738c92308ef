//! The expiry index table's stream side, in one home: from the records of the application
//! table's DynamoDB stream to entries of the sweeper's own expiry index table, so that writers
//! set only the ttl and the application's table is never written. Records come two ways, both
//! handled here: an event source mapping's batches (the Lambda, [`crate::lambda`], calls
//! [`index_records`]) and the daemon's own reads of the stream ([`follow`], `run
//! --follow-stream`). Both reach a table only through [`IndexTarget`]. The packs' DynamoDB layout
//! is the store's ([`crate::store::packs`]); how a sweep reads them is the engine's.
//!
//! Each `INSERT` and `MODIFY` record whose new image has a usable ttl becomes one entry in a
//! *pack*, grouped with the batch's entries of the same window partition and due instant,
//! written once, never updated (`docs/design.md`, "Packed entries", the writer). What keeps
//! nothing lost: a pack is only ever due after it is written ([`packs::write_packs`]), and before
//! its first pack a writer stores its mark ([`Store::mark_packs`]): no pack is due before it. A
//! `MODIFY` whose old image has the same ttl writes nothing; `REMOVE` records need nothing, since
//! every delete is judged against the table. Records may be handled in any order and any number
//! of times: each batch's packs are keys of their own (a random origin), written whole. A record
//! whose entry could not be written is reported by its sequence number, the first of its item,
//! so that an event source mapping (`ReportBatchItemFailures`) or the follower delivers it again.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use serde::Serialize;

use crate::engine::{Stop, SweepReport, Sweeper};
use crate::expiry::{Clock, Timestamp};
use crate::store::entries::{self, Entry, ImageTtl, Indexing};
use crate::store::packs::{self, write_grouped, PackEntry, PACK_LEAD, WRITES};
use crate::store::{
    key_to_json, retried, write_all, EntryWrite, ErrorKind, Key, Store, StoreError, TableSchema,
};

pub mod follow;

/// What the stream paths use of a swept table: its store and schema, and the delete path where
/// the items found written already expired go. A [`Sweeper`] is one; the indexer and the
/// follower see nothing else of it (not its lease's state but through the delete path, nor its
/// sweeps or its checkpoint).
pub trait IndexTarget: Sync {
    /// The table's store.
    type Store: Store;

    /// The table's store.
    fn store(&self) -> &Self::Store;

    /// The table swept, its index and layout.
    fn schema(&self) -> &TableSchema;

    /// Deletes `entries`' items at once if they are expired at `now`, within `stop`; `None`,
    /// nothing sent, when this path may not delete now ([`Sweeper::delete_indexed`]).
    fn delete_indexed(
        &self,
        now: Timestamp,
        entries: Vec<PackEntry>,
        stop: &Stop,
    ) -> impl std::future::Future<Output = Option<SweepReport>> + Send;
}

impl<S: Store> IndexTarget for Sweeper<S> {
    type Store = S;

    fn store(&self) -> &S {
        Sweeper::store(self)
    }

    fn schema(&self) -> &TableSchema {
        Sweeper::schema(self)
    }

    async fn delete_indexed(
        &self,
        now: Timestamp,
        entries: Vec<PackEntry>,
        stop: &Stop,
    ) -> Option<SweepReport> {
        Sweeper::delete_indexed(self, now, entries, stop).await
    }
}

/// `BatchWriteItem` requests of entries in flight at once.
pub const CONCURRENCY: usize = 16;

/// Entries in one `BatchWriteItem`.
pub const ENTRIES_PER_REQUEST: usize = 25;

/// At most this many error messages are kept in a report (the count is in `failed`).
const MAX_ERRORS: usize = 10;

/// What one batch of stream records came to.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct IndexReport {
    /// Records in the batch.
    pub records: u64,
    /// `REMOVE` records: nothing to do.
    pub removes: u64,
    /// Entries written, one per `INSERT` or `MODIFY` whose new image has a usable ttl (each in
    /// a pack).
    pub entries_written: u64,
    /// Packs written (each holding entries of several records; one written again, due later,
    /// counts once).
    pub packs_written: u64,
    /// Of `entries_written`, items already expired when indexed. Those of fresh records are
    /// handed to the sweeper's delete path at once ([`Indexed::expired`]); every one's entry is
    /// in a pack due [`PACK_LEAD`] later, for the next sweep whether or not a delete settled it.
    pub expired_when_written: u64,
    /// Of `expired_when_written`, items deleted at once (`Sweeper::delete_indexed`).
    pub deleted_at_once: u64,
    /// `MODIFY` records whose ttl did not change: the item's entry is there already.
    pub ttl_unchanged: u64,
    /// Images without the ttl attribute: the item never expires.
    pub no_ttl: u64,
    /// Images whose ttl is not usable (not a Number, negative, milliseconds, more than five years
    /// in the past): never deleted, not indexed.
    pub invalid_ttl: u64,
    /// Records that failed (each stops its item: the records after it are delivered again too).
    pub failed: u64,
    /// The first errors, with the sequence number of the record.
    pub errors: Vec<String>,
}

/// A batch's report and the records to deliver again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Indexed {
    /// What was done.
    pub report: IndexReport,
    /// The sequence number of each failed record (the first failure of each item).
    pub failures: Vec<String>,
    /// Of `failures`, those no attempt of the same request can mend: the record cannot be
    /// indexed (no entry to write), or the request holding its entry was refused as invalid
    /// (`ValidationException`: in a request of several entries, perhaps another entry's fault).
    /// The others failed on what passes (throttling, 5xx, timeouts) or what an operator fixes
    /// (access denied, a missing table).
    pub refused: Vec<String>,
    /// The entries written whose items were written already expired (their records fresh):
    /// for the sweeper to delete at once ([`crate::engine::Sweeper::delete_indexed`]).
    pub expired: Vec<PackEntry>,
}

impl IndexReport {
    /// Adds `other`'s counts (and errors, up to the bound) to these.
    pub fn merge(&mut self, other: IndexReport) {
        add_counts!(self, other; records, removes, entries_written, packs_written,
            expired_when_written, deleted_at_once, ttl_unchanged, no_ttl, invalid_ttl, failed);
        let room = MAX_ERRORS.saturating_sub(self.errors.len());
        self.errors.extend(other.errors.into_iter().take(room));
    }
}

/// The sequence number of `record` (empty if it has none).
pub fn sequence(record: &EventRecord) -> &str {
    record.change.sequence_number.as_deref().unwrap_or_default()
}

/// The identity of `record`'s item (its key in DynamoDB JSON), the same whatever the order of the
/// key attributes.
pub fn item_id(record: &EventRecord) -> String {
    let key: Key = record.change.keys.clone().into();
    key_to_json(&key).to_string()
}

/// Indexes `records` (one batch from one shard of `schema`'s table's stream) into the table's
/// expiry index (`schema.index_table`) as packs, judging each image by `clock`. Never fails as a
/// whole: what failed is in [`Indexed::failures`].
pub async fn index_records<S: Store>(
    store: &S,
    schema: &TableSchema,
    clock: &dyn Clock,
    records: &[EventRecord],
) -> Indexed {
    index_records_holding(store, schema, clock, records, None)
        .await
        .0
}

/// An entry held back by [`index_records_holding`]: when it is due, the entry, and the place of
/// its record in the batch.
pub type HeldEntry = (Timestamp, PackEntry, usize);

/// [`index_records`], except that the entries due after `hold_after` (when given) are not
/// written but answered, for the caller to pack with other batches' entries due at the same
/// instant and write before they are due (the daemon's follower, [`crate::index::follow`]).
/// The writers' mark is stored before anything is answered or written.
pub async fn index_records_holding<S: Store>(
    store: &S,
    schema: &TableSchema,
    clock: &dyn Clock,
    records: &[EventRecord],
    hold_after: Option<Timestamp>,
) -> (Indexed, Vec<HeldEntry>) {
    let mut out = Indexed::default();
    out.report.records = records.len() as u64;
    let now = clock.now();
    // Each record's entry (by its place in `records`), or why it fails and whether for good.
    let mut found: Vec<(usize, Found)> = Vec::new();
    let mut failed: BTreeMap<usize, (String, bool)> = BTreeMap::new();
    for (at, record) in records.iter().enumerate() {
        match judge(schema, record, now, &mut out.report) {
            Ok(entry) => found.extend(entry.map(|entry| (at, entry))),
            Err(why) => {
                failed.insert(at, (why, true));
            }
        }
    }
    // One entry per item and ttl: a record delivered twice in one batch is written once.
    let mut seen = HashSet::new();
    found.retain(|(_, f)| seen.insert((key_to_json(&f.entry.key).to_string(), f.ttl.to_bits())));
    // The soonest a pack is due, read before the mark is stored: no pack is due before the
    // mark, even when the mark's own answer is the first to tell DynamoDB's clock, behind a
    // host clock running fast.
    let soonest = clock.latest() + PACK_LEAD;
    if !found.is_empty() {
        if let Err(e) = retried(WRITES, || store.mark_packs(schema, now)).await {
            for (at, _) in &found {
                failed.insert(*at, (format!("the writers' mark not stored: {e}"), false));
            }
            found.clear();
        }
    }
    let expired_at: HashSet<usize> = found
        .iter()
        .filter(|(_, f)| f.expired)
        .map(|f| f.0)
        .collect();
    let (held, due) = found
        .into_iter()
        .map(|(at, f)| (packs::due_of_ttl(f.ttl).max(soonest), f.entry, at))
        .partition::<Vec<_>, _>(|(due, _, at)| {
            hold_after.is_some_and(|after| *due > after && !expired_at.contains(at))
        });
    let origin = format!("{:016x}", fastrand::u64(..));
    let (written, apart) = write_grouped(store, schema, clock, &origin, due, CONCURRENCY).await;
    for (_, at) in apart {
        let why = format!("the key has no window of {:?}", schema.layout);
        failed.insert(at, (why, true));
    }
    for (pack, ats, error) in written {
        if let Some((kind, e)) = error {
            let refused = kind == ErrorKind::Validation;
            for at in ats {
                failed.insert(at, (format!("pack not written: {e}"), refused));
            }
            continue;
        }
        out.report.packs_written += 1;
        for (entry, at) in pack.entries.into_iter().zip(ats) {
            out.report.entries_written += 1;
            if expired_at.contains(&at) {
                out.report.expired_when_written += 1;
                if fresh(&records[at], now) {
                    out.expired.push(entry);
                }
            }
        }
    }
    // The first failed record of each item.
    let mut failed_items = HashSet::new();
    for (at, (why, refused)) in failed {
        let record = &records[at];
        let item = item_id(record);
        if !failed_items.insert(item.clone()) {
            continue;
        }
        let sequence = sequence(record).to_owned();
        out.report.failed += 1;
        if out.report.errors.len() < MAX_ERRORS {
            out.report
                .errors
                .push(format!("record {sequence} of item {item}: {why}"));
        }
        if refused {
            out.refused.push(sequence.clone());
        }
        out.failures.push(sequence);
    }
    (out, held)
}

/// Whether `record` is fresh enough at `now` for its item, found expired, to count as written
/// already expired: created at most [`FRESH_RECORD_SECONDS`] ago (`ApproximateCreationDateTime`:
/// whole seconds on DynamoDB, whole minutes on DynamoDB Local). An item of an older record (a
/// backlog after an outage) expired while its record waited in the stream: the sweeps delete
/// those in bulk.
fn fresh(record: &EventRecord, now: Timestamp) -> bool {
    let created = record.change.approximate_creation_date_time.timestamp();
    now.secs().saturating_sub(created) <= FRESH_RECORD_SECONDS
}

/// How old a record may be, seconds, for its item found expired to be deleted as it is indexed.
pub const FRESH_RECORD_SECONDS: i64 = 61;

/// Items written already expired handed to the sweeper at once per batch, at most; the others
/// wait for the next sweep (their entries are written).
pub const AT_ONCE_PER_BATCH: usize = 100;

/// How long the items written already expired of one batch may take to delete: no request
/// starts after it (the shard waits meanwhile); what is not settled by then goes at the next
/// sweep.
pub const AT_ONCE_BUDGET: Duration = Duration::from_secs(1);

/// Hands the items `indexed` found written already expired (their entries written; at most
/// [`AT_ONCE_PER_BATCH`]) to `target`'s delete path at once ([`IndexTarget::delete_indexed`]:
/// conditional deletes judged against the table, with their expiry events), within `stop` and
/// [`AT_ONCE_BUDGET`], as of `clock`'s instant now; what it deleted is counted
/// into the report (`deleted_at_once`). Their entries stay for the next sweep when the sweeper
/// does not lead (a lease held elsewhere) or a delete fails.
pub async fn delete_expired<T: IndexTarget>(
    target: &T,
    clock: &dyn Clock,
    indexed: &mut Indexed,
    stop: &Stop,
) {
    let mut expired = std::mem::take(&mut indexed.expired);
    if expired.is_empty() {
        return;
    }
    expired.truncate(AT_ONCE_PER_BATCH);
    let stop = stop.within(tokio::time::Instant::now() + AT_ONCE_BUDGET);
    let Some(report) = target.delete_indexed(clock.now(), expired, &stop).await else {
        tracing::debug!("items expired when written left to the lease holder's next sweep");
        return;
    };
    indexed.report.deleted_at_once += report.items_deleted;
    tracing::debug!(
        deleted = report.items_deleted,
        gone = report.items_gone,
        kept = report.items_skipped,
        failed = report.items_failed,
        left = report.items_left,
        "items expired when written, deleted at once"
    );
}

/// A record's entry, before it is packed.
struct Found {
    /// The item's key and ttl as the image has them.
    entry: PackEntry,
    /// The ttl, epoch seconds.
    ttl: f64,
    /// It had passed when the record was judged.
    expired: bool,
}

/// What `record` comes to at instant `now`, counted into `report`: the entry to write, if any, or
/// why the record cannot be indexed.
fn judge(
    schema: &TableSchema,
    record: &EventRecord,
    now: Timestamp,
    report: &mut IndexReport,
) -> Result<Option<Found>, String> {
    match record.event_name.as_str() {
        "REMOVE" => {
            report.removes += 1;
            return Ok(None);
        }
        "INSERT" | "MODIFY" => {}
        other => return Err(format!("unknown event name {other:?}")),
    }
    let image: Key = record.change.new_image.clone().into();
    if image.is_empty() {
        return Err(
            "no new image: the stream's view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES".into(),
        );
    }
    let ttl_attribute = &schema.layout.ttl_attribute;
    if record.event_name == "MODIFY" {
        let old: Key = record.change.old_image.clone().into();
        if !old.is_empty() && old.get(ttl_attribute) == image.get(ttl_attribute) {
            report.ttl_unchanged += 1;
            return Ok(None);
        }
    }
    if sequence(record).is_empty() {
        return Err("the record has no sequence number".into());
    }
    match entries::image_ttl(schema, &image, now) {
        None => Err(format!(
            "the new image lacks the key attributes {:?}",
            schema.key_attributes
        )),
        Some(ImageTtl::Judged(Indexing::NoTtl)) => {
            report.no_ttl += 1;
            Ok(None)
        }
        Some(ImageTtl::Judged(_)) => {
            report.invalid_ttl += 1;
            Ok(None)
        }
        Some(ImageTtl::Usable {
            key,
            raw,
            ttl,
            expired,
        }) => Ok(Some(Found {
            entry: PackEntry { key, ttl: raw },
            ttl,
            expired,
        })),
    }
}

/// Writes `entries` (up to [`ENTRIES_PER_REQUEST`]) with retries: what is still unprocessed after
/// [`WRITES`]' attempts, or was sent in a request that failed with an error not worth retrying (or
/// on the last attempt), is answered as not written, with why; the entries of earlier attempts
/// were.
pub async fn write_entries<S: Store, E: std::borrow::Borrow<Entry>>(
    store: &S,
    schema: &TableSchema,
    entries: &[E],
) -> Result<(), (StoreError, Vec<EntryWrite>)> {
    let writes: Vec<EntryWrite> = entries
        .iter()
        .map(|entry| EntryWrite::Put(entry.borrow().to_item()))
        .collect();
    let send = |writes| store.write_entries(schema, writes);
    write_all(send, writes, WRITES).await.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, sequence: &str, keys: serde_json::Value) -> EventRecord {
        serde_json::from_value(serde_json::json!({
            "eventID": format!("e{sequence}"), "eventName": name, "awsRegion": "eu-west-1",
            "eventSource": "aws:dynamodb",
            "dynamodb": { "Keys": keys, "SequenceNumber": sequence, "SizeBytes": 10,
                          "StreamViewType": "NEW_IMAGE" }
        }))
        .unwrap()
    }

    #[test]
    fn only_a_record_at_most_a_minute_old_counts_as_written_already_expired() {
        let now = crate::expiry::Timestamp::from_secs(1_800_000_000);
        let created = |age: i64| {
            let mut r = record("INSERT", "1", serde_json::json!({"pk": {"S": "a"}}));
            let at = chrono::DateTime::from_timestamp(now.secs() - age, 0).unwrap();
            r.change.approximate_creation_date_time = at;
            r
        };
        // DynamoDB Local rounds the creation down to the minute: a record of now is up to 60 s old.
        for age in [0, 1, 59, 60, 61] {
            assert!(fresh(&created(age), now), "{age} s old");
        }
        // A backlog's record: its item expired while it waited; the sweeps take it.
        for age in [62, 600, 86_400] {
            assert!(!fresh(&created(age), now), "{age} s old");
        }
        let missing = record("INSERT", "1", serde_json::json!({"pk": {"S": "a"}}));
        assert!(!fresh(&missing, now), "no creation time: not fresh");
    }

    #[test]
    fn records_of_one_item_are_one_item_whatever_the_order_of_their_key_attributes() {
        let a = serde_json::json!({"pk": {"S": "a"}, "sk": {"N": "1"}});
        let a_again = serde_json::json!({"sk": {"N": "1"}, "pk": {"S": "a"}});
        let b = serde_json::json!({"pk": {"S": "b"}, "sk": {"N": "1"}});
        let ids: Vec<String> = [a, b, a_again]
            .into_iter()
            .map(|k| item_id(&record("INSERT", "1", k)))
            .collect();
        assert_eq!(ids[0], ids[2]);
        assert_ne!(ids[0], ids[1]);
    }
}
