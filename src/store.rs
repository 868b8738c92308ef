//! The store: the only code that talks to DynamoDB.
//!
//! [`Store`] is the one seam the sweep engine uses: one typed method per DynamoDB operation it
//! needs. [`DynamoStore`] implements it ([`dynamo`]); tests, in memory. Beside it: SDK errors
//! classified once ([`error`]), DynamoDB's clock from response `Date` headers ([`clock`]),
//! start-up checks ([`describe`]), the adoption tools' table-wide operations ([`scan`]), the
//! table's stream ([`stream`]), keys in DynamoDB JSON ([`keys`]) and the sweeper's own expiry
//! index table's entries ([`entries`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::expiry::window::parse_ttl;
use crate::expiry::{Layout, Timestamp};

pub mod clock;
pub mod describe;
pub mod dynamo;
pub mod entries;
pub mod error;
pub mod keys;
pub mod packs;
pub mod retry;
pub mod scan;
pub use scan::Scan;
pub mod stream;

pub use clock::{GuardedClock, ServerClock, ServerTime, DRIFT_TOLERANCE};
pub use describe::{open, IndexCheck, OpenedTable, TableTarget};
pub use dynamo::{DynamoStore, BATCH_ATTEMPT_TIMEOUT, SDK_MAX_ATTEMPTS};
pub use entries::{EntryWrite, IndexerReport};
pub use error::{ErrorKind, StoreError};
pub use keys::{key_from_json, key_in, key_to_json};
pub use retry::{full_jitter, retried, write_all, Backoff, Retry};

/// Locks `mutex`, poisoned or not: every mutex of ours guards plain data, whole after each update.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An item's primary key (or a whole item, as returned by a query).
pub type Key = HashMap<String, AttributeValue>;

/// The index a table is swept through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Index {
    /// A GSI of the table keyed on (window, ttl) (`INDEX_NAME`): writers set the window.
    Gsi(String),
    /// The sweeper's own expiry index table (`EXPIRY_INDEX_TABLE`, [`entries`]), fed by the
    /// table's stream: writers set only the ttl.
    Table(String),
}

impl Index {
    /// The expiry index table, when the table is swept through one.
    pub fn table(&self) -> Option<&str> {
        match self {
            Index::Table(table) => Some(table),
            Index::Gsi(_) => None,
        }
    }

    /// The index's name: the GSI's or the expiry index table's.
    pub fn name(&self) -> &str {
        match self {
            Index::Gsi(name) | Index::Table(name) => name,
        }
    }
}

/// What the sweeper knows about the table after start-up checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The table's name (or ARN, as configured).
    pub table_name: String,
    /// The index the table is swept through.
    pub index: Index,
    /// Primary key attribute names: the partition key, then the sort key if any.
    pub key_attributes: Vec<String>,
    /// Where items keep their ttl and window, the window width and the shard count.
    pub layout: Layout,
}

impl TableSchema {
    /// Builds the primary key of `item` (which must come from this table or its index).
    pub fn key_of(&self, item: &Key) -> Option<Key> {
        key_in(&self.key_attributes, item)
    }

    /// The ttl of `item` (from this table or its index), if it has a usable one.
    pub fn ttl_of(&self, item: &Key) -> Option<f64> {
        parse_ttl(item.get(&self.layout.ttl_attribute)?.as_n().ok()?).ok()
    }

    /// The item of `items` (from this table or its index) whose primary key is `key`.
    pub fn find<'a>(&self, items: &'a [Key], key: &Key) -> Option<&'a Key> {
        items.iter().find(|item| {
            self.key_attributes
                .iter()
                .all(|a| item.get(a).is_some_and(|v| key.get(a) == Some(v)))
        })
    }

    /// Whether `a` and `b` (keys, or items of this table or its index) have the same primary
    /// key: exactly when both have a [`Self::key_token`] and the two are equal.
    pub fn same_key(&self, a: &Key, b: &Key) -> bool {
        self.key_attributes
            .iter()
            .all(|name| match (a.get(name), b.get(name)) {
                (
                    Some(x @ (AttributeValue::S(_) | AttributeValue::N(_) | AttributeValue::B(_))),
                    y,
                ) => Some(x) == y,
                _ => false,
            })
    }

    /// A hash of `item`'s primary key, built without the text of [`Self::key_token`]: keys with
    /// the same token hash alike; `None` when that token is `None`.
    pub(crate) fn key_hash(&self, item: &Key) -> Option<u64> {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for attribute in &self.key_attributes {
            match item.get(attribute)? {
                AttributeValue::S(s) => (b'S', s.as_bytes()).hash(&mut hasher),
                AttributeValue::N(n) => (b'N', n.as_bytes()).hash(&mut hasher),
                AttributeValue::B(b) => (b'B', b.as_ref()).hash(&mut hasher),
                _ => return None,
            }
        }
        Some(hasher.finish())
    }

    /// `items` indexed by primary key, for looking up many keys at once (the answer of a read by
    /// key): as [`Self::find`] for each, without a scan or a text per item.
    pub fn index<'a>(&'a self, items: &'a [Key]) -> KeyIndex<'a> {
        let mut at = HashMap::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(hash) = self.key_hash(item) {
                // Two items of one hash (never one key twice from DynamoDB): both looked for.
                at.entry(hash)
                    .and_modify(|slot| *slot = None)
                    .or_insert(Some(i));
            }
        }
        KeyIndex {
            schema: self,
            items,
            at,
        }
    }

    /// The primary key of `item` (a key, or an item of this table or its index) as text: each
    /// key attribute's type, length and value, in the schema's order; `None` without them.
    pub fn key_token(&self, item: &Key) -> Option<String> {
        use std::fmt::Write as _;
        let mut token = String::new();
        for attribute in &self.key_attributes {
            let _ = match item.get(attribute)? {
                AttributeValue::S(s) => write!(token, "S{}:{s}", s.len()),
                AttributeValue::N(n) => write!(token, "N{}:{n}", n.len()),
                AttributeValue::B(b) => {
                    let bytes = b.as_ref();
                    let _ = write!(token, "B{}:", bytes.len());
                    bytes
                        .iter()
                        .try_for_each(|byte| write!(token, "{byte:02x}"))
                }
                _ => return None,
            };
        }
        Some(token)
    }
}

