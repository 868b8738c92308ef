//! [`Store`] for [`MemStore`]: each call as DynamoDB answers it, with the faults, delays and
//! changes the test scripted.

use std::sync::atomic::Ordering::SeqCst;

use tokio::time::Instant;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    entries, packs, ConditionalOutcome, EntryWrite, ErrorKind, IndexerReport, Key, LeaseItem, Page,
    Store, StoreError, TableSchema,
};

use super::script::{take, Fault, Op, When};
use super::{entry_id, id_of, key, note, refuse_repeats, ttl_of, Change, Items, MemStore, AV};

impl MemStore {
    /// One page of the index table's items of `partition` (of every entry partition with
    /// `any_partition`) whose sort keys `sorts` takes, after `start`, at most `limit`; and where
    /// the next page starts.
    fn index_page(
        &self,
        partition: &str,
        sorts: impl Fn(&String) -> bool,
        start: Option<Key>,
        limit: usize,
    ) -> (Vec<Key>, Option<Key>) {
        let after = start.as_ref().map(entry_id);
        let mut listed: Vec<Key> = {
            let entries = self.entries.lock().unwrap();
            entries
                .iter()
                .filter(|((window, sort), _)| {
                    (self.any_partition && !window.starts_with('#') || window == partition)
                        && sorts(sort)
                        && after.as_ref().is_none_or(|a| (window, sort) > (&a.0, &a.1))
                })
                .take(limit.saturating_add(1))
                .map(|(_, item)| item.clone())
                .collect()
        };
        let next = (listed.len() > limit).then(|| {
            listed.truncate(limit);
            let (window, sort) = entry_id(listed.last().unwrap());
            entries::id(&window, &sort)
        });
        (listed, next)
    }

    /// [`Store::query_expired`] on the expiry index table (call `n`): a strongly consistent read
    /// of the entries of `partition` below the bound of `now`, as items with their entries.
    fn query_entries(
        &self,
        n: usize,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: usize,
    ) -> Page {
        let bound = entries::sort_bound(now);
        let (listed, next) = self.index_page(partition, |sort| *sort < bound, start, limit);
        let mut page = Page {
            next,
            ..Page::default()
        };
        let of_table = |e: Key| entries::listed(schema, e).expect("an entry of this table");
        (page.items, page.entries) = listed.into_iter().map(of_table).unzip();
        self.listed(n, &page.items);
        page
    }

    /// [`Store::query_expired`] of the packs of `partition` due from `since` to `now` (call
    /// `n`), as DynamoDB's `BETWEEN` on their sort keys reads them; each listing counted in
    /// `pack_reads`.
    fn query_packs(
        &self,
        n: usize,
        schema: &TableSchema,
        partition: &str,
        (since, now): (Timestamp, Timestamp),
        start: Option<Key>,
        limit: usize,
    ) -> Page {
        let mut page = Page {
            packed: true,
            ..Page::default()
        };
        if since >= now {
            self.listed(n, &[]);
            return page;
        }
        let (lo, hi) = packs::bounds(since, now);
        let between = |sort: &String| lo <= *sort && *sort <= hi;
        let (listed, next) = self.index_page(partition, between, start, limit);
        page.next = next;
        let mut reads = self.pack_reads.lock().unwrap();
        for item in listed {
            let pack = packs::Pack::from_item(&item).expect("a pack");
            *reads.entry(pack.sort.clone()).or_default() += 1;
            let items = packs::listed(schema, pack).expect("a pack of this table");
            page.items.extend(items);
        }
        drop(reads);
        self.listed(n, &page.items);
        page
    }

    /// Notes the `items` query `n` listed as listed now and held, then makes the changes after it.
    fn listed(&self, n: usize, items: &[Key]) {
        let mut at = self.listed_at.lock().unwrap();
        for item in items {
            at.insert(id_of(item), Instant::now());
        }
        drop(at);
        let count = items.len();
        let held = (self.outstanding.fetch_add(count, SeqCst)).wrapping_add(count);
        self.max_outstanding.fetch_max(held, SeqCst);
        self.after(Op::Query, n, None);
    }

