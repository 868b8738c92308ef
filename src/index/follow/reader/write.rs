//! The reader's writes: a batch of records indexed, the entries held back across batches written
//! into packs when due, and a shard's position moved past what is written.

use super::*;

impl<T: IndexTarget<Store: StreamPositions>, C: StreamRead> Reader<'_, T, C> {
    /// Indexes one batch of `shard`'s records, holding the shard at failed records until they
    /// are indexed or passed ([`index_batch`]), and moves the shard's position past what was
    /// handled. While held, the shard's age is that of its oldest record not yet indexed.
    pub(super) async fn index(&self, shard: &str, records: &[EventRecord]) {
        let (store, schema) = (self.target.store(), self.target.schema());
        // Cut after the shutdown's grace: the position stays before the records not handled,
        // read again after a restart (every write is conditional).
        // Items written already expired are deleted at once, through the target's delete path.
        // Entries are held on the first attempt only, and not from a backlog's records (read
        // more than `STALE_FOR_HOLD` after they were written: the stream keeps them 24 hours).
        // Once the batch is tried again (a record failed), what the first attempt held is written
        // with each attempt until it is, so that no entry waits on a failing record.
        let held_back = RefCell::new(Vec::new());
        let attempts = Cell::new(0u32);
        let stale = records
            .first()
            .is_some_and(|r| self.age_of(r) > STALE_FOR_HOLD.as_millis() as u64);
        let index = async |batch: &[EventRecord]| {
            let first = attempts.replace(attempts.get() + 1) == 0;
            let indexing = async {
                let after = match first && !stale {
                    true => self.gathered.borrow().hold_after(self.clock.latest()),
                    false => None,
                };
                let (mut indexed, held) =
                    index_records_holding(store, schema, self.clock, batch, after).await;
                let sequence = |at: usize| batch[at].change.sequence_number.clone();
                let held = held.into_iter().map(|(due, e, at)| (due, e, sequence(at)));
                held_back.borrow_mut().extend(held);
                if !first {
                    self.write_held_back(&held_back).await;
                }
                delete_expired(self.target, self.clock, &mut indexed, self.stop).await;
                indexed
            };
            self.stop.within_limits(indexing).await.ok()
        };
        let held = |oldest: &EventRecord| self.aged(shard, self.age_of(oldest));
        let report = &self.report;
        let handled = index_batch(shard, records, index, self.stop, report, held).await;
        if handled == records.len() {
            self.report.borrow_mut().batches += 1;
        }
        // The entries held back of the records handled, each record's once (a record tried
        // again may have held its entry twice).
        let handled = &records[..handled];
        let place: HashMap<&str, usize> = handled
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((r.change.sequence_number.as_deref()?, i)))
            .collect();
        let mut seen = HashSet::new();
        let held: Vec<_> = held_back
            .into_inner()
            .into_iter()
            .filter_map(|(due, e, sequence)| {
                let at = *place.get(sequence?.as_str())?;
                let once = seen.insert((at, key_to_json(&e.key).to_string(), e.ttl.clone()));
                once.then_some((due, e, at))
            })
            .collect();
        let mut gathered = self.gathered.borrow_mut();
        gathered.add(shard, handled, held, Instant::now());
        self.report.borrow_mut().entries_held = gathered.len() as u64;
        drop(gathered);
        self.advance(shard);
    }

    /// Writes the entries in `held_back` (held by a batch's first attempt, each with its due
    /// and its record's sequence number), keeping those not written for the next attempt.
    pub(super) async fn write_held_back(
        &self,
        held_back: &RefCell<Vec<(Timestamp, PackEntry, Option<String>)>>,
    ) {
        let pending = std::mem::take(&mut *held_back.borrow_mut());
        if pending.is_empty() {
            return;
        }
        let entries = (pending.iter().enumerate())
            .map(|(i, (due, e, _))| (*due, e.clone(), i))
            .collect();
        let (written, _) = self.write_packs(entries).await;
        let mut done = vec![false; pending.len()];
        for (_, tags, error) in written {
            if error.is_none() {
                tags.into_iter().for_each(|i| done[i] = true);
            }
        }
        let left = pending.into_iter().zip(done).filter(|(_, d)| !d);
        held_back.borrow_mut().extend(left.map(|(p, _)| p));
    }

    /// Writes `entries` (each due by its instant, tagged with its place) as packs, due no sooner
    /// than [`PACK_LEAD`] past the latest DynamoDB's clock may read, and counts the packs written
    /// into the report.
    pub(super) async fn write_packs(
        &self,
        entries: Vec<(Timestamp, PackEntry, usize)>,
    ) -> Grouped<usize> {
        let (store, schema) = (self.target.store(), self.target.schema());
        let soonest = self.clock.latest() + PACK_LEAD;
        let entries = (entries.into_iter())
            .map(|(due, e, i)| (due.max(soonest), e, i))
            .collect();
        let origin = format!("held-{:016x}", fastrand::u64(..));
        let (written, apart) =
            write_grouped(store, schema, self.clock, &origin, entries, CONCURRENCY).await;
        let mut report = self.report.borrow_mut();
        for (pack, _, _) in written.iter().filter(|(_, _, error)| error.is_none()) {
            report.index.packs_written += 1;
            report.index.entries_written += pack.entries.len() as u64;
        }
        (written, apart)
    }

    /// Writes `taken` (held entries, each with its due) as packs, due no sooner than
    /// [`PACK_LEAD`] past the latest DynamoDB's clock may read; what was written no longer holds
    /// its shard's position back, and what was not is held again, tried again after a backoff.
    pub(super) async fn write(&self, taken: Vec<(Timestamp, Held)>) {
        if taken.is_empty() {
            return;
        }
        let mut unparsed = Vec::new();
        let mut entries = Vec::with_capacity(taken.len());
        for (i, (due, held)) in taken.iter().enumerate() {
            match held.entry() {
                Some(entry) => entries.push((*due, entry, i)),
                None => unparsed.push(i),
            }
        }
        let writing = self.write_packs(entries);
        // Cut at the stop: held again, and their records read again after a restart.
        let (written, apart) = self.stop.within_limits(writing).await.unwrap_or_default();
        // Not keys of the table, or not parsed: nothing a sweep could delete.
        let dropped: Vec<usize> = apart.into_iter().map(|(_, i)| i).chain(unparsed).collect();
        if !dropped.is_empty() {
            tracing::error!(
                entries = dropped.len(),
                "held entries whose keys have no window were dropped"
            );
        }
        let mut ok: Vec<usize> = dropped;
        let mut error = None;
        let mut report = self.report.borrow_mut();
        for (pack, tags, failed) in written {
            match failed {
                None => ok.extend(tags),
                // Refused as invalid: never written, however often tried. Reported, and no
                // longer held (their items need `backfill`), as a record refused alone is.
                Some((ErrorKind::Validation, e)) => {
                    report.skipped_records += tags.len() as u64;
                    let keys: Vec<String> = pack
                        .entries
                        .iter()
                        .map(|e| key_to_json(&e.key).to_string())
                        .collect();
                    tracing::error!(error = %e, keys = ?keys, "a pack of held entries was refused as invalid; its items need `ttl-sweeper backfill`");
                    ok.extend(tags);
                }
                Some((_, e)) => error = Some(e),
            }
        }
        drop(report);
        let mut done = vec![false; taken.len()];
        for i in ok {
            done[i] = true;
        }
        let (written, failed): (Vec<_>, Vec<_>) =
            taken.into_iter().zip(done).partition(|(_, done)| *done);
        let mut gathered = self.gathered.borrow_mut();
        let moved = gathered.written(written.iter().map(|((_, h), _)| h));
        if !failed.is_empty() {
            let error = error.unwrap_or_else(|| "cut at the stop".into());
            tracing::warn!(
                entries = failed.len(),
                error,
                "held entries not written; held again and tried again"
            );
            gathered.failed(failed.into_iter().map(|(t, _)| t).collect(), Instant::now());
        }
        self.report.borrow_mut().entries_held = gathered.len() as u64;
        drop(gathered);
        for shard in moved {
            self.advance(&shard);
        }
    }

    /// Writes the entries `shard`'s records hold (its end was read), trying again until they
    /// are written; `false` at the stop with some not written.
    pub(super) async fn write_shard(&self, shard: &str) -> bool {
        let mut backoff = Backoff::new(READ_AGAIN);
        loop {
            let taken = self.gathered.borrow_mut().take_shard(shard);
            self.write(taken).await;
            if !self.gathered.borrow().holds(shard) {
                return true;
            }
            if self.stop.reached() {
                return false;
            }
            self.stop.sleep(backoff.wait()).await;
        }
    }

    /// Writes every entry held (the stop), within the shutdown's grace: what is not written is
    /// read again after a restart, the positions saved before its records.
    pub(in crate::index::follow) async fn write_held(&self) {
        let taken = self.gathered.borrow_mut().take_all();
        self.write(taken).await;
    }
}
