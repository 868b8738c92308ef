//! The stream indexer: every item written with a ttl gets its window attribute from the item's
//! record on the table's DynamoDB stream, so that writers need set only the ttl. Each `INSERT` and
//! `MODIFY` record's new image is judged by the rules of `backfill` ([`plan_item`]) and acted on
//! with conditional requests; an image without a usable ttl loses its window. What each
//! image comes to, and why a record applied twice or late changes nothing: `docs/adoption.md`,
//! "The stream indexer". Records of different items are handled concurrently (at most
//! [`CONCURRENCY`] items at once), those of one item in order; a failed record stops its item and
//! is reported by its sequence number, so that `ReportBatchItemFailures` delivers it again.

use std::collections::HashMap;
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use futures::stream::{self, StreamExt};
use serde::Serialize;

use super::backfill::{
    key_of, plan_item, with_retries, BackfillReport, ItemPlan, Step, StepEvents,
};
use crate::engine::{Stop, Sweeper};
use crate::expiry::Clock;
use crate::store::scan::UpdateOutcome;
use crate::store::{key_to_json, DynamoStore, Key};

/// Items whose records are handled at once.
pub const CONCURRENCY: usize = 16;

/// At most this many error messages are kept in a report (the count is in `failed`).
const MAX_ERRORS: usize = 10;

/// What one batch of stream records came to.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct IndexReport {
    /// Records in the batch.
    pub records: u64,
    /// `REMOVE` records: nothing to do.
    pub removes: u64,
    /// What the `INSERT` and `MODIFY` images came to, counted as `backfill` counts the items it
    /// reads (`scanned`: the images judged).
    pub items: BackfillReport,
    /// Windows removed from items whose ttl was removed or is not usable.
    pub stale_windows_removed: u64,
    /// Records that failed (each stops its item: the records after it are not handled).
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
}

/// Indexes `records`, one batch from one shard of the table's stream, for `sweeper`'s table
/// (see the [module](self) description). The items it deletes get their expiry events through
/// the sweeper's hook (when configured), as a sweep's do; publishing stops at `stop`. Never fails
/// as a whole: what failed is in [`Indexed::failures`].
pub async fn index_records(
    sweeper: &Sweeper<DynamoStore>,
    clock: &dyn Clock,
    stop: &Stop,
    records: &[EventRecord],
) -> Indexed {
    let (store, schema) = (sweeper.store(), sweeper.schema());
    // How far back the sweeps read windows: an expired item left to them must be within it.
    let lookback = u64::from(sweeper.options().lookback_windows);
    let reach = Duration::from_secs(lookback * u64::from(schema.layout.window_seconds));
    // Records grouped by item, in their order.
    let mut items: Vec<Vec<&EventRecord>> = Vec::new();
    let mut slot: HashMap<String, usize> = HashMap::new();
    for record in records {
        let at = *slot.entry(item_id(record)).or_insert_with(|| {
            items.push(Vec::new());
            items.len() - 1
        });
        items[at].push(record);
    }
    let step = &Step {
        store,
        schema,
        clock,
        limit: None,
        dry_run: false,
        events: sweeper
            .expiry_hook()
            .map(|hook| StepEvents { hook, stop, reach }),
    };
    let done: Vec<Indexed> = stream::iter(items)
        .map(|records| async move { index_item(step, &records).await })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;

    let mut total = Indexed::default();
    for item in done {
        total.report.merge(item.report);
        total.failures.extend(item.failures);
    }
    total
}

impl IndexReport {
    /// Adds `other`'s counts (and errors, up to the bound) to these.
    pub fn merge(&mut self, other: IndexReport) {
        self.records += other.records;
        self.removes += other.removes;
        super::backfill::add(&mut self.items, &other.items);
        self.stale_windows_removed += other.stale_windows_removed;
        self.failed += other.failed;
        let room = MAX_ERRORS.saturating_sub(self.errors.len());
        self.errors.extend(other.errors.into_iter().take(room));
    }
}

