//! The sweeper's own expiry index (`EXPIRY_INDEX_TABLE`): a table of small entries, one per item
//! and ttl, written by the stream indexer ([`crate::index`]) and by `backfill`, read by the
//! sweeps, so that the application's table needs no GSI and no attribute of ours. The entries'
//! keys, what they carry and how a sweep reads them: `docs/design.md`, "The expiry index table".
//! An entry decides nothing: a sweep deletes an item only if the table's own item still has the
//! entry's ttl and it has expired, so a stale entry deletes nothing.

use aws_sdk_dynamodb::types::AttributeValue;
use sha2::{Digest, Sha256};

use super::{Key, TableSchema};
use crate::expiry::window::{parse_ttl, ttl_state, TtlState};
use crate::expiry::Timestamp;

/// The index table's partition key (String): the window and shard, as the GSI's.
pub const WINDOW: &str = "window";
/// The index table's sort key (String): `<ttl in ms, 14 digits>#<key hash>#<origin>`.
pub const ENTRY: &str = "entry";
/// The item's primary key (Map).
pub const KEY: &str = "key";
/// The item's ttl exactly as indexed (Number).
pub const TTL: &str = "ttl";
/// The index table's native TTL attribute (Number, epoch seconds): when an entry that no sweep
/// read goes by itself.
pub const EXPIRES: &str = "expires";

/// How long after its ttl (or after it was indexed, when already expired) an entry that no sweep
/// removed is left to the index table's native TTL: two days, far past any lookback a sweep
/// reads without a checkpoint.
pub const KEEP_SECONDS: i64 = 2 * 86_400;

/// The partition of the index table's claims: one item per table swept through it (sort key
/// [`ENTRY`]: the table's name), so that a second table, of this deployment or another, is
/// refused rather than stranded (each sweep would read the other's entries, find their items
/// absent and remove them). No window key begins with `#`, so no sweep reads it, and a claim has
/// no [`EXPIRES`]: native TTL keeps it.
pub const OWNERS: &str = "#owners";

/// The partition of the stream indexer's reports ([`IndexerReport`]): one item per execution
/// environment of the stream indexer's Lambda (sort key [`ENTRY`]: the environment's id), so that
/// the sweeper's lease, in other environments, learns how current its index is. No window key
/// begins with `#`, so no sweep reads it; each report has an [`EXPIRES`] a stream's retention
/// after it was written.
pub const INDEXER: &str = "#indexer";

/// The partition of archive mode's journal ([`Pending`]): the expiries a sweep published, or is
/// about to publish, whose items it has not yet deleted or whose expiry it has not yet cancelled,
/// one item per chunk (sort key [`ENTRY`]: `<due, epoch ms, 14 digits>#<writer>#<n>`), so that a
/// sweeper that dies between publishing an `Item Expired` and settling it leaves them to the next
/// sweep of any process (`docs/events.md`, "Archive"). No window key begins with `#`, so no sweep
/// lists it as entries.
pub const PENDING: &str = "#pending";

/// How long after it is due a [`Pending`] item that no sweep settled is left to the index
/// table's native TTL: far past any outage a sweep catches up ([`crate::engine`]'s `MAX_CATCHUP`
/// is 30 days at most).
pub const PENDING_KEEP_SECONDS: i64 = 31 * 86_400;

/// One chunk's expiries in archive mode's journal ([`PENDING`]), written before they are
/// published and removed once each is settled (its item deleted or found gone, or its expiry
/// cancelled); a sweep reads the ones due ([`Pending::sort_for`]) and settles them.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The sort key ([`ENTRY`]): when a sweep should read it, then who wrote it.
    pub sort: String,
    /// The expiries, at most a chunk's.
    pub expiries: Vec<PendingExpiry>,
}

/// One expiry of a [`Pending`] item.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingExpiry {
    /// The item's primary key.
    pub key: Key,
    /// The ttl the expiry announces (epoch seconds, as read).
    pub ttl: f64,
    /// The expiry's `deleted_at`, epoch ms.
    pub at: Timestamp,
}

