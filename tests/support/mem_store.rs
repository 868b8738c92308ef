//! The tests' one in-memory [`Store`]: a table of items keyed by a String `id`, each listed
//! under its index partition, whose calls can be made slow (Tokio time: instant under
//! `tokio::time::pause()`), fail, stall, lose their answer or land late; whose items the
//! "application" can rewrite after a call or at an instant; and which counts its calls and
//! records what it was sent. Its calls are in `mem_store/store.rs` (the sweeps') and
//! `mem_store/scan.rs` (the adoption tools'), the faults and changes a test scripts in
//! `mem_store/script.rs`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue as AV;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use ttl_sweeper::engine::{SweepOptions, Sweeper};
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::{
    entries, ErrorKind, Index, Key, LeaseItem, Store, StoreError, TableSchema,
};

mod scan;
mod script;
mod store;

use script::Script;
pub use script::{Change, Fault, Op, When};

/// An item under its index partition.
type Entry = (String, Key);

/// The items by `id`.
type Items = BTreeMap<String, Entry>;

/// An expiry index entry's (or its key's) window and sort key.
fn entry_id(entry: &Key) -> (String, String) {
    let text = |name: &str| match entry.get(name) {
        Some(AV::S(s)) => s.clone(),
        other => panic!("entry attribute {name}: {other:?}"),
    };
    (text(entries::WINDOW), text(entries::ENTRY))
}

/// A write of the table: the item written, or `None` for a delete.
type Write = (Instant, String, Option<Entry>);

/// An index that shows the table as it was `lag` ago, as an eventually consistent GSI does
/// (see [`MemStore::index_lag`]).
struct LaggingIndex {
    lag: Duration,
    view: Items,
    /// The table's writes not yet in the view, oldest first.
    pending: VecDeque<Write>,
}

impl LaggingIndex {
    fn record(&mut self, id: &str, entry: Option<Entry>) {
        self.pending
            .push_back((Instant::now(), id.to_owned(), entry));
    }

    /// Applies the writes made at least `lag` ago.
    fn catch_up(&mut self) {
        while let Some((at, ..)) = self.pending.front() {
            if at.elapsed() < self.lag {
                break;
            }
            let (_, id, entry) = self.pending.pop_front().unwrap();
            match entry {
                Some(entry) => self.view.insert(id, entry),
                None => self.view.remove(&id),
            };
        }
    }
}

/// DynamoDB refuses a `BatchWriteItem` or `BatchGetItem` that names a key twice, the whole
/// request (`ValidationException`: "Provided list of item keys contains duplicates").
fn refuse_repeats<'a>(keys: impl Iterator<Item = &'a Key>, op: Op) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if !seen.insert(id_of(k)) {
            let message = "Provided list of item keys contains duplicates";
            return Err(StoreError::new(ErrorKind::Validation, op.name(), message));
        }
    }
    Ok(())
}

/// Records a write of the table in its lagging index, if it has one.
fn note(index: &Option<Arc<Mutex<LaggingIndex>>>, id: &str, entry: Option<Entry>) {
    if let Some(index) = index {
        index.lock().unwrap().record(id, entry);
    }
}

/// The in-memory table, a handle: its clones share the one table, with its faults and counts.
/// Build it with [`MemStore::new`] and the methods that follow it, before it is cloned.
#[derive(Clone, Default)]
pub struct MemStore(Arc<Table>);

impl std::ops::Deref for MemStore {
    type Target = Table;

    fn deref(&self) -> &Table {
        &self.0
    }
}

impl std::ops::DerefMut for MemStore {
    /// For the builder methods: a store is built before it is cloned.
    fn deref_mut(&mut self) -> &mut Table {
        Arc::get_mut(&mut self.0).expect("a MemStore is built before it is cloned")
    }
}

