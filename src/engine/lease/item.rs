//! [`Item`]: one lease item, as one holder takes, renews, watches and gives it up.

use super::*;

pub(super) struct Item {
    pub(super) config: LeaseConfig,
    time: Arc<dyn ServerTime>,
    /// The host's wall clock, read only to notice a pause the monotonic clock missed.
    wall: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl Item {
    pub(super) fn new(
        config: LeaseConfig,
        time: Arc<dyn ServerTime>,
        wall: Arc<dyn Clock>,
    ) -> Self {
        Item {
            config,
            time,
            wall,
            state: Mutex::default(),
        }
    }

    /// Why a holder in `state` gives the lease up at `now`, counting the health of the
    /// sweeper's `index` if given, and since when: its reads or deletes, or its index, unsound
    /// for a lease.
    fn unsound(
        &self,
        state: &State,
        index: Option<&IndexHealth>,
        now: Instant,
    ) -> Option<(Instant, Unsound)> {
        let sweeps = (state.failing.since()).map(|since| (since, Unsound::Sweeps));
        // Counted from the take: a Region that took the lease with its index behind (no other
        // Region took it) holds it a lease before it gives it up.
        let behind = index.and_then(IndexHealth::behind_since);
        let behind = behind.map(|since| (since.max(state.taken.unwrap_or(since)), Unsound::Index));
        [sweeps, behind]
            .into_iter()
            .flatten()
            .filter(|(since, _)| now.saturating_duration_since(*since) >= self.config.duration)
            .min_by_key(|(since, _)| *since)
    }

    /// [`Lease::check`], of this item, counting the health of the sweeper's `index` if given.
    pub(super) async fn check<S: Store>(
        &self,
        store: &S,
        stop: &Stop,
        index: Option<Index<'_>>,
    ) -> LeaseCheck {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let health = index.map(|i| i.health);
        if let Some(held) = state.held {
            // The stream indexer's reports, read at each renewal and before giving the lease up
            // for what they said when last read.
            let renew_after = held.until.saturating_duration_since(held.sent) / 2;
            let due = now.saturating_duration_since(held.sent) >= renew_after;
            let for_index = matches!(self.unsound(&state, health, now), Some((_, Unsound::Index)));
            if let Some(index) = index.filter(|_| due || for_index) {
                index.read(store, stop, &*self.time).await;
            }
            if let Some((since, why)) = self.unsound(&state, health, now) {
                return self
                    .release(&mut state, store, stop, held, (since, why))
                    .await;
            }
        }
        if let Some(held) = state.held {
            let mono = now.saturating_duration_since(held.sent);
            let wall = u64::try_from(self.wall.now().millis_since(held.wall_sent))
                .ok()
                .map(Duration::from_millis);
            let paused = missed_a_pause(mono, wall);
            if paused {
                warn!(
                    monotonic_ms = mono.as_millis() as u64,
                    wall_ms = wall.unwrap_or_default().as_millis() as u64,
                    "the host was paused while holding the lease: confirming it before sweeping"
                );
                state.held = None;
            }
            let renew_after = held.until.saturating_duration_since(held.sent) / 2;
            if !paused && now < held.until && mono < renew_after {
                return self.leading(&mut state, held.until, false);
            }
            match self.write(store, stop).await {
                Ok(Some(renewed)) => {
                    state.held = Some(renewed);
                    return self.leading(&mut state, renewed.until, false);
                }
                Ok(None) => {
                    warn!(holder = %self.config.holder, "lost the lease");
                    state.lose();
                }
                Err(e) if !paused && Instant::now() < held.until => {
                    warn!(error = %e, "could not renew the lease; leading until it runs out");
                    return self.leading(&mut state, held.until, false);
                }
                Err(e) => {
                    warn!(error = %e, "lost the lease: it ran out while it could not be renewed");
                    state.lose();
                    return self.standing_by(&mut state, Some(e));
                }
            }
        }
        // Not read again before the next poll; nor, once given up, before the backoff ends.
        if [state.next_read, state.backoff_until]
            .iter()
            .flatten()
            .any(|at| now < *at)
        {
            return self.standing_by(&mut state, None);
        }
        let watch_from = Instant::now();
        loop {
            let read = store.read_lease(&self.config.table, &self.config.id);
            let item = match stop.bound("GetItem", read).await {
                Ok(item) => item,
                Err(e) => {
                    state.next_read = Some(Instant::now() + self.poll());
                    return self.standing_by(&mut state, Some(e));
                }
            };
            let lower = self.time.lower_bound();
            let (me, layout) = (&self.config.holder, &self.config.layout);
            let mut decision = decide(item.as_ref(), &self.config, lower);
            let lapsed = matches!(decision, Decision::Take { from: Some(_), .. });
            if let Some(index) = index.filter(|_| lapsed) {
                index.read(store, stop, &*self.time).await;
            }
            let lags = health.is_some_and(|i| i.lags(Instant::now(), self.config.duration));
            if lags && lapsed {
                decision = defer(decision, item.as_ref(), &self.config, lower);
                let deferred = match &decision {
                    Decision::StandBy { until, .. } => Some(*until),
                    Decision::Take { .. } => None,
                };
                let logged = std::mem::replace(&mut state.deferred, deferred) == deferred;
                if let (Decision::StandBy { holder, until, .. }, false) = (&decision, logged) {
                    let behind_s = health
                        .and_then(IndexHealth::behind_since)
                        .map_or(0.0, |since| since.elapsed().as_secs_f64());
                    warn!(holder = %holder, until = %until, behind_s, "IndexLagging: this Region's stream indexer has left records unindexed for {behind_s:.1} s: leaving the lease {holder} let lapse to a Region whose index is current, until {until}");
                }
            }
            let (holder, until, other_layout) = match decision {
                Decision::Take { from, other_layout } => {
                    if let (Some(from), Some(theirs)) = (&from, &other_layout) {
                        let unlike = rules::unlike(theirs, layout);
                        warn!(holder = %me, from = %from, layout = %layout, their_layout = %theirs, "taking a lapsed lease that {from} held with {unlike}: check that every Region's sweeper of the table is configured alike");
                    }
                    return self.take(&mut state, store, stop, from).await;
                }
                Decision::StandBy {
                    holder,
                    until,
                    other_layout,
                } => (holder, until, other_layout),
            };
            if let Some(theirs) = &other_layout {
                let unlike = rules::unlike(theirs, layout);
                error!(holder = %holder, until = %until, layout = %layout, their_layout = %theirs, "LeaseLayoutMismatch: {holder} holds the lease with {unlike}; not sweeping beside it: configure every Region's sweeper of the table alike (the same WINDOW_SHARDS and SHARD_RANGE split)");
            }
            state.seen = Some(LeaseItem {
                holder,
                expires_at: until,
                layout: other_layout,
                released: item.is_some_and(|i| i.released),
            });
            // When the lease may lapse within the resolution of DynamoDB's clock, watch it
            // (`LEASE_WATCH`, docs/global-tables.md); otherwise read again a fifth of the lease
            // on, or once the lease looks lapsed if sooner.
            let lapses_in = lower
                .map(|lower| until.millis_since(lower).max(0) as u64 + 1)
                .map(Duration::from_millis);
            let watching = lapses_in.is_some_and(|l| l <= LEASE_WATCH)
                && watch_from.elapsed() < LEASE_WATCH + WATCH_EVERY
                && !stop.would_pass(WATCH_EVERY);
            if watching && stop.sleep(WATCH_EVERY).await {
                continue;
            }
            let wait = lapses_in.map_or(self.poll(), |l| l.min(self.poll()));
            state.next_read = Some(Instant::now() + wait);
            return self.standing_by(&mut state, None);
        }
    }

    /// Takes the lease, lapsed `from` its holder (`None`: nobody held it, or we did).
    async fn take<S: Store>(
        &self,
        state: &mut State,
        store: &S,
        stop: &Stop,
        from: Option<String>,
    ) -> LeaseCheck {
        match self.write(store, stop).await {
            Ok(Some(held)) => {
                let from = from.as_deref().unwrap_or("nobody");
                info!(holder = %self.config.holder, from, "took the lease from {from}");
                state.held = Some(held);
                state.failing = Failing::default();
                state.taken = Some(held.sent);
                state.backoff_until = None;
                state.seen = None;
                self.leading(state, held.until, true)
            }
            // Another sweeper took it first, or the write failed: read it again at the next poll.
            refused => {
                state.next_read = Some(Instant::now() + self.poll());
                self.standing_by(state, refused.err())
            }
        }
    }

    /// Gives the lease up: its reads or its deletes have failed since `since`, a lease ago or
    /// more, with no success since. This sweeper stops leading at once and marks the item given
    /// up (`released`, conditionally on its holder still being us), which stops the renewals of
    /// every invocation of this deployment (they share the holder name); its expiry stays as
    /// written, so that nothing sent under a hold this deployment was granted can meet another
    /// Region's deletes. The other Regions' standbys take it when it lapses; this sweeper does
    /// not take it again before a lease has passed since then (`backoff_until`, and [`decide`]
    /// for the deployment's other invocations).
    async fn release<S: Store>(
        &self,
        state: &mut State,
        store: &S,
        stop: &Stop,
        held: Held,
        (since, why): (Instant, Unsound),
    ) -> LeaseCheck {
        let unsound = Instant::now().saturating_duration_since(since);
        state.lose();
        // The hold ends `LEASE_MARGIN` (and the bounds' width) before the lease lapses: a lease
        // after that lapse.
        let backoff_until = held.until + LEASE_MARGIN + self.config.duration;
        state.backoff_until = Some(backoff_until);
        let (table, id, me) = (&self.config.table, &self.config.id, &self.config.holder);
        let released = stop
            .bound("UpdateItem", store.release_lease(table, id, me))
            .await;
        let unsound_s = unsound.as_secs_f64();
        let why = why.saying(unsound_s);
        let backoff_s = backoff_until
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let error = match released {
            Ok(true) => {
                warn!(holder = %me, unsound_s, backoff_s, "LeaseReleased: gave the lease up: {why} (the lease's length); it lapses as written and another Region's sweeper takes it; not taking it again for {backoff_s:.1} s");
                None
            }
            Ok(false) => {
                warn!(holder = %me, unsound_s, "LeaseReleased: gave the lease up ({why}), but the lease was no longer ours");
                None
            }
            Err(e) => {
                warn!(holder = %me, unsound_s, backoff_s, error = %e, "LeaseReleased: gave the lease up ({why}) but could not mark it given up; not renewed, it lapses as written; not taking it again for {backoff_s:.1} s");
                Some(e)
            }
        };
        Err(NotLeading {
            error,
            released: true,
            ..NotLeading::default()
        })
    }

    /// [`Lease::swept`], for this item.
    pub(super) async fn swept(&self, health: SweepHealth) {
        let mut state = self.state.lock().await;
        if state.held.is_some() {
            state.failing.record(health, Instant::now());
        }
    }

    /// How often a standby reads the lease at most: a fifth of it.
    fn poll(&self) -> Duration {
        self.config.duration / 5
    }

    /// Takes or renews the lease: the hold it gives, `None` if the condition refused it.
    async fn write<S: Store>(&self, store: &S, stop: &Stop) -> Result<Option<Held>, StoreError> {
        // The send instant first: the bounds read after it are ones on DynamoDB's clock then.
        let (sent, wall_sent) = (Instant::now(), self.wall.now());
        let (Some(upper), Some(lower)) = (self.time.upper_bound(), self.time.lower_bound()) else {
            let unknown =
                "DynamoDB's clock is not known yet (no response seen): the lease is not written";
            return Err(StoreError::new(ErrorKind::Transient, "UpdateItem", unknown));
        };
        let item = LeaseItem {
            holder: self.config.holder.clone(),
            expires_at: lower + self.config.duration,
            layout: Some(self.config.layout.clone()),
            released: false,
        };
        let (table, id) = (&self.config.table, &self.config.id);
        let written = stop
            .bound("UpdateItem", store.write_lease(table, id, &item, lower))
            .await?;
        if !written {
            return Ok(None);
        }
        let answered = Instant::now();
        let upper_now = self
            .time
            .upper_bound()
            .unwrap_or(upper + answered.saturating_duration_since(sent));
        let until = valid_until((sent, upper), (answered, upper_now), item.expires_at);
        Ok(Some(Held {
            sent,
            wall_sent,
            until,
        }))
    }

    /// Leading until `until`; `took`: the lease was just taken (and that was logged).
    fn leading(&self, state: &mut State, until: Instant, took: bool) -> LeaseCheck {
        if Instant::now() >= until {
            // Written, but with no validity left (the answer showed DynamoDB's clock further on
            // than thought): the next check renews it before anything is sent.
            warn!(holder = %self.config.holder, "the lease write left no time to sweep in; renewing it at the next sweep");
            return Err(NotLeading::default());
        }
        if !took && state.logged != Some(Ok(())) {
            info!(holder = %self.config.holder, "leading: holding the lease");
        }
        state.logged = Some(Ok(()));
        Ok(until)
    }

    /// Standing by (`error`: why, if reading or writing the lease failed); logs the holder when
    /// it changed.
    fn standing_by(&self, state: &mut State, error: Option<StoreError>) -> LeaseCheck {
        let mut not_leading = NotLeading {
            error,
            ..NotLeading::default()
        };
        let Some(seen) = &state.seen else {
            return Err(not_leading);
        };
        not_leading.layout_mismatch = seen.layout.is_some();
        let (who, until) = (&seen.holder, seen.expires_at);
        let key = if seen.released {
            format!("{who} (released)")
        } else {
            who.clone()
        };
        if state.logged.as_ref() != Some(&Err(key.clone())) {
            if seen.released {
                info!(holder = %who, until = %until, "standing by until {until}: {who} gave the lease up");
            } else {
                info!(holder = %who, until = %until, "standing by: {who} holds the lease until {until}");
            }
            state.logged = Some(Err(key));
        }
        Err(not_leading)
    }
}