/// The attribute of a [`Pending`] item holding its expiries (a List of Maps: [`KEY`], [`TTL`],
/// `at`).
const EXPIRIES: &str = "expiries";

impl Pending {
    /// The sort key of a journal item due at `due`, written by `writer` as its `n`th.
    pub fn sort_for(due: Timestamp, writer: &str, n: u64) -> String {
        format!("{}#{writer}#{n}", ttl_part(due.millis()))
    }

    /// The same writer's item, due at `due` instead: what a sweep that could not settle every
    /// expiry of it writes back, so that the others' turn comes first.
    pub fn due_at(&self, due: Timestamp) -> String {
        let (_, rest) = self.sort.split_once('#').unwrap_or(("", &self.sort));
        format!("{}#{rest}", ttl_part(due.millis()))
    }

    /// The journal item.
    pub fn to_item(&self) -> Key {
        let expiries = self.expiries.iter().map(|x| {
            let key = AttributeValue::M(x.key.clone());
            AttributeValue::M(item([(KEY, key), (TTL, n(x.ttl)), (AT, n(x.at.millis()))]))
        });
        let due_ms = self.sort.get(..14).and_then(|d| d.parse::<i64>().ok());
        let expires = due_ms.unwrap_or(0) / 1000 + PENDING_KEEP_SECONDS;
        item([
            (WINDOW, s(PENDING)),
            (ENTRY, s(&self.sort)),
            (EXPIRIES, AttributeValue::L(expiries.collect())),
            (EXPIRES, n(expires)),
        ])
    }

    /// The journal item `item` holds: `Err` with its sort key (to remove it) when it does not
    /// read as one, `None` for an item of another partition.
    pub fn from_item(item: &Key) -> Option<Result<Self, String>> {
        let s = |name: &str| item.get(name)?.as_s().ok().cloned();
        if s(WINDOW)? != PENDING {
            return None;
        }
        let sort = s(ENTRY)?;
        let expiry = |x: &AttributeValue| {
            let x = x.as_m().ok()?;
            let n = |name: &str| {
                let n: f64 = x.get(name)?.as_n().ok()?.parse().ok()?;
                n.is_finite().then_some(n)
            };
            Some(PendingExpiry {
                key: x.get(KEY)?.as_m().ok()?.clone(),
                ttl: n(TTL)?,
                at: Timestamp::from_millis(n(AT)? as i64),
            })
        };
        let list = item.get(EXPIRIES).and_then(|l| l.as_l().ok());
        let expiries = list.and_then(|l| l.iter().map(expiry).collect::<Option<Vec<_>>>());
        Some(match expiries {
            Some(expiries) => Ok(Pending { sort, expiries }),
            None => Err(sort),
        })
    }
}

/// How long a DynamoDB stream keeps its records (24 hours): entries are written from them, so a
/// sweeper and indexer down longer may have missed items written early in the outage.
pub const STREAM_RETENTION_SECONDS: i64 = 86_400;

/// The origin of the entries `backfill` writes (one per item and ttl: a second run writes the
/// same entries again).
pub const BACKFILL_ORIGIN: &str = "backfill";

/// One entry of the expiry index.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The window and shard ([`WINDOW`]).
    pub window: String,
    /// The sort key ([`ENTRY`]).
    pub sort: String,
    /// The item's primary key.
    pub key: Key,
    /// The item's ttl, exactly as the item had it (a Number in epoch seconds).
    pub ttl: String,
    /// When the index table's native TTL may remove it ([`EXPIRES`]).
    pub expires: i64,
}

