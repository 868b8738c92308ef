//! A sweep's partitions: every shard in the range of every window read, concurrently within
//! `max_concurrency`, each outcome folded into the report as it finishes; and the checkpoint
//! moved over the windows swept completely.

use super::*;

impl<S: Store> Sweeper<S> {
    /// Sweeps the shards in the range of every window; returns the report and, per window,
    /// whether it was swept completely. Each partition's outcome is folded into the report as it
    /// finishes: memory stays bounded by the partitions running at once, not by the backlog.
    /// With `packs`, of the packs due in that range instead of the entries of one item each or
    /// the GSI ([`crate::engine::packs`]).
    pub(in crate::engine) async fn sweep_partitions(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
        packs: Option<(Timestamp, Timestamp)>,
    ) -> (SweepReport, Vec<bool>) {
        let started = Instant::now();
        let pass = self.pass(now, stop, started, false, packs);
        let mut report = self.report(now);
        // Archive mode: the expiries earlier sweeps left accepted and not settled, first (once
        // per sweep: by the pass of the entries, not that of the packs).
        // Boxed: a sweep's future stays as small as it was without events.
        if let Some(events) = pass.events.as_ref().filter(|_| packs.is_none()) {
            if events.journal.is_some() {
                report.add_events(Box::pin(settle_journal(&pass.deleter(), events)).await);
            }
            if !events.unsettled.is_empty() {
                report.add_events(Box::pin(settle_unsettled(&pass.deleter(), events)).await);
            }
        }
        let shards = self.shared.schema.layout.window_shards.max(1);
        let range = self.shard_range();
        let limit = self.shared.options.max_concurrency.max(1);
        let partitions = windows.iter().enumerate().flat_map(|(i, w)| {
            range
                .shards()
                .map(move |shard| (i, partition_key(*w, shard, shards)))
        });

        let mut read_all = vec![true; windows.len()];
        let mut complete = vec![true; windows.len()];
        let mut fold = |(i, out): (usize, PartitionOutcome)| {
            let read = out.read_all && out.error.is_none();
            read_all[i] &= read;
            complete[i] &= read && out.handled_all;
            report.add_partition(out.report);
            if let Some(e) = out.error {
                report.add_errors([SweepErrorEntry::new(Some(windows[i].key()), &e)]);
            }
        };
        // At most `limit` partitions at once, each a task of its own.
        let mut running = JoinSet::new();
        for (i, key) in partitions {
            if running.len() >= limit {
                if let Some(done) = running.join_next().await {
                    fold(joined(done));
                }
            }
            let (pass, counted) = (pass.clone(), Running::new(&pass.running));
            running.spawn(async move {
                let _counted = counted;
                (i, sweep_partition(&pass, &key).await)
            });
        }
        while let Some(done) = running.join_next().await {
            fold(joined(done));
        }

        report.windows_swept = read_all.iter().filter(|r| **r).count();
        report.windows_left = windows.len() - report.windows_swept;
        report.stopped_early = stop.reached() && !report.is_complete();
        report.lag = report.lags.stats();
        report.duration_ms = started.elapsed().as_millis() as u64;
        (report, complete)
    }
}

/// Moves the checkpoint, slice by slice, over the unbroken run of complete windows since the floor.
pub(super) struct CheckpointMover<'a, S> {
    /// Its checkpoint writes end when the sweep's calls must ([`Stop::bound`]).
    pub(super) stop: &'a Stop,
    pub(super) store: &'a S,
    pub(super) checkpoint: &'a Checkpoint,
    pub(super) now: Timestamp,
    /// The stored checkpoint, as last read or written.
    pub(super) at: Option<Timestamp>,
    /// Every window ending at or before this was swept completely (or is below the floor).
    pub(super) through: i64,
    /// False once a window after `through` was not swept completely, or a write failed: the
    /// checkpoint stays where it is for the rest of the sweep.
    pub(super) unbroken: bool,
}

impl<S: Store> CheckpointMover<'_, S> {
    /// After sweeping `windows` (newest first, contiguous, the older ones handled before),
    /// advances the checkpoint over those swept completely and wholly in the past.
    pub(super) async fn advance(
        &mut self,
        windows: &[Window],
        complete: &[bool],
        report: &mut SweepReport,
    ) {
        if !self.unbroken {
            return;
        }
        let to = advance_to(windows, complete, self.through, self.now);
        let broken = |(w, ok): (&Window, &bool)| w.end > self.through && !ok;
        self.unbroken = !windows.iter().zip(complete).any(broken);
        let Some(to) = to else { return };
        self.through = self.through.max(to);
        let to = Timestamp::from_secs(to);
        if self.at.is_some_and(|c| to <= c) {
            return;
        }
        let cp = self.checkpoint;
        let advance = self
            .store
            .advance_checkpoint(&cp.table, &cp.id, to, self.now);
        match self.stop.bound("UpdateItem", advance).await {
            Ok(moved) => {
                debug!(to = %to, moved, "checkpoint advanced");
                self.at = Some(to);
            }
            Err(e) => {
                report.add_errors([SweepErrorEntry::new(None, &e)]);
                self.unbroken = false;
            }
        }
    }
}
