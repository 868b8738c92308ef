//! The tests' one in-memory [`Store`]: a table of items keyed by a String `id`, each listed
//! under its index partition, whose calls can be made slow (Tokio time: instant under
//! `tokio::time::pause()`), fail, stall, lose their answer or land late; whose items the
//! "application" can rewrite after a call or at an instant; and which counts its calls and
//! records what it was sent.

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
    entries, ConditionalOutcome, EntryWrite, ErrorKind, Key, LeaseItem, Page, Store, StoreError,
    TableSchema,
};

/// One operation of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Query,
    BatchDelete,
    /// The conditional `DeleteItem`.
    Delete,
    Get,
    ReadCheckpoint,
    AdvanceCheckpoint,
    /// The leader lease's `GetItem`.
    ReadLease,
    /// The leader lease's conditional `UpdateItem`.
    WriteLease,
    /// The conditional `UpdateItem` giving the leader lease up.
    ReleaseLease,
    /// A `BatchWriteItem` of expiry index entries (puts and removals).
    WriteEntries,
}

impl Op {
    pub const ALL: [Op; 10] = [
        Op::Query,
        Op::BatchDelete,
        Op::Delete,
        Op::Get,
        Op::ReadCheckpoint,
        Op::AdvanceCheckpoint,
        Op::ReadLease,
        Op::WriteLease,
        Op::ReleaseLease,
        Op::WriteEntries,
    ];

    /// The DynamoDB operation's name.
    fn name(self) -> &'static str {
        match self {
            Op::Query => "Query",
            Op::BatchDelete | Op::WriteEntries => "BatchWriteItem",
            Op::Delete => "DeleteItem",
            Op::Get => "BatchGetItem",
            Op::ReadCheckpoint | Op::ReadLease => "GetItem",
            Op::AdvanceCheckpoint | Op::WriteLease | Op::ReleaseLease => "UpdateItem",
        }
    }
}

/// Which calls of an operation a fault or a change applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// The n-th call, from 1.
    Call(usize),
    /// The first n calls.
    First(usize),
    Always,
    /// The first call that carries the item with this `id` (once).
    Key(String),
}

impl When {
    fn matches(&self, n: usize, id: Option<&str>) -> bool {
        match self {
            When::Call(c) => *c == n,
            When::First(m) => n <= *m,
            When::Always => true,
            When::Key(k) => Some(k.as_str()) == id,
        }
    }
}

/// What happens to a call. Several may apply to one call: a `Delay` and one other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// The call takes this much longer (on top of the operation's delay).
    Delay(Duration),
    /// An error of this kind, the table untouched.
    Fail(ErrorKind),
    /// The call is applied, then answers a transient error: its answer was lost.
    LoseAnswer,
    /// A transient error at once; the `BatchWriteItem`'s deletes land this much later.
    LandLate(Duration),
    /// The call never answers.
    Stall,
    /// `BatchWriteItem`: the keys are left unprocessed (with `When::Key`, that key only).
    Unprocessed,
    /// `BatchWriteItem`: only the first key is deleted, the others left unprocessed.
    AllButFirstUnprocessed,
    /// `BatchWriteItem`: the first key is left unprocessed and named unlike any key sent.
    RenameUnprocessed,
}

/// What the application does to an item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Writes the item again with this ttl (in the partition of that ttl).
    Put(f64),
    /// Gives the item this ttl if it is still there.
    Extend(f64),
    /// Deletes the item.
    Remove,
}

/// What applies to which calls of which operation.
type Script<T> = Mutex<Vec<(Op, When, T)>>;

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

/// The in-memory table. Build it with [`MemStore::new`] and the methods that follow it.
#[derive(Default)]
pub struct MemStore {
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
    calls: [AtomicUsize; 10],
    /// The expiry index table's entries by (window, sort key), when the schema names one
    /// ([`MemStore::with_index_table`]): queries read it instead of a GSI.
    pub entries: Arc<Mutex<BTreeMap<(String, String), Key>>>,
    /// Queries read the expiry index table (`entries`).
    index_table: bool,
    /// The virtual wall clock's epoch seconds at the instant the store was made.
    epoch: Option<(f64, Instant)>,
    /// Items removed by a delete of the sweep.
    pub deleted: AtomicUsize,
    /// `deleted <id>` for every item removed by a delete of the sweep.
    pub log: Arc<Mutex<Vec<String>>>,
    /// When each `BatchWriteItem` was sent, with the keys it deleted.
    pub batch_calls: Mutex<Vec<(Instant, Vec<String>)>>,
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
}