/// What indexing one item's image comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Indexing {
    /// The item has no ttl attribute: it never expires, nothing to index.
    NoTtl,
    /// The ttl is not a usable Number in epoch seconds (not a Number, negative, milliseconds):
    /// never deleted, not indexed.
    InvalidTtl,
    /// The ttl is more than five years before the instant: native TTL never deletes such an
    /// item, nor does the sweeper. Not indexed.
    TooOldTtl,
    /// The entry to write; `expired`: the ttl had passed when the item was indexed.
    Entry {
        /// The entry.
        entry: Entry,
        /// The item was already expired at the instant it was indexed.
        expired: bool,
    },
}

/// The ttl of `image` (a whole item, or its key and ttl) of `schema`'s table, judged at `now`:
/// what an entry of it, of one item or in a pack, would say. `None` when the image lacks a key
/// attribute.
pub fn image_ttl(schema: &TableSchema, image: &Key, now: Timestamp) -> Option<ImageTtl> {
    let key = schema.key_of(image)?;
    let raw = match image.get(&schema.layout.ttl_attribute) {
        None => return Some(ImageTtl::Judged(Indexing::NoTtl)),
        Some(AttributeValue::N(n)) => n,
        Some(_) => return Some(ImageTtl::Judged(Indexing::InvalidTtl)),
    };
    let Ok(ttl) = parse_ttl(raw) else {
        return Some(ImageTtl::Judged(Indexing::InvalidTtl));
    };
    let expired = match ttl_state(ttl, now) {
        TtlState::TooOld => return Some(ImageTtl::Judged(Indexing::TooOldTtl)),
        TtlState::Expired => true,
        _ => false,
    };
    Some(ImageTtl::Usable {
        key,
        raw: raw.clone(),
        ttl,
        expired,
    })
}

/// What [`image_ttl`] finds of an image.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageTtl {
    /// No ttl, or one never indexed: [`Indexing::NoTtl`], [`Indexing::InvalidTtl`] or
    /// [`Indexing::TooOldTtl`].
    Judged(Indexing),
    /// A usable ttl.
    Usable {
        /// The item's primary key.
        key: Key,
        /// The ttl exactly as the item had it.
        raw: String,
        /// The ttl, epoch seconds.
        ttl: f64,
        /// It had passed at the instant judged.
        expired: bool,
    },
}

/// The entry of `image` (a whole item, or its key and ttl) of `schema`'s table, indexed at `now`
/// by a write from `origin` (a stream record's sequence number, or [`BACKFILL_ORIGIN`]); `None`
/// when the image lacks a key attribute.
pub fn index_item(
    schema: &TableSchema,
    image: &Key,
    origin: &str,
    now: Timestamp,
) -> Option<Indexing> {
    let (key, raw, ttl, expired) = match image_ttl(schema, image, now)? {
        ImageTtl::Judged(judged) => return Some(judged),
        ImageTtl::Usable {
            key,
            raw,
            ttl,
            expired,
        } => (key, raw, ttl, expired),
    };
    // An item already expired goes in the window every sweep reads now, not the passed one of
    // its ttl (which a checkpoint may have left behind for good).
    let placed = if expired { now.as_secs_f64() } else { ttl };
    let pk = schema.key_attributes.first().and_then(|a| key.get(a))?;
    let entry = Entry {
        window: schema.layout.window_for(placed, pk).ok()?,
        sort: sort_key(ttl, &key_hash(schema, &key)?, origin),
        key,
        ttl: raw,
        expires: placed.floor() as i64 + KEEP_SECONDS,
    };
    Some(Indexing::Entry { entry, expired })
}

/// The ttl part of a sort key (of a pack: its due): the ttl in whole milliseconds (rounded down),
/// 14 digits.
pub(super) fn ttl_part(millis: i64) -> String {
    format!("{:014}", millis.max(0))
}

/// The sort key of an entry: `<ttl in ms, 14 digits>#<key hash>#<origin>`.
pub fn sort_key(ttl: f64, key_hash: &str, origin: &str) -> String {
    prefix(ttl, key_hash) + origin
}