/// Items by primary key, from [`TableSchema::index`].
#[derive(Debug)]
pub struct KeyIndex<'a> {
    schema: &'a TableSchema,
    items: &'a [Key],
    /// By the hash of its primary key: the item of that hash, or `None` if several have it.
    at: HashMap<u64, Option<usize>>,
}

impl<'a> KeyIndex<'a> {
    /// The item whose primary key is `key`'s ([`TableSchema::same_key`]).
    pub fn get(&self, key: &Key) -> Option<&'a Key> {
        let same = |item: &&Key| self.schema.same_key(item, key);
        match *self.at.get(&self.schema.key_hash(key)?)? {
            Some(i) => Some(&self.items[i]).filter(same),
            None => self.items.iter().find(same),
        }
    }
}

/// One page of a partition query.
#[derive(Debug, Default, Clone)]
pub struct Page {
    /// Items as projected: key attributes and the ttl attribute (from an expiry index table: the
    /// ttl as indexed).
    pub items: Vec<Key>,
    /// From an expiry index table: each item's entry ([`entries::id`]), in the order of `items`,
    /// to remove once the item is judged. Empty from a GSI.
    pub entries: Vec<Key>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Key>,
    /// The items come from packs of the expiry index table ([`packs`]): nothing to remove once
    /// judged (`entries` is empty), and what is not settled is carried into a new pack.
    pub packed: bool,
}

/// Outcome of a conditional delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionalOutcome {
    /// The item was deleted.
    Deleted,
    /// The condition did not hold: the item's ttl was extended or removed. The item stays.
    Kept,
    /// The item no longer existed when the delete arrived: an earlier attempt whose answer was
    /// lost (a dropped connection, a timeout) already deleted it, or the application did.
    Gone,
}

/// The leader lease item of one swept table, in the checkpoint table beside its checkpoint
/// (see [`crate::engine::lease`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseItem {
    /// Who holds it (`<region>/<function>` or `<region>/<host>/<pid>`).
    pub holder: String,
    /// When it lapses, by DynamoDB's clock (epoch milliseconds in the table).
    pub expires_at: Timestamp,
    /// The holder's layout ([`crate::config::Config::lease_layout`]); `None` in older items.
    pub layout: Option<String>,
    /// The holder gave it up ([`Store::release_lease`]): it lapses at `expires_at` all the same,
    /// and is not renewed.
    pub released: bool,
}