/// What a [`MemStore`] holds.
#[derive(Default)]
pub struct Table {
    layout: Layout,
    /// Items by `id`, each with the index partition it is listed under.
    items: Arc<Mutex<Items>>,
    /// Queries read this index, behind the table, instead of the table itself.
    index: Option<Arc<Mutex<LaggingIndex>>>,
    /// Query call number, and the item it lists again at the end of its page.
    relist: Mutex<Vec<(usize, String)>>,
    /// Queries list the expired items of every partition, whichever is asked for.
    any_partition: bool,
    /// Pages hold this many items, whatever limit the query asks for (as 1 MB pages do).
    page_size: Option<usize>,
    delays: HashMap<Op, Duration>,
    faults: Script<Fault>,
    /// Changes the application makes right after a call.
    changes: Script<(String, Change)>,
    /// Cancelled when an answer is lost or a `BatchWriteItem` lands late.
    cancel_on_lost: Option<CancellationToken>,
    /// Cancelled once this many queries were made.
    stop_after: Mutex<Option<(usize, CancellationToken)>>,
    /// The calls made of each operation, by its place in [`Op::ALL`].
    calls: [AtomicUsize; Op::ALL.len()],
    /// The expiry index table's entries by (window, sort key), when the schema names one
    /// ([`MemStore::with_index_table`]): queries read it instead of a GSI.
    pub entries: Arc<Mutex<BTreeMap<(String, String), Key>>>,
    /// Queries read the expiry index table (`entries`).
    index_table: bool,
    /// The stream indexer's reports in the expiry index table, by environment, each as written.
    pub reports: Arc<Mutex<BTreeMap<String, ttl_sweeper::store::IndexerReport>>>,
    /// The virtual wall clock's epoch seconds at the instant the store was made.
    epoch: Option<(f64, Instant)>,
    /// Items removed by a delete of the sweep.
    pub deleted: AtomicUsize,
    /// `deleted <id>` for every item removed by a delete of the sweep.
    pub log: Arc<Mutex<Vec<String>>>,
    /// When each `BatchWriteItem` was sent, with the keys it deleted.
    pub batch_calls: Mutex<Vec<(Instant, Vec<String>)>>,
    /// How many times queries listed each pack (by sort key).
    pub pack_reads: Mutex<BTreeMap<String, usize>>,
    /// Each put of a pack: (its sort key, the virtual wall clock's epoch ms when it was applied).
    pub pack_puts: Mutex<Vec<(String, i64)>>,
    /// When each key was last listed by a query or read by key.
    pub listed_at: Mutex<BTreeMap<String, Instant>>,
    /// When the table itself was last read for each key (a `BatchGetItem`, at its request).
    pub table_read_at: Mutex<BTreeMap<String, Instant>>,
    /// The largest age (since its listing) of a key when a `BatchWriteItem` carrying it was sent.
    pub max_sent_age: Mutex<Duration>,
    /// Items returned by conditional deletes (for expiry events), and of those the most at once
    /// whose event was not yet published (`items_published`, counted by the test's hook).
    pub items_returned: AtomicUsize,
    pub items_published: Arc<AtomicUsize>,
    pub max_items_held: AtomicUsize,
    /// Keys listed by queries and not yet answered by a delete, now and at the most.
    outstanding: AtomicUsize,
    pub max_outstanding: AtomicUsize,
    /// Items a `BatchWriteItem` deleted while their ttl was not past the virtual clock.
    pub destroyed_live: Mutex<Vec<String>>,
    pub checkpoint: Mutex<Option<Timestamp>>,
    /// The leader lease items by id (shared by the stores made with [`MemStore::sharing`]).
    pub leases: Arc<Mutex<BTreeMap<String, LeaseItem>>>,
    /// The stream follower's positions saved in the checkpoint table, by (table, id).
    pub stream_positions: Mutex<BTreeMap<(String, String), String>>,
}

/// The schema of the tests' `sessions` table (String key `id`, the sweeper's default index) with
/// the default layout, as a [`MemStore`] of the default layout has it.
pub fn default_schema() -> TableSchema {
    TableSchema {
        table_name: "sessions".into(),
        index: Index::Gsi("expirationWindowIndex".into()),
        key_attributes: vec!["id".into()],
        layout: Layout::default(),
    }
}