/// The schema of the tests' `sessions` table (String key `id`, the sweeper's default index) with
/// the default layout, as a [`MemStore`] of the default layout has it.
pub fn default_schema() -> TableSchema {
    TableSchema {
        table_name: "sessions".into(),
        index_name: "expirationWindowIndex".into(),
        index_table: None,
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

/// A sweeper over the in-memory table `store` (a [`MemStore`] or an `Arc` of one), with its
/// schema and `options`.
pub fn mem_sweeper<S: Store + AsRef<MemStore>>(store: S, options: SweepOptions) -> Sweeper<S> {
    let schema = store.as_ref().schema();
    Sweeper::new(store, schema, options)
}

/// The entries of `list` for `op` that apply to a call (`hit`), taking those that apply once.
fn take<T: Clone>(list: &Script<T>, op: Op, hit: impl Fn(&When) -> bool) -> Vec<T> {
    let mut taken = vec![];
    list.lock().unwrap().retain(|(o, when, entry)| {
        let applies = *o == op && hit(when);
        if applies {
            taken.push(entry.clone());
        }
        !(applies && matches!(when, When::Key(_)))
    });
    taken
}

impl MemStore {
    pub fn new(layout: Layout) -> Self {
        let store = MemStore::default();
        MemStore { layout, ..store }
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
        MemStore {
            layout,
            items: self.items.clone(),
            leases: self.leases.clone(),
            log: self.log.clone(),
            any_partition: self.any_partition,
            epoch: self.epoch,
            ..MemStore::default()
        }
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
    pub fn log_to(self, log: Arc<Mutex<Vec<String>>>) -> Self {
        MemStore { log, ..self }
    }

    /// Cancels `token` once `queries` queries (counting those made so far) were made.
    pub fn stop_after_queries(&self, queries: usize, token: CancellationToken) {
        *self.stop_after.lock().unwrap() = Some((queries, token));
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

    pub fn schema(&self) -> TableSchema {
        TableSchema {
            layout: self.layout.clone(),
            index_table: self.index_table.then(|| "sessions-expiry-index".into()),
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

    /// Writes the item `{id, ttl}`.
    pub fn put(&self, id: &str, ttl: f64) {
        let mut item = key(id);
        item.insert("ttl".into(), AV::N(ttl.to_string()));
        self.put_item(item);
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
        self: &Arc<Self>,
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

    /// [`Store::query_expired`] on the expiry index table: a strongly consistent read of the
    /// entries of `partition` below the bound of `now`, as items with their entries.
    async fn query_entries(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let (n, _) = self.begin(Op::Query, None).await?;
        let bound = entries::sort_bound(now);
        let after = start.as_ref().map(entry_id);
        let limit = self
            .page_size
            .unwrap_or(limit.map_or(usize::MAX, |l| l as usize));
        let mut listed: Vec<Key> = {
            let entries = self.entries.lock().unwrap();
            entries
                .iter()
                .filter(|((window, sort), _)| {
                    (self.any_partition || window == partition)
                        && *sort < bound
                        && after.as_ref().is_none_or(|a| (window, sort) > (&a.0, &a.1))
                })
                .take(limit.saturating_add(1))
                .map(|(_, entry)| entry.clone())
                .collect()
        };
        let next = (listed.len() > limit).then(|| {
            listed.truncate(limit);
            let (window, sort) = entry_id(listed.last().unwrap());
            entries::id(&window, &sort)
        });
        let mut page = Page {
            next,
            ..Page::default()
        };
        let mut at = self.listed_at.lock().unwrap();
        for entry in listed {
            let (item, id) = entries::listed(schema, entry).expect("an entry of this table");
            at.insert(id_of(&item), Instant::now());
            page.items.push(item);
            page.entries.push(id);
        }
        drop(at);
        let held =
            (self.outstanding.fetch_add(page.items.len(), SeqCst)).wrapping_add(page.items.len());
        self.max_outstanding.fetch_max(held, SeqCst);
        self.after(Op::Query, n, None);
        Ok(page)
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

    /// Counts the call, waits its delays, and answers for it if it fails or stalls; otherwise
    /// the call's number and the fault its body plays out.
    async fn begin(&self, op: Op, id: Option<&str>) -> Result<(usize, Option<Fault>), StoreError> {
        let n = self.calls[op as usize].fetch_add(1, SeqCst) + 1;
        let faults = take(&self.faults, op, |w| w.matches(n, id));
        let delay = faults.iter().fold(
            self.delays.get(&op).copied().unwrap_or_default(),
            |d, f| match f {
                Fault::Delay(more) => d + *more,
                _ => d,
            },
        );
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match faults.into_iter().find(|f| !matches!(f, Fault::Delay(_))) {
            Some(Fault::Stall) => std::future::pending().await,
            Some(Fault::Fail(kind)) => {
                self.after(op, n, id);
                Err(StoreError::new(kind, op.name(), "injected by the test"))
            }
            fault => Ok((n, fault)),
        }
    }

    /// The application's changes after call `n` of `op` (carrying item `id`).
    fn after(&self, op: Op, n: usize, id: Option<&str>) {
        for (id, change) in take(&self.changes, op, |w| w.matches(n, id)) {
            match change {
                Change::Put(ttl) => self.put(&id, ttl),
                Change::Extend(ttl) if self.has(&id) => self.put_item({
                    let mut item = self.items()[&id].clone();
                    item.insert("ttl".into(), AV::N(ttl.to_string()));
                    item
                }),
                Change::Extend(_) => {}
                Change::Remove => {
                    let mut items = self.items.lock().unwrap();
                    note(&self.index, &id, None);
                    items.remove(&id);
                }
            }
        }
    }

    /// A lost answer: a transient error, and the stop.
    fn lost(&self, op: Op) -> StoreError {
        if let Some(token) = &self.cancel_on_lost {
            token.cancel();
        }
        StoreError::new(
            ErrorKind::Transient,
            op.name(),
            "timed out (injected by the test)",
        )
    }

    /// Removes item `id` as a delete of the sweep: the item, if it was there.
    fn remove(&self, items: &mut Items, id: &str) -> Option<Key> {
        let (_, item) = items.remove(id)?;
        note(&self.index, id, None);
        self.deleted.fetch_add(1, SeqCst);
        self.log.lock().unwrap().push(format!("deleted {id}"));
        Some(item)
    }
}

impl Store for MemStore {
    async fn query_expired(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        if schema.index_table.is_some() {
            return self
                .query_entries(schema, partition, now, start, limit)
                .await;
        }
        let (n, _) = self.begin(Op::Query, None).await?;
        let after = start.as_ref().map(id_of);
        let limit = self
            .page_size
            .unwrap_or(limit.map_or(usize::MAX, |l| l as usize));
        let listing = |items: &Items| -> Vec<Key> {
            items
                .iter()
                .filter(|(id, (p, i))| {
                    (self.any_partition || p == partition)
                        && ttl_of(i) < now.as_secs_f64()
                        && after.as_ref().is_none_or(|a| *id > a)
                })
                .take(limit.saturating_add(1))
                .map(|(id, (_, i))| {
                    let mut k = key(id);
                    k.insert("ttl".into(), i["ttl"].clone());
                    k
                })
                .collect()
        };
        let mut page = match &self.index {
            Some(index) => {
                let mut index = index.lock().unwrap();
                index.catch_up();
                listing(&index.view)
            }
            None => listing(&self.items.lock().unwrap()),
        };
        let next = (page.len() > limit).then(|| {
            page.truncate(limit);
            key(&id_of(page.last().unwrap()))
        });
        let again: Vec<String> = {
            let mut relist = self.relist.lock().unwrap();
            let again = relist
                .iter()
                .filter(|(c, _)| *c == n)
                .map(|(_, id)| id.clone())
                .collect();
            relist.retain(|(c, _)| *c != n);
            again
        };
        for id in again {
            if let Some((_, item)) = self.items.lock().unwrap().get(&id) {
                let mut k = key(&id);
                k.insert("ttl".into(), item["ttl"].clone());
                page.push(k);
            }
        }
        if let Some((after, token)) = &*self.stop_after.lock().unwrap() {
            if n >= *after {
                token.cancel();
            }
        }
        let mut listed = self.listed_at.lock().unwrap();
        for k in &page {
            listed.insert(id_of(k), Instant::now());
        }
        let held = (self.outstanding.fetch_add(page.len(), SeqCst)).wrapping_add(page.len());
        self.max_outstanding.fetch_max(held, SeqCst);
        self.after(Op::Query, n, None);
        Ok(Page {
            items: page,
            next,
            entries: Vec::new(),
        })
    }

    async fn write_entries(
        &self,
        _: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        let (n, fault) = self.begin(Op::WriteEntries, None).await?;
        if fault == Some(Fault::Unprocessed) {
            self.after(Op::WriteEntries, n, None);
            return Ok(writes);
        }
        {
            let mut entries = self.entries.lock().unwrap();
            for write in writes {
                match write {
                    EntryWrite::Put(item) => {
                        entries.insert(entry_id(&item), item);
                    }
                    EntryWrite::Remove(id) => {
                        entries.remove(&entry_id(&id));
                    }
                }
            }
        }
        self.after(Op::WriteEntries, n, None);
        if fault == Some(Fault::LoseAnswer) {
            return Err(self.lost(Op::WriteEntries));
        }
        Ok(Vec::new())
    }

    async fn batch_delete(&self, _: &TableSchema, keys: &[&Key]) -> Result<Vec<Key>, StoreError> {
        refuse_repeats(keys.iter().copied(), Op::BatchDelete)?;
        {
            let listed = self.listed_at.lock().unwrap();
            let mut max = self.max_sent_age.lock().unwrap();
            for k in keys {
                *max = (*max).max(listed[&id_of(k)].elapsed());
            }
        }
        let sent = Instant::now();
        let (n, fault) = self.begin(Op::BatchDelete, None).await?;
        let owned = |keys: &[&Key]| keys.iter().map(|&k| k.clone()).collect::<Vec<Key>>();
        let (mut apply, mut unprocessed) = match fault {
            Some(Fault::LandLate(after)) => {
                let (items, index) = (self.items.clone(), self.index.clone());
                let ids: Vec<String> = keys.iter().map(|&k| id_of(k)).collect();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let mut items = items.lock().unwrap();
                    for id in ids {
                        if items.remove(&id).is_some() {
                            note(&index, &id, None);
                        }
                    }
                });
                return Err(self.lost(Op::BatchDelete));
            }
            Some(Fault::Unprocessed) => (vec![], owned(keys)),
            Some(Fault::AllButFirstUnprocessed) if keys.len() > 1 => {
                (owned(&keys[..1]), owned(&keys[1..]))
            }
            Some(Fault::RenameUnprocessed) => {
                let mut named = keys[0].clone();
                named.insert("id".into(), AV::S(format!("{} ", id_of(keys[0]))));
                (owned(&keys[1..]), vec![named])
            }
            _ => (owned(keys), vec![]),
        };
        apply.retain(|k| {
            let keep = !take(&self.faults, Op::BatchDelete, |w| *w == When::Key(id_of(k)))
                .contains(&Fault::Unprocessed);
            if !keep {
                unprocessed.push(k.clone());
            }
            keep
        });
        let ids: Vec<String> = apply.iter().map(id_of).collect();
        self.batch_calls.lock().unwrap().push((sent, ids.clone()));
        let clock = self.clock();
        let mut items = self.items.lock().unwrap();
        for id in ids {
            match self.remove(&mut items, &id) {
                Some(item) if self.epoch.is_some() && ttl_of(&item) >= clock => {
                    self.destroyed_live.lock().unwrap().push(id)
                }
                _ => {}
            }
        }
        drop(items);
        self.after(Op::BatchDelete, n, None);
        if fault == Some(Fault::LoseAnswer) {
            return Err(self.lost(Op::BatchDelete));
        }
        self.outstanding.fetch_sub(apply.len(), SeqCst);
        Ok(unprocessed)
    }

    async fn delete_if_expired(
        &self,
        _: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        let id = id_of(&key);
        let (n, fault) = self.begin(Op::Delete, Some(&id)).await?;
        self.outstanding.fetch_sub(1, SeqCst);
        let mut items = self.items.lock().unwrap();
        let answer = match items.get(&id) {
            None => (ConditionalOutcome::Gone, None),
            Some((_, i)) if ttl_of(i) < now.as_secs_f64() && ttl.parse() == Ok(ttl_of(i)) => (
                ConditionalOutcome::Deleted,
                self.remove(&mut items, &id)
                    .filter(|_| return_item)
                    .inspect(|_| {
                        let returned = self.items_returned.fetch_add(1, SeqCst) + 1;
                        let held = returned - self.items_published.load(SeqCst);
                        self.max_items_held.fetch_max(held, SeqCst);
                    }),
            ),
            Some(_) => (ConditionalOutcome::Kept, None),
        };
        drop(items);
        self.after(Op::Delete, n, Some(&id));
        if fault == Some(Fault::LoseAnswer) {
            return Err(self.lost(Op::Delete));
        }
        Ok(answer)
    }

    async fn get_items(
        &self,
        _: &TableSchema,
        keys: Vec<Key>,
        _: bool,
    ) -> Result<Vec<Key>, StoreError> {
        refuse_repeats(keys.iter(), Op::Get)?;
        // DynamoDB may read the items as soon as the request arrives and answer only after the
        // call's delay: read here, at the request, so a caller that dates its read by the answer
        // is caught sending keys older than it thinks.
        let read_at = Instant::now();
        let found: Vec<(String, Key)> = {
            let items = self.items.lock().unwrap();
            keys.iter()
                .filter_map(|k| Some((id_of(k), items.get(&id_of(k))?.1.clone())))
                .collect()
        };
        let (n, _) = self.begin(Op::Get, None).await?;
        let mut listed = self.listed_at.lock().unwrap();
        // A strongly consistent read of the item is a read too.
        let mut table_read = self.table_read_at.lock().unwrap();
        found.iter().for_each(|(id, _)| {
            listed.insert(id.clone(), read_at);
            table_read.insert(id.clone(), read_at);
        });
        drop((listed, table_read));
        self.after(Op::Get, n, None);
        Ok(found.into_iter().map(|(_, item)| item).collect())
    }

    async fn read_checkpoint(&self, _: &str, _: &str) -> Result<Option<Timestamp>, StoreError> {
        self.begin(Op::ReadCheckpoint, None).await?;
        Ok(*self.checkpoint.lock().unwrap())
    }

    async fn advance_checkpoint(
        &self,
        _: &str,
        _: &str,
        to: Timestamp,
        _: Timestamp,
    ) -> Result<bool, StoreError> {
        self.begin(Op::AdvanceCheckpoint, None).await?;
        let mut cp = self.checkpoint.lock().unwrap();
        let moved = cp.is_none_or(|c| to > c);
        if moved {
            *cp = Some(to);
        }
        Ok(moved)
    }

    async fn read_lease(&self, _: &str, id: &str) -> Result<Option<LeaseItem>, StoreError> {
        self.begin(Op::ReadLease, None).await?;
        Ok(self.leases.lock().unwrap().get(id).cloned())
    }

    /// The conditional `UpdateItem`, evaluated on the item as it stands when the call lands.
    async fn write_lease(
        &self,
        _: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> Result<bool, StoreError> {
        self.begin(Op::WriteLease, None).await?;
        let mut leases = self.leases.lock().unwrap();
        let accepted = leases.get(id).is_none_or(|l| {
            (l.holder == lease.holder && !l.released) || l.expires_at < lapsed_before
        });
        if accepted {
            let lease = LeaseItem {
                released: false,
                ..lease.clone()
            };
            leases.insert(id.into(), lease);
        }
        Ok(accepted)
    }

    /// The conditional `UpdateItem` marking the lease given up, if `holder` holds it.
    async fn release_lease(&self, _: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        self.begin(Op::ReleaseLease, None).await?;
        let mut leases = self.leases.lock().unwrap();
        match leases.get_mut(id) {
            Some(l) if l.holder == holder => {
                l.released = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