/// The operations the sweep engine needs from DynamoDB, one method each. A store lives as long
/// as the tasks a sweep spawns may (`'static`); to share one, clone it (a [`DynamoStore`] clone
/// shares its clients).
pub trait Store: Send + Sync + 'static {
    /// One page (`Query` on the index) of the items in partition `partition` whose ttl is
    /// `< now`, after `start`, at most `limit` (`None`: 1 MB pages): key attributes and ttl.
    /// With `packs_since` (an expiry index table only), the items of the packs due from it to
    /// `now` instead ([`packs`]; `limit` then counts packs).
    fn query_expired(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        packs_since: Option<Timestamp>,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// The instant sweeper cursor `id` of `schema.index_table` holds ([`packs::CURSOR`]), read
    /// strongly consistent; `None` if it was never written. Written with [`Store::write_entries`].
    fn read_cursor(
        &self,
        schema: &TableSchema,
        id: &str,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Stores the writers' mark of `schema`'s table in `schema.index_table` ([`packs::CURSOR`],
    /// sort key the table's name) as `at`, unless a mark is there already: a conditional
    /// `PutItem`, one attempt, before the first pack. A mark found there is success. A mark seen
    /// stored may be taken to be there for a while without asking again
    /// ([`dynamo::MARK_KNOWN_FOR`]): it is never removed.
    fn mark_packs(
        &self,
        schema: &TableSchema,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Deletes up to 25 keys in one `BatchWriteItem`, one attempt (the engine retries); answers
    /// the keys left unprocessed.
    fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send;

    /// Deletes `key` (`DeleteItem`, one attempt) only if its ttl is still `ttl` (as read, a
    /// Number), `< now` and not more than five years before it. With `return_item`, a deleted
    /// item comes back as it was (`ReturnValues=ALL_OLD`, no extra capacity), for expiry events.
    fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> impl Future<Output = Result<(ConditionalOutcome, Option<Key>), StoreError>> + Send;

    /// Reads items by key (up to 100), strongly consistent (`BatchGetItem`): whole items, or
    /// (`ttl_only`) their key attributes and ttl. Answers the items found, in any order; a key
    /// missing from the answer is an item that does not exist.
    fn get_items(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send;

    /// Up to 25 [`EntryWrite`]s in one `BatchWriteItem` on `schema.index_table`, one attempt;
    /// answers the writes left unprocessed.
    fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> impl Future<Output = Result<Vec<EntryWrite>, StoreError>> + Send;

    /// Puts `report`, the stream indexer's report of its execution environment (an item of
    /// partition [`entries::INDEXER`]), into the expiry index table `index_table`: one
    /// `BatchWriteItem` of one put, one attempt, since the indexer's role may write that table
    /// with nothing else. A put left unprocessed is an error (throttled).
    fn write_indexer_report(
        &self,
        index_table: &str,
        report: &IndexerReport,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The stream indexer's reports in the expiry index table `index_table`: one strongly
    /// consistent `Query` of partition [`entries::INDEXER`], its first page (one report per
    /// execution environment of the last day: far less than a page).
    fn read_indexer_reports(
        &self,
        index_table: &str,
    ) -> impl Future<Output = Result<Vec<IndexerReport>, StoreError>> + Send;

    /// The items of archive mode's journal in `schema.index_table` due by `due` (sort key below
    /// [`entries::sort_bound`]`(due)`), the earliest due first, at most `limit`: one strongly
    /// consistent `Query` of partition [`entries::PENDING`], raw ([`entries::Pending::from_item`]).
    fn read_pending(
        &self,
        schema: &TableSchema,
        due: Timestamp,
        limit: i32,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send;

    /// Reads checkpoint `id` from `table`: the boundary up to which everything was swept, if any.
    fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Moves checkpoint `id` forward to `to`, never backwards, stamped `at`; `false` if it
    /// already was at or past `to`.
    fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: Timestamp,
        at: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Reads lease `id` from `table`, strongly consistent (`GetItem`).
    fn read_lease(
        &self,
        table: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<LeaseItem>, StoreError>> + Send;

    /// Writes lease `id` of `table` as `lease`, not given up (a conditional `UpdateItem`) if no
    /// lease is there, or it is `lease.holder`'s and not given up, or it lapsed before
    /// `lapsed_before`; `false` when the condition did not hold.
    fn write_lease(
        &self,
        table: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Marks lease `id` of `table` given up (`released`), its expiry unchanged, if `holder` still
    /// holds it (a conditional `UpdateItem`: `holder = :me`). `false` when it did not.
    fn release_lease(
        &self,
        table: &str,
        id: &str,
        holder: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Claims `schema.index_table`, the expiry index table, for `schema`'s table (a sweeper
    /// claims it before its first sweep: [`entries::OWNERS`]); a `Validation` error naming the
    /// other table when another table claims it. Nothing to do through a GSI.
    fn claim_index_table(
        &self,
        schema: &TableSchema,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The schema of table `t` keyed on `keys`, swept through GSI `i` or `index_table`.
    pub(crate) fn schema(keys: &[&str], index_table: Option<&str>, layout: Layout) -> TableSchema {
        TableSchema {
            table_name: "t".into(),
            index: index_table.map_or(Index::Gsi("i".into()), |t| Index::Table(t.into())),
            key_attributes: keys.iter().map(|&k| k.into()).collect(),
            layout,
        }
    }

    #[test]
    fn an_index_finds_an_item_by_key_exactly_as_a_scan_does() {
        let schema = schema(&["pk", "sk"], None, Layout::default());
        let s = |v: &str| AttributeValue::S(v.into());
        let n = |v: &str| AttributeValue::N(v.into());
        let key = |pk: AttributeValue, sk: AttributeValue| -> Key {
            [("pk".to_owned(), pk), ("sk".to_owned(), sk)].into()
        };
        let mut items = vec![
            key(s("a"), n("1")),
            key(s("a"), s("1")),
            key(s("b"), n("1")),
        ];
        items[0].insert("ttl".into(), n("5"));
        let mut keyless = key(s("c"), n("1"));
        keyless.remove("sk");
        items.push(keyless.clone());
        let index = schema.index(&items);
        let keys = [
            key(s("a"), n("1")),
            key(s("a"), s("1")),
            key(s("b"), n("1")),
            key(s("b"), n("1.0")),
            key(s("a"), n("2")),
            keyless,
        ];
        for k in &keys {
            assert_eq!(index.get(k), schema.find(&items, k), "{k:?}");
        }
        assert_eq!(index.get(&keys[0]), Some(&items[0]));
        assert_eq!(index.get(&keys[3]), None);
    }
}