pub fn id_of(key: &Key) -> String {
    match &key["id"] {
        AV::S(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

pub use super::id_key as key;

/// An item's ttl (a Number).
pub fn ttl_of(item: &Key) -> f64 {
    match &item["ttl"] {
        AV::N(n) => n.parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

impl AsRef<MemStore> for MemStore {
    fn as_ref(&self) -> &MemStore {
        self
    }
}

/// A sweeper over the in-memory table `store` (a [`MemStore`], or a store observing one), with
/// its schema and `options`.
pub fn mem_sweeper<S: Store + AsRef<MemStore>>(store: S, options: SweepOptions) -> Sweeper<S> {
    let schema = store.as_ref().schema();
    Sweeper::new(store, schema, options)
}

impl MemStore {
    pub fn new(layout: Layout) -> Self {
        MemStore(Arc::new(Table {
            layout,
            ..Table::default()
        }))
    }

    /// The virtual wall clock reads `t0` now and moves with Tokio's clock.
    pub fn starting_at(mut self, t0: i64) -> Self {
        self.epoch = Some((t0 as f64, Instant::now()));
        self
    }

    /// Queries ignore partitions: every expired item is listed whatever partition is asked for.
    pub fn any_partition(mut self) -> Self {
        self.any_partition = true;
        self
    }

    /// Queries read an index that shows the table as it was `lag` ago (an eventually
    /// consistent GSI behind its table), not the table. The items written so far are in it.
    pub fn index_lag(mut self, lag: Duration) -> Self {
        let view = self.items.lock().unwrap().clone();
        let index = LaggingIndex {
            lag,
            view,
            pending: VecDeque::new(),
        };
        self.index = Some(Arc::new(Mutex::new(index)));
        self
    }

    /// Query call `call` lists item `id` again at the end of its page, with its ttl as the table
    /// holds it: as a GSI sorted by ttl lists an item whose ttl was rewritten, still expired,
    /// between two pages.
    pub fn list_again(self, call: usize, id: &str) -> Self {
        self.relist.lock().unwrap().push((call, id.into()));
        self
    }

    /// Pages hold `items` items, whatever limit a query asks for.
    pub fn page_size(mut self, items: usize) -> Self {
        self.page_size = Some(items);
        self
    }

    /// Every call of `op` takes `delay`.
    pub fn delay(mut self, op: Op, delay: Duration) -> Self {
        self.delays.insert(op, delay);
        self
    }

    pub fn fault(self, op: Op, when: When, fault: Fault) -> Self {
        self.faults.lock().unwrap().push((op, when, fault));
        self
    }

    /// Right after a `when` call of `op` (failed or not), the application changes item `id`.
    pub fn change(self, op: Op, when: When, id: &str, change: Change) -> Self {
        let entry = (op, when, (id.into(), change));
        self.changes.lock().unwrap().push(entry);
        self
    }

    pub fn cancel_on_lost(mut self, token: CancellationToken) -> Self {
        self.cancel_on_lost = Some(token);
        self
    }

    /// Another store over the same items, leases and delete log (another Region's endpoint onto
    /// one global table): its own layout, faults, delays and counts.
    pub fn sharing(&self, layout: Layout) -> MemStore {
        MemStore(Arc::new(Table {
            layout,
            items: self.items.clone(),
            leases: self.leases.clone(),
            log: self.log.clone(),
            any_partition: self.any_partition,
            epoch: self.epoch,
            ..Table::default()
        }))
    }

    /// The one lease item (the tests sweep one table), if any.
    pub fn lease(&self) -> Option<LeaseItem> {
        let leases = self.leases.lock().unwrap();
        assert!(leases.len() <= 1, "more than one lease item: {leases:?}");
        leases.values().next().cloned()
    }

    /// Writes lease item `id` as `lease`.
    pub fn set_lease(&self, id: &str, lease: LeaseItem) {
        self.leases.lock().unwrap().insert(id.into(), lease);
    }

    /// Every item removed by a delete is logged into `log`.
    pub fn log_to(mut self, log: Arc<Mutex<Vec<String>>>) -> Self {
        self.log = log;
        self
    }

    /// Cancels `token` once `queries` queries (counting those made so far) were made.
    pub fn stop_after_queries(&self, queries: usize, token: CancellationToken) {
        *self.stop_after.lock().unwrap() = Some((queries, token));
    }

    /// Faults of `op` still scripted (a `When::Key` fault goes once applied).
    pub fn faults_left(&self, op: Op) -> usize {
        let faults = self.faults.lock().unwrap();
        faults.iter().filter(|(o, ..)| *o == op).count()
    }

    /// The calls of `op` made so far.
    pub fn calls(&self, op: Op) -> usize {
        self.calls[op as usize].load(SeqCst)
    }

    /// The virtual wall clock (see [`MemStore::starting_at`]).
    pub fn clock(&self) -> f64 {
        self.epoch
            .map_or(0.0, |(t0, at)| t0 + at.elapsed().as_secs_f64())
    }

    /// The virtual wall clock as a sweep's or an indexer's: its milliseconds made whole by
    /// `whole` (`f64::round`, `f64::trunc`).
    pub fn clock_fn(
        &self,
        whole: fn(f64) -> f64,
    ) -> impl Fn() -> Timestamp + Send + Sync + 'static {
        let store = self.clone();
        move || Timestamp::from_millis(whole(store.clock() * 1000.0) as i64)
    }

    pub fn schema(&self) -> TableSchema {
        TableSchema {
            layout: self.layout.clone(),
            index: match self.index_table {
                true => Index::Table("sessions-expiry-index".into()),
                false => Index::Gsi("expirationWindowIndex".into()),
            },
            ..default_schema()
        }
    }

    /// The table is swept through an expiry index table of its own (`entries`), not a GSI: the
    /// schema names one, queries read its entries, and [`MemStore::put`] writes no entry (the
    /// test's indexer does).
    pub fn with_index_table(mut self) -> Self {
        self.index_table = true;
        self
    }

    /// The entries in the expiry index table.
    pub fn entry_count(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// What the expiry index table holds, read back: its entries, packs and cursors.
    pub fn index_contents(&self) -> super::table_io::IndexContents {
        let items = self.entries.lock().unwrap().values().cloned().collect();
        super::table_io::contents_of(items)
    }

    /// Writes the item `{id, ttl}`.
    pub fn put(&self, id: &str, ttl: f64) {
        let mut item = key(id);
        item.insert("ttl".into(), AV::N(ttl.to_string()));
        self.put_item(item);
    }

    /// Writes `n` items `<prefix>0`, `<prefix>1`..., item `i` with the ttl `ttl(i)`.
    pub fn put_n(&self, prefix: &str, n: i64, ttl: impl Fn(i64) -> i64) {
        (0..n).for_each(|i| self.put(&format!("{prefix}{i}"), ttl(i) as f64));
    }

    /// Writes a whole item (an `id` and a Number `ttl` at least).
    pub fn put_item(&self, item: Key) {
        let id = id_of(&item);
        let partition = self
            .layout
            .window_for(ttl_of(&item), &AV::S(id.clone()))
            .unwrap();
        let mut items = self.items.lock().unwrap();
        note(&self.index, &id, Some((partition.clone(), item.clone())));
        items.insert(id, (partition, item));
    }

    /// The application writes the items `ids` again with `ttl`, `after` from now.
    pub fn put_at(
        &self,
        after: Duration,
        ids: Vec<String>,
        ttl: f64,
    ) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            for id in &ids {
                store.put(id, ttl);
            }
        })
    }

    /// The application deletes the item `id` (its expiry index entry, if any, stays: the stream
    /// indexer writes nothing on a `REMOVE`).
    pub fn remove_item(&self, id: &str) {
        let mut items = self.items.lock().unwrap();
        if items.remove(id).is_some() {
            note(&self.index, id, None);
        }
    }

    pub fn has(&self, id: &str) -> bool {
        self.items.lock().unwrap().contains_key(id)
    }

    /// The ids of the items, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.items.lock().unwrap().keys().cloned().collect()
    }

    /// The items by id.
    pub fn items(&self) -> BTreeMap<String, Key> {
        let items = self.items.lock().unwrap();
        items
            .iter()
            .map(|(id, (_, i))| (id.clone(), i.clone()))
            .collect()
    }

    /// The test's writer of packs: the items `ids` as the table holds them now, packed by window
    /// partition and ttl (each pack due at its ttl), from `origin`. Answers the packs' sort keys.
    pub fn index_packed(&self, ids: &[&str], origin: &str) -> Vec<String> {
        use ttl_sweeper::store::packs::{self, PackEntry};
        let mut groups: BTreeMap<(String, i64), Vec<PackEntry>> = BTreeMap::new();
        for id in ids {
            let Some(item) = self.items.lock().unwrap().get(*id).map(|(_, i)| i.clone()) else {
                continue;
            };
            let ttl = ttl_of(&item);
            let window = self.layout.window_for(ttl, &item["id"]).unwrap();
            let entry = PackEntry {
                key: key(id),
                ttl: match &item["ttl"] {
                    AV::N(n) => n.clone(),
                    other => panic!("{other:?}"),
                },
            };
            let due = (ttl * 1000.0).floor() as i64;
            groups.entry((window, due)).or_default().push(entry);
        }
        let mut sorts = Vec::new();
        let mut index = self.entries.lock().unwrap();
        // As a writer does before its first pack: the writers' mark, if there is none, at the
        // earliest instant any of them could have been written (just before the first is due).
        let mark = (packs::CURSOR.to_owned(), "sessions".to_owned());
        if let Some(due) = groups.keys().map(|(_, due)| *due).min() {
            let at = Timestamp::from_millis(due - 1);
            index
                .entry(mark)
                .or_insert_with(|| packs::cursor_item("sessions", at, at));
        }
        for ((window, due), entries) in groups {
            for pack in packs::pack(&window, Timestamp::from_millis(due), origin, entries) {
                sorts.push(pack.sort.clone());
                index.insert((window.clone(), pack.sort.clone()), pack.to_item());
            }
        }
        sorts
    }

    /// The test's stream indexer: writes the entry of item `id` as the table holds it now (as
    /// its stream record would carry it), indexed at the store's virtual clock, from a record
    /// with sequence number `origin`. Nothing when the item is gone or its ttl is unusable.
    pub fn index(&self, id: &str, origin: &str) {
        let Some(item) = self.items.lock().unwrap().get(id).map(|(_, i)| i.clone()) else {
            return;
        };
        let now = Timestamp::from_millis((self.clock() * 1000.0) as i64);
        if let Some(entries::Indexing::Entry { entry, .. }) =
            entries::index_item(&self.schema(), &item, origin, now)
        {
            self.entries
                .lock()
                .unwrap()
                .insert((entry.window.clone(), entry.sort.clone()), entry.to_item());
        }
    }
}