/// The identity of `record`'s item (its key in DynamoDB JSON), the same whatever the order of the
/// key attributes.
pub fn item_id(record: &EventRecord) -> String {
    let key: Key = record.change.keys.clone().into();
    key_to_json(&key).to_string()
}

/// The records of one item, in order, until one fails.
async fn index_item(step: &Step<'_>, records: &[&EventRecord]) -> Indexed {
    let mut out = Indexed::default();
    out.report.records = records.len() as u64;
    for record in records {
        if let Err(error) = index_record(step, record, &mut out.report).await {
            let sequence = record.change.sequence_number.clone().unwrap_or_default();
            out.report.failed += 1;
            out.report.errors.push(format!(
                "record {sequence} of item {}: {error}",
                item_id(record)
            ));
            out.failures.push(sequence);
            break;
        }
    }
    out
}

/// One record; `Err` says why it failed.
async fn index_record(
    step: &Step<'_>,
    record: &EventRecord,
    report: &mut IndexReport,
) -> Result<(), String> {
    match record.event_name.as_str() {
        "REMOVE" => {
            report.removes += 1;
            return Ok(());
        }
        "INSERT" | "MODIFY" => {}
        other => return Err(format!("unknown event name {other:?}")),
    }
    let image: Key = record.change.new_image.clone().into();
    if image.is_empty() {
        return Err("no new image: the stream's view type must be NEW_IMAGE or \
                    NEW_AND_OLD_IMAGES"
            .into());
    }
    let schema = step.schema;
    let key = key_of(schema, &image).map_err(|_| {
        format!(
            "the new image lacks the key attributes {:?}",
            schema.key_attributes
        )
    })?;
    let counts = &mut report.items;
    counts.scanned += 1;
    let plan = plan_item(&image, schema, step.clock.now());
    let unusable = matches!(
        plan,
        ItemPlan::NoTtl | ItemPlan::InvalidTtl | ItemPlan::TooOldTtl
    );
    let layout = &schema.layout;
    match image.get(&layout.window_attribute) {
        Some(window) if unusable => {
            match plan {
                ItemPlan::NoTtl => counts.no_ttl += 1,
                ItemPlan::TooOldTtl => {
                    counts.invalid_ttl += 1;
                    counts.too_old_ttl += 1;
                }
                _ => counts.invalid_ttl += 1,
            }
            let ttl = image.get(&layout.ttl_attribute).cloned();
            let (outcome, consumed) = with_retries(|| {
                step.store.remove_window_if_unchanged(
                    &schema.table_name,
                    key.clone(),
                    (&layout.ttl_attribute, ttl.clone()),
                    &layout.window_attribute,
                    window.clone(),
                )
            })
            .await
            .map_err(|e| e.to_string())?;
            counts.consumed_wcu += consumed;
            match outcome {
                UpdateOutcome::Written => report.stale_windows_removed += 1,
                UpdateOutcome::Changed => counts.changed_concurrently += 1,
            }
            Ok(())
        }
        _ => step.item(&image, counts).await.map_err(|e| e.to_string()),
    }
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
    fn records_of_one_item_are_grouped_in_order_whatever_the_order_of_their_key_attributes() {
        let a = serde_json::json!({"pk": {"S": "a"}, "sk": {"N": "1"}});
        let a_again = serde_json::json!({"sk": {"N": "1"}, "pk": {"S": "a"}});
        let b = serde_json::json!({"pk": {"S": "b"}, "sk": {"N": "1"}});
        let ids: Vec<String> = [a, b, a_again]
            .into_iter()
            .map(|k| {
                let key: Key = record("INSERT", "1", k).change.keys.into();
                key_to_json(&key).to_string()
            })
            .collect();
        assert_eq!(ids[0], ids[2]);
        assert_ne!(ids[0], ids[1]);
    }
}