    /// Counts the call, waits its delays, and answers for it if it fails or stalls; otherwise
    /// the call's number and the fault its body plays out.
    pub(super) async fn begin(
        &self,
        op: Op,
        id: Option<&str>,
    ) -> Result<(usize, Option<Fault>), StoreError> {
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
    pub(super) fn after(&self, op: Op, n: usize, id: Option<&str>) {
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
    pub(super) fn lost(&self, op: Op) -> StoreError {
        if let Some(token) = &self.cancel_on_lost {
            token.cancel();
        }
        StoreError::new(
            ErrorKind::Transient,
            op.name(),
            "timed out (injected by the test)",
        )
    }

    /// Makes the changes after call `n` of `op` (carrying item `id`), then answers `answer`, or
    /// a lost answer when the test scripted that (`fault`).
    pub(super) fn answer<T>(
        &self,
        op: Op,
        n: usize,
        id: Option<&str>,
        fault: Option<Fault>,
        answer: T,
    ) -> Result<T, StoreError> {
        self.after(op, n, id);
        match fault {
            Some(Fault::LoseAnswer) => Err(self.lost(op)),
            _ => Ok(answer),
        }
    }

    /// Removes item `id` as a delete of the sweep: the item, if it was there.
    pub(super) fn remove(&self, items: &mut Items, id: &str) -> Option<Key> {
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
        packs_since: Option<Timestamp>,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let (n, _) = self.begin(Op::Query, None).await?;
        let limit = self
            .page_size
            .unwrap_or(limit.map_or(usize::MAX, |l| l as usize));
        if let (true, Some(since)) = (schema.index.table().is_some(), packs_since) {
            return Ok(self.query_packs(n, schema, partition, (since, now), start, limit));
        }
        if schema.index.table().is_some() {
            return Ok(self.query_entries(n, schema, partition, now, start, limit));
        }
        let after = start.as_ref().map(id_of);
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
        self.listed(n, &page);
        Ok(Page {
            items: page,
            next,
            ..Page::default()
        })
    }

    async fn write_entries(
        &self,
        _: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        // `When::Key(id)` matches the first write of a pack listing item `id` first.
        let listed = writes.iter().find_map(|w| match w {
            EntryWrite::Put(item) => packs::Pack::from_item(item)
                .and_then(|pack| pack.entries.first().map(|e| id_of(&e.key))),
            EntryWrite::Remove(_) => None,
        });
        let (n, fault) = self.begin(Op::WriteEntries, listed.as_deref()).await?;
        if fault == Some(Fault::Unprocessed) {
            self.after(Op::WriteEntries, n, None);
            return Ok(writes);
        }
        {
            let mut entries = self.entries.lock().unwrap();
            for write in writes {
                match write {
                    EntryWrite::Put(item) => {
                        if let Some(pack) = packs::Pack::from_item(&item) {
                            let at = (self.clock() * 1000.0).round() as i64;
                            self.pack_puts.lock().unwrap().push((pack.sort, at));
                        }
                        entries.insert(entry_id(&item), item);
                    }
                    EntryWrite::Remove(id) => {
                        entries.remove(&entry_id(&id));
                    }
                }
            }
        }
        self.answer(Op::WriteEntries, n, None, fault, Vec::new())
    }

    /// The report, through its item as DynamoDB would keep it.
    async fn write_indexer_report(
        &self,
        _: &str,
        report: &IndexerReport,
    ) -> Result<(), StoreError> {
        let (n, fault) = self.begin(Op::WriteReport, None).await?;
        self.after(Op::WriteReport, n, None);
        if fault == Some(Fault::Unprocessed) {
            let message = "the report was left unprocessed (injected by the test)";
            return Err(StoreError::new(
                ErrorKind::Throttled,
                "BatchWriteItem",
                message,
            ));
        }
        let stored = IndexerReport::from_item(&report.to_item()).expect("a report reads back");
        let mut reports = self.reports.lock().unwrap();
        reports.insert(report.environment.clone(), stored);
        Ok(())
    }

    async fn read_indexer_reports(&self, _: &str) -> Result<Vec<IndexerReport>, StoreError> {
        let (n, _) = self.begin(Op::ReadReports, None).await?;
        self.after(Op::ReadReports, n, None);
        Ok(self.reports.lock().unwrap().values().cloned().collect())
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
        let unprocessed = self.answer(Op::BatchDelete, n, None, fault, unprocessed)?;
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
        self.answer(Op::Delete, n, Some(&id), fault, answer)
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

    /// One table per store: nothing to claim against.
    async fn read_pending(
        &self,
        _: &TableSchema,
        due: Timestamp,
        limit: i32,
    ) -> Result<Vec<Key>, StoreError> {
        let (n, _) = self.begin(Op::ReadPending, None).await?;
        let bound = entries::sort_bound(due);
        let listed = (self.entries.lock().unwrap().iter())
            .filter(|((window, sort), _)| window == entries::PENDING && *sort < bound)
            .take(limit.max(1) as usize)
            .map(|(_, item)| item.clone())
            .collect();
        self.after(Op::ReadPending, n, None);
        Ok(listed)
    }

    async fn read_cursor(
        &self,
        _: &TableSchema,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        let (n, fault) = self.begin(Op::ReadCursor, None).await?;
        let key = (packs::CURSOR.to_owned(), id.to_owned());
        let through = self
            .entries
            .lock()
            .unwrap()
            .get(&key)
            .and_then(packs::cursor_of);
        self.after(Op::ReadCursor, n, None);
        if let Some(Fault::AnswerLate(late)) = fault {
            tokio::time::sleep(late).await;
        }
        Ok(through)
    }

    async fn mark_packs(&self, schema: &TableSchema, at: Timestamp) -> Result<(), StoreError> {
        let (n, fault) = self.begin(Op::MarkPacks, None).await?;
        let item = packs::cursor_item(&schema.table_name, at, at);
        self.entries
            .lock()
            .unwrap()
            .entry(entry_id(&item))
            .or_insert(item);
        self.answer(Op::MarkPacks, n, None, fault, ())
    }

    async fn claim_index_table(&self, _: &TableSchema) -> Result<(), StoreError> {
        Ok(())
    }
}