/// `<ttl in ms, 14 digits>#<key hash>#`: what every sort key of one item and ttl begins with.
fn prefix(ttl: f64, key_hash: &str) -> String {
    let millis = (ttl * 1000.0).floor() as i64;
    format!("{}#{key_hash}#", ttl_part(millis))
}

/// The bound of a sweep at `now`: every entry whose sort key is below it has a ttl before `now`
/// (a ttl in the same millisecond as `now` or later sorts at or above it).
pub fn sort_bound(now: Timestamp) -> String {
    ttl_part(now.millis())
}

/// The beginning every sort key of the item with `key` and `ttl` shares, whatever its origin:
/// what `audit` looks for.
pub fn sort_prefix(schema: &TableSchema, key: &Key, ttl: f64) -> Option<String> {
    Some(prefix(ttl, &key_hash(schema, key)?))
}

/// A short stable digest of an item's primary key (16 hex digits of SHA-256 of its
/// [`TableSchema::key_token`]): keys may be up to 2 KB, a sort key 1 KB.
pub fn key_hash(schema: &TableSchema, key: &Key) -> Option<String> {
    let digest = Sha256::digest(schema.key_token(key)?.as_bytes());
    Some(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
}

/// One execution environment's report of the stream indexer ([`INDEXER`]), as it last wrote it:
/// the records it failed to index and has not indexed since, and how far it indexed. Times are
/// DynamoDB's (a record's `ApproximateCreationDateTime`, and the indexer's clock held to
/// DynamoDB's), in epoch milliseconds in the item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexerReport {
    /// The environment's id (the item's sort key).
    pub environment: String,
    /// The records it last failed to index and has not indexed since (`failing`, a List of Maps),
    /// at most [`MAX_FAILING`].
    pub failing: Vec<FailingRecord>,
    /// The creation time of the newest record it indexed (`indexedThrough`), if any.
    pub indexed_through: Option<Timestamp>,
    /// When it wrote the report (`writtenAt`).
    pub written_at: Timestamp,
}

/// A record a stream batch failed to index, which the event source mapping delivers again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingRecord {
    /// Its sequence number (`sequence`).
    pub sequence: String,
    /// Its creation time (`since`): every record of its shard from it on is unindexed.
    pub since: Timestamp,
    /// When a batch last failed to index it (`at`).
    pub at: Timestamp,
}

/// The most failing records a report lists (the most recently failed kept).
pub const MAX_FAILING: usize = 8;

/// The attributes of an [`IndexerReport`] item.
const FAILING: &str = "failing";
const SEQUENCE: &str = "sequence";
const SINCE: &str = "since";
const AT: &str = "at";
const INDEXED_THROUGH: &str = "indexedThrough";
const WRITTEN_AT: &str = "writtenAt";

impl IndexerReport {
    /// The report as an item of the index table.
    pub fn to_item(&self) -> Key {
        let ms = |t: Timestamp| n(t.millis());
        let failing = self.failing.iter().take(MAX_FAILING).map(|f| {
            let sequence = s(&f.sequence);
            AttributeValue::M(item([
                (SEQUENCE, sequence),
                (SINCE, ms(f.since)),
                (AT, ms(f.at)),
            ]))
        });
        let expires = self.written_at.secs() + STREAM_RETENTION_SECONDS;
        let mut report = item([
            (WINDOW, s(INDEXER)),
            (ENTRY, s(&self.environment)),
            (FAILING, AttributeValue::L(failing.collect())),
            (WRITTEN_AT, ms(self.written_at)),
            (EXPIRES, n(expires)),
        ]);
        if let Some(through) = self.indexed_through {
            report.insert(INDEXED_THROUGH.to_owned(), ms(through));
        }
        report
    }

