//! [`Sweeper::delete_indexed`]: the items the stream indexer finds written already expired,
//! deleted at once through the sweep's delete path.

use super::*;

impl<S: Store> Sweeper<S> {
    /// Deletes at once the items the stream indexer found expired as it wrote their `entries`
    /// into packs ([`crate::index`]): judged against the table by a conditional `DeleteItem`
    /// each (the ttl as the stream's image has it, expired at `now`), whatever `DELETE_MODE`
    /// says, with their expiry events, through the one path of a sweep's deletes. `None`, nothing
    /// sent, with `DELETE_WHEN_INDEXED=false`, or while a lease is configured and its last check
    /// did not find it held until past now (a standby, or a Lambda that has not swept). Either
    /// way every entry stays in its pack, which the holder's next sweep reads when it is due: a
    /// key deleted here is found gone then, one whose delete failed or was left is judged again.
    pub async fn delete_indexed(
        &self,
        now: Timestamp,
        entries: Vec<crate::store::packs::PackEntry>,
        stop: &Stop,
    ) -> Option<SweepReport> {
        if !self.shared.options.delete_when_indexed {
            return None;
        }
        let started = Instant::now();
        let stop = match &self.lease {
            None => stop.clone(),
            Some(_) => match *crate::store::lock(&self.lead_until) {
                Some(until) if until > started => stop.within(until),
                _ => return None,
            },
        };
        let mut report = self.report(now);
        // Each item judged as a sweep judges what its index lists ([`check_item`]); its entry
        // stays in its pack, which the sweep that reads it finds settled.
        let schema = &self.shared.schema;
        let mut expired = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut item = entry.key;
            let ttl = aws_sdk_dynamodb::types::AttributeValue::N(entry.ttl);
            item.insert(schema.layout.ttl_attribute.clone(), ttl);
            match check_item(schema, item, now) {
                Some(e) => {
                    report.items_found += 1;
                    expired.push(e);
                }
                None => report.items_invalid += 1,
            }
        }
        if expired.is_empty() {
            return Some(report);
        }
        let pass = self.pass(now, &stop, started, true, None);
        let mut groups = JoinSet::new();
        // Spread over the delete requests allowed at once: each group deletes one at a time.
        let limit = self.shared.options.max_concurrency.max(1);
        let size = expired.len().div_ceil(limit).clamp(1, BATCH_SIZE);
        while !expired.is_empty() {
            let group = expired.split_off(expired.len().saturating_sub(size));
            let pass = pass.clone();
            groups.spawn(async move { delete_group(&pass, group, 1).await });
        }
        while let Some(done) = groups.join_next().await {
            fold_chunk(&mut report, joined(done), pass.started);
        }
        report.stopped_early = stop.reached() && report.items_left > 0;
        report.lag = report.lags.stats();
        report.duration_ms = started.elapsed().as_millis() as u64;
        Some(report)
    }
}