    /// The report an item of partition [`INDEXER`] holds; `None` for any other item, or one
    /// that does not read as a report.
    pub fn from_item(item: &Key) -> Option<Self> {
        let s = |item: &Key, name: &str| item.get(name)?.as_s().ok().cloned();
        let t = |item: &Key, name: &str| {
            let n = item.get(name)?.as_n().ok()?;
            n.parse().ok().map(Timestamp::from_millis)
        };
        if s(item, WINDOW)? != INDEXER {
            return None;
        }
        let record = |f: &AttributeValue| {
            let f = f.as_m().ok()?;
            Some(FailingRecord {
                sequence: s(f, SEQUENCE)?,
                since: t(f, SINCE)?,
                at: t(f, AT)?,
            })
        };
        let failing = match item.get(FAILING) {
            Some(AttributeValue::L(list)) => list.iter().map(record).collect::<Option<Vec<_>>>()?,
            None => Vec::new(),
            Some(_) => return None,
        };
        Some(IndexerReport {
            environment: s(item, ENTRY)?,
            failing,
            indexed_through: t(item, INDEXED_THROUGH),
            written_at: t(item, WRITTEN_AT)?,
        })
    }
}

/// One write of [`super::Store::write_entries`].
#[derive(Debug, Clone, PartialEq)]
pub enum EntryWrite {
    /// Puts an entry ([`Entry::to_item`]).
    Put(Key),
    /// Removes the entry with this key ([`id`]).
    Remove(Key),
}

impl Entry {
    /// The entry as an item of the index table.
    pub fn to_item(&self) -> Key {
        item([
            (WINDOW, s(&self.window)),
            (ENTRY, s(&self.sort)),
            (KEY, AttributeValue::M(self.key.clone())),
            (TTL, AttributeValue::N(self.ttl.clone())),
            (EXPIRES, n(self.expires)),
        ])
    }
}

/// An entry's primary key in the index table.
pub fn id(window: &str, sort: &str) -> Key {
    item([(WINDOW, s(window)), (ENTRY, s(sort))])
}

/// An item of the index table, or a Map in one: each attribute's name and value.
pub(super) fn item<const N: usize>(attributes: [(&str, AttributeValue); N]) -> Key {
    let named = attributes.into_iter().map(|(name, v)| (name.to_owned(), v));
    named.collect()
}

/// A String value.
pub(super) fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

/// A Number value.
pub(super) fn n(number: impl ToString) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

/// What a sweep reads of an entry (an item of the index table): the item as a GSI would list it
/// (its key attributes and its ttl attribute, the ttl as indexed) and the entry's own key, to
/// remove it once the item is judged. `None` for an item of the index table that is not an entry
/// of `schema`'s table.
pub fn listed(schema: &TableSchema, mut entry: Key) -> Option<(Key, Key)> {
    let window = entry.remove(WINDOW)?;
    let sort = entry.remove(ENTRY)?;
    let AttributeValue::M(key) = entry.remove(KEY)? else {
        return None;
    };
    let item = with_ttl(schema, key, entry.remove(TTL)?)?;
    let id = [(WINDOW.to_owned(), window), (ENTRY.to_owned(), sort)].into();
    Some((item, id))
}

/// The item of `key` with ttl `ttl` as a GSI would list it (an entry's, or one of a pack's);
/// `None` when `key` is not exactly a key of `schema`'s table: the index table is another's too.
pub(super) fn with_ttl(schema: &TableSchema, mut key: Key, ttl: AttributeValue) -> Option<Key> {
    if key.len() != schema.key_attributes.len() || schema.key_of(&key).is_none() {
        return None;
    }
    key.insert(schema.layout.ttl_attribute.clone(), ttl);
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::window::window_key;
    use crate::expiry::Layout;
    use AttributeValue as AV;

    fn schema() -> TableSchema {
        crate::store::tests::schema(&["pk", "sk"], Some("x"), Layout::default())
    }

    /// The entry `index_item` makes of the item with `ttl`, written by `origin` at `now`, and
    /// whether it was already expired.
    fn entry(ttl: &str, origin: &str, now: Timestamp) -> (Entry, bool) {
        match index_item(&schema(), &image(AV::N(ttl.into())), origin, now) {
            Some(Indexing::Entry { entry, expired }) => (entry, expired),
            other => panic!("not indexed: {other:?}"),
        }
    }

    fn image(ttl: AV) -> Key {
        [
            ("pk".to_owned(), AV::S("user#1".into())),
            ("sk".to_owned(), AV::N("7".into())),
            ("ttl".to_owned(), ttl),
            ("data".to_owned(), AV::S("x".repeat(100))),
        ]
        .into()
    }

    #[test]
    fn an_entry_carries_the_key_and_the_ttl_as_written_and_reads_back_as_the_gsi_would_list_it() {
        let now = Timestamp::from_secs(1_800_000_000);
        let (entry, expired) = entry("1800000100.5", "42", now);
        assert!(!expired);
        assert_eq!(entry.window, window_key(1_800_000_100.5, 60).unwrap());
        assert!(entry.sort.starts_with("01800000100500#"), "{}", entry.sort);
        assert!(entry.sort.ends_with("#42"));
        assert_eq!(entry.expires, 1_800_000_100 + KEEP_SECONDS);
        let (item, id) = listed(&schema(), entry.to_item()).unwrap();
        assert_eq!(id, super::id(&entry.window, &entry.sort));
        assert_eq!(item.len(), 3, "key and ttl, nothing else: {item:?}");
        assert_eq!(item["ttl"], AV::N("1800000100.5".into()));
        assert_eq!(item["pk"], AV::S("user#1".into()));
    }

    #[test]
    fn an_item_written_expired_goes_in_the_window_of_the_instant_with_its_own_ttl() {
        let now = Timestamp::from_secs(1_800_000_000);
        let (entry, expired) = entry("1700000000", "1", now);
        assert!(expired);
        assert_eq!(entry.window, window_key(1_800_000_000.0, 60).unwrap());
        assert!(entry.sort < sort_bound(now));
        assert!(entry.sort.starts_with("01700000000000#"));
    }

    #[test]
    fn unusable_ttls_are_not_indexed() {
        let now = Timestamp::from_secs(1_800_000_000);
        let s = schema();
        assert_eq!(
            index_item(&s, &image(AV::S("5".into())), "1", now),
            Some(Indexing::InvalidTtl)
        );
        assert_eq!(
            index_item(&s, &image(AV::N("1800000000000".into())), "1", now),
            Some(Indexing::InvalidTtl),
            "milliseconds"
        );
        assert_eq!(
            index_item(&s, &image(AV::N("-1".into())), "1", now),
            Some(Indexing::InvalidTtl)
        );
        assert_eq!(
            index_item(&s, &image(AV::N("5".into())), "1", now),
            Some(Indexing::TooOldTtl)
        );
        let mut no_ttl = image(AV::N("1".into()));
        no_ttl.remove("ttl");
        assert_eq!(index_item(&s, &no_ttl, "1", now), Some(Indexing::NoTtl));
        no_ttl.remove("sk");
        assert_eq!(index_item(&s, &no_ttl, "1", now), None, "no key");
    }

    proptest::proptest! {
        /// The bound of an instant orders an entry below it exactly when its ttl is before the
        /// instant (at millisecond precision, which a sweep instant has).
        #[test]
        fn the_bound_lists_exactly_the_ttls_before_the_instant(
            ttl_ms in 0i64..100_000_000_000_000,
            now_ms in 0i64..100_000_000_000_000,
            origin in "[0-9a-z]{1,30}",
        ) {
            let ttl = format!("{}.{:03}", ttl_ms / 1000, ttl_ms % 1000);
            let sort = sort_key(ttl.parse().unwrap(), "0123456789abcdef", &origin);
            let listed = sort < sort_bound(Timestamp::from_millis(now_ms));
            proptest::prop_assert_eq!(listed, ttl_ms < now_ms, "{} vs {}", sort, now_ms);
        }
    }

    #[test]
    fn an_indexer_report_reads_back_as_written_and_no_entry_reads_as_one() {
        let ms = Timestamp::from_millis;
        let report = IndexerReport {
            environment: "0123456789abcdef".into(),
            failing: vec![FailingRecord {
                sequence: "4200".into(),
                since: ms(1_800_000_000_000),
                at: ms(1_800_000_005_000),
            }],
            indexed_through: Some(ms(1_799_999_999_000)),
            written_at: ms(1_800_000_005_120),
        };
        let item = report.to_item();
        assert_eq!(item[WINDOW], AV::S(INDEXER.into()));
        assert_eq!(item[EXPIRES], AV::N((1_800_000_005 + 86_400).to_string()));
        assert_eq!(IndexerReport::from_item(&item), Some(report));
        let (entry, _) = entry("1800000100", "1", Timestamp::from_secs(1_800_000_000));
        assert_eq!(IndexerReport::from_item(&entry.to_item()), None);
        assert_eq!(IndexerReport::from_item(&id(OWNERS, "sessions")), None);
    }

    #[test]
    fn a_journal_item_reads_back_as_written_and_sorts_by_when_it_is_due() {
        let key: Key = [
            ("pk".to_owned(), AV::S("user#1".into())),
            ("sk".to_owned(), AV::N("7".into())),
        ]
        .into();
        let due = Timestamp::from_millis(1_800_000_010_000);
        let pending = Pending {
            sort: Pending::sort_for(due, "00ff", 3),
            expiries: vec![PendingExpiry {
                key,
                ttl: 1_799_999_990.5,
                at: Timestamp::from_millis(1_800_000_000_123),
            }],
        };
        assert_eq!(pending.sort, "01800000010000#00ff#3");
        let item = pending.to_item();
        assert_eq!(item[WINDOW], AV::S(PENDING.into()));
        assert_eq!(
            item[EXPIRES],
            AV::N((1_800_000_010 + PENDING_KEEP_SECONDS).to_string())
        );
        assert_eq!(Pending::from_item(&item), Some(Ok(pending.clone())));
        // Due by the bound of its instant, not before.
        assert!(pending.sort < sort_bound(Timestamp::from_millis(1_800_000_010_001)));
        assert!(pending.sort >= sort_bound(due));
        // Put again later: the same writer and number, a later turn.
        let later = pending.due_at(Timestamp::from_millis(1_800_000_020_000));
        assert_eq!(later, "01800000020000#00ff#3");
        // Not one: another partition; one that does not read: its sort key, to remove it.
        let (entry, _) = entry("1800000100", "1", Timestamp::from_secs(1_800_000_000));
        assert_eq!(Pending::from_item(&entry.to_item()), None);
        let mut bad = item.clone();
        bad.insert("expiries".into(), AV::S("?".into()));
        assert_eq!(Pending::from_item(&bad), Some(Err(pending.sort)));
    }

    #[test]
    fn key_hashes_tell_keys_apart_and_not_their_attribute_order() {
        let s = schema();
        let a: Key = [
            ("pk".into(), AV::S("a".into())),
            ("sk".into(), AV::N("1".into())),
        ]
        .into();
        let b: Key = [
            ("pk".into(), AV::S("a".into())),
            ("sk".into(), AV::N("2".into())),
        ]
        .into();
        assert_ne!(key_hash(&s, &a), key_hash(&s, &b));
        assert_eq!(key_hash(&s, &a).unwrap().len(), 16);
        let item = listed(&s, {
            let mut e = id("w", "s");
            e.insert(KEY.into(), AV::M(a.clone()));
            e.insert(TTL.into(), AV::N("1".into()));
            e
        });
        assert!(item.is_some());
        let wrong = listed(&s, {
            let mut e = id("w", "s");
            e.insert(KEY.into(), AV::M(b.into_iter().take(1).collect()));
            e.insert(TTL.into(), AV::N("1".into()));
            e
        });
        assert!(wrong.is_none(), "an entry of another table's key");
    }
}
