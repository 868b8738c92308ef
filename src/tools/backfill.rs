//! `ttl-sweeper backfill`: give every existing item with a numeric ttl its window attribute, and
//! delete the items that have already expired (the rules: `docs/adoption.md`, step 2). With an
//! expiry index table (`EXPIRY_INDEX_TABLE`), write every such item's entry into it instead, and
//! write and delete nothing in the table (`Step::index`).
//!
//! Each item is judged by the clock when its write is made, after the write-rate limit let it
//! through: a slow run beside a running sweeper would otherwise give an item that expired while
//! it waited the window of its ttl, one the sweeps may already have passed for good. Only an item
//! whose ttl as read is [`TtlState::Expired`] at that instant is deleted, conditional on that ttl;
//! every window write is conditional on the ttl and window read, so a concurrent change is never
//! overwritten and a deleted item never comes back. Progress is saved after every page
//! (`progress`); the flags' ranges and the write-rate limit are in `limits`.

mod limits;
mod progress;

pub use limits::{
    default_segments, parse_max_rcu, parse_max_wcu, parse_page_size, MAX_PAGE_SIZE, MAX_UNITS_RANGE,
};
pub use progress::{
    default_state_path, run_with_file, start, BackfillState, Finished, ProgressFile,
    ProgressFileError, Start,
};

use std::sync::Mutex;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::scan::{item_attributes, parallel_scan, Position, RateLimit, ScanPageOf};
use crate::expiry::window::{parse_ttl, ttl_state, TtlError, TtlState};
use crate::expiry::{Clock, Timestamp};
use crate::index::{write_entries, ENTRIES_PER_REQUEST};
use crate::store::entries::{index_item, Indexing, BACKFILL_ORIGIN};
use crate::store::scan::UpdateOutcome;
use crate::store::{
    key_to_json, lock, retried, ConditionalOutcome, ErrorKind, Key, Retry, Scan, StoreError,
    TableSchema,
};

/// Counts of one backfill run (or, resumed, of all runs of one state file).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BackfillReport {
    /// Items read.
    pub scanned: u64,
    /// Items whose window attribute was already correct.
    pub already_ok: u64,
    /// Window attributes written (in a dry run: that would be written); with an expiry index
    /// table, entries written.
    pub written: u64,
    /// Items changed or deleted between the scan and the update: left as they are.
    pub changed_concurrently: u64,
    /// Items expired when the backfill came to write them, deleted (dry run: expired when read).
    pub deleted_expired: u64,
    /// Of `written`, windows whose ttl passed before the write was acknowledged: the item was
    /// then deleted like an expired one (and counts in `deleted_expired`, `expired_kept` or
    /// `expired_gone` too).
    pub expired_while_written: u64,
    /// Items read expired whose ttl changed before the delete (extended, removed, rewritten): kept.
    pub expired_kept: u64,
    /// Items read expired that were already gone when the delete arrived (the application, the
    /// sweeper or native TTL deleted them).
    pub expired_gone: u64,
    /// Items without a ttl attribute: not expiring, nothing to do.
    pub no_ttl: u64,
    /// Items whose ttl is not usable: not a Number, negative, milliseconds, or more than five
    /// years in the past. Left alone: never deleted, never given a window.
    pub invalid_ttl: u64,
    /// Of `invalid_ttl`, ttls more than five years before the instant the item was judged:
    /// native TTL ignores them, and so do the sweeper and the backfill.
    pub too_old_ttl: u64,
    /// Expiry index table mode: of `written` (entries), items already expired when indexed:
    /// their entries are in the current window, and the next sweep deletes them.
    pub expired_indexed: u64,
    /// `--index-only` (the seed's GSI mode): items expired when judged, left as they are: no
    /// window the sweeps read, so native TTL (if enabled on the table) deletes them.
    pub expired_not_deleted: u64,
    /// Write capacity consumed.
    pub consumed_wcu: f64,
    /// Read capacity the scan consumed.
    pub consumed_rcu: f64,
    /// True for a dry run (nothing written).
    pub dry_run: bool,
    /// True when every segment was scanned to the end.
    pub complete: bool,
    /// Errors that stopped a segment.
    pub errors: Vec<String>,
}

/// Knobs of a backfill run.
#[derive(Debug, Clone, Default)]
pub struct BackfillOptions {
    /// Count only; write and delete nothing.
    pub dry_run: bool,
    /// Delete nothing: only write windows (or, with an expiry index table, entries, which is all
    /// that mode does anyway). Items already expired are counted in `expired_not_deleted`.
    pub index_only: bool,
    /// Write capacity units per second at most (see [`parse_max_wcu`]), for writes and deletes.
    pub max_wcu: Option<f64>,
    /// Read capacity units per second at most for the scan (see [`parse_max_rcu`]).
    pub max_rcu: Option<f64>,
    /// Scan page size.
    pub page_limit: Option<i32>,
}

/// What a backfill does with one scanned item (see [`plan_item`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ItemPlan {
    /// No ttl attribute: the item never expires. Nothing to do.
    NoTtl,
    /// The ttl is not a usable Number (not a Number, negative, milliseconds). Left alone.
    InvalidTtl,
    /// The ttl is more than five years before the instant: native TTL never deletes the item,
    /// nor does the sweeper. Left alone, without a window.
    TooOldTtl,
    /// Expired at the instant: delete it if its ttl is still `ttl` (the Number as read).
    DeleteExpired {
        /// The ttl as read.
        ttl: String,
    },
    /// The window attribute is already right.
    AlreadyOk,
    /// Set the window attribute to `window` if the ttl is still `ttl` and the window `current`.
    SetWindow {
        /// The ttl as read.
        ttl: String,
        /// The window attribute as read (`None`: absent).
        current: Option<AttributeValue>,
        /// The window the ttl belongs in.
        window: String,
    },
}

/// Decides what a backfill at instant `now` does with `item` (key, ttl and window attributes).
/// Only an item whose ttl as read is a Number in epoch seconds, before `now` and not more than
/// five years before it ([`ttl_state`] is [`TtlState::Expired`]) is to be deleted.
pub fn plan_item(item: &Key, schema: &TableSchema, now: Timestamp) -> ItemPlan {
    let layout = &schema.layout;
    let ttl = match item.get(&layout.ttl_attribute) {
        None => return ItemPlan::NoTtl,
        Some(AttributeValue::N(n)) => n.clone(),
        Some(_) => return ItemPlan::InvalidTtl,
    };
    let Ok(secs) = parse_ttl(&ttl) else {
        return ItemPlan::InvalidTtl;
    };
    match ttl_state(secs, now) {
        TtlState::TooOld => return ItemPlan::TooOldTtl,
        TtlState::Expired => return ItemPlan::DeleteExpired { ttl },
        TtlState::Live => {}
    }
    let Ok(window) = window_of(item, schema, secs) else {
        return ItemPlan::InvalidTtl;
    };
    let current = item.get(&layout.window_attribute).cloned();
    if current == Some(AttributeValue::S(window.clone())) {
        return ItemPlan::AlreadyOk;
    }
    ItemPlan::SetWindow {
        ttl,
        current,
        window,
    }
}

/// The window attribute of `item` with `ttl`, by its partition key.
pub(super) fn window_of(item: &Key, schema: &TableSchema, ttl: f64) -> Result<String, TtlError> {
    let pk = item.get(&schema.key_attributes[0]);
    schema
        .layout
        .window_for(ttl, pk.unwrap_or(&AttributeValue::Null(true)))
}

/// Runs (or resumes) a backfill, judging every item by `clock` (held to DynamoDB's by the entry
/// point) when its write is made. `save` sees the state after every page, `progress` the items
/// scanned so far.
pub async fn backfill(
    store: &impl Scan,
    schema: &TableSchema,
    options: &BackfillOptions,
    clock: &dyn Clock,
    state: BackfillState,
    save: &(dyn Fn(&BackfillState) + Sync),
    progress: &(dyn Fn(u64) + Sync),
) -> BackfillState {
    let positions: Vec<Position> = (0..state.positions.len())
        .map(|i| state.position(i))
        .collect();
    let shared = Mutex::new(state);
    let limit = options.max_wcu.map(RateLimit::new);
    let step = Step {
        store,
        schema,
        clock,
        limit: limit.as_ref(),
        options,
    };
    let read_limit = options.max_rcu.map(RateLimit::new);
    let result = parallel_scan(
        store,
        &schema.table_name,
        positions,
        &item_attributes(schema),
        options.page_limit,
        read_limit.as_ref(),
        |page: ScanPageOf| {
            let (shared, step) = (&shared, &step);
            async move {
                let mut counts = BackfillReport {
                    consumed_rcu: page.consumed,
                    ..BackfillReport::default()
                };
                if schema.index.table().is_some() {
                    step.index(&page.items, &mut counts).await?;
                } else {
                    for item in &page.items {
                        counts.scanned += 1;
                        step.item(item, &mut counts).await?;
                    }
                }
                let snapshot = {
                    let mut s = lock(shared);
                    add_counts!(s.report, counts; scanned, already_ok, written,
                        changed_concurrently, deleted_expired, expired_while_written, expired_kept,
                        expired_gone, no_ttl, invalid_ttl, too_old_ttl, expired_indexed,
                        expired_not_deleted, consumed_wcu, consumed_rcu);
                    s.positions[page.segment as usize] = match &page.position {
                        Position::Done => serde_json::json!("done"),
                        Position::After(k) => serde_json::json!({ "after": key_to_json(k) }),
                        Position::Start => serde_json::json!("start"),
                    };
                    s.clone()
                };
                save(&snapshot);
                progress(snapshot.report.scanned);
                Ok(true)
            }
        },
    )
    .await;

    let mut state = shared.into_inner().unwrap_or_else(|e| e.into_inner());
    state.report.dry_run = options.dry_run;
    if let Err(e) = result {
        state.report.errors.push(e.to_string());
    }
    state.report.complete = state.is_complete();
    save(&state);
    state
}

/// What handling one scanned item needs.
struct Step<'a, S> {
    store: &'a S,
    schema: &'a TableSchema,
    clock: &'a dyn Clock,
    /// The write-rate limit (`--max-wcu`), if any.
    limit: Option<&'a RateLimit>,
    options: &'a BackfillOptions,
}

impl<S: Scan> Step<'_, S> {
    /// Expiry index table mode: writes the entry of every item of `items` (one page) with a
    /// usable ttl, as the stream indexer would (origin [`BACKFILL_ORIGIN`]: the same entries
    /// again on a second run), 25 to a `BatchWriteItem`, within the write-rate limit. Writes
    /// nothing to the table, and deletes nothing: an item already expired gets its entry in the
    /// current window, and the next sweep deletes it.
    async fn index(&self, items: &[Key], counts: &mut BackfillReport) -> Result<(), StoreError> {
        let mut todo = Vec::new();
        for item in items {
            counts.scanned += 1;
            match index_item(self.schema, item, BACKFILL_ORIGIN, self.clock.now()) {
                None => {
                    key_of(self.schema, item)?;
                    let why = "an item whose index entry cannot be built";
                    return Err(StoreError::new(ErrorKind::Validation, "Scan", why));
                }
                Some(Indexing::NoTtl) => counts.no_ttl += 1,
                Some(Indexing::InvalidTtl) => counts.invalid_ttl += 1,
                Some(Indexing::TooOldTtl) => {
                    counts.invalid_ttl += 1;
                    counts.too_old_ttl += 1;
                }
                Some(Indexing::Entry { entry, expired }) => {
                    if !self.options.dry_run {
                        todo.push(entry);
                    }
                    counts.written += 1;
                    counts.expired_indexed += u64::from(expired);
                }
            }
        }
        for chunk in todo.chunks(ENTRIES_PER_REQUEST) {
            for _ in chunk {
                self.pace().await;
            }
            let written = write_entries(self.store, self.schema, chunk).await;
            written.map_err(|(e, _)| e)?;
            counts.consumed_wcu += chunk.len() as f64;
        }
        Ok(())
    }

    /// Judges `item` by the clock and acts on it; counts what it did in `counts`.
    async fn item(&self, item: &Key, counts: &mut BackfillReport) -> Result<(), StoreError> {
        let mut plan = plan_item(item, self.schema, self.clock.now());
        let needs_write = match plan {
            ItemPlan::DeleteExpired { .. } => !self.options.index_only,
            ItemPlan::SetWindow { .. } => true,
            _ => false,
        };
        if needs_write && !self.options.dry_run {
            self.pace().await;
            // Judged again when written: the rate limit may have held it past its ttl.
            plan = plan_item(item, self.schema, self.clock.now());
        }
        match plan {
            ItemPlan::NoTtl => counts.no_ttl += 1,
            ItemPlan::InvalidTtl => counts.invalid_ttl += 1,
            ItemPlan::TooOldTtl => {
                counts.invalid_ttl += 1;
                counts.too_old_ttl += 1;
            }
            ItemPlan::AlreadyOk => counts.already_ok += 1,
            ItemPlan::DeleteExpired { .. } if self.options.index_only => {
                counts.expired_not_deleted += 1
            }
            ItemPlan::DeleteExpired { .. } if self.options.dry_run => counts.deleted_expired += 1,
            ItemPlan::SetWindow { .. } if self.options.dry_run => counts.written += 1,
            ItemPlan::DeleteExpired { ttl } => {
                let key = key_of(self.schema, item)?;
                self.delete_expired(key, ttl, counts).await?;
            }
            ItemPlan::SetWindow {
                ttl,
                current,
                window,
            } => {
                let key = key_of(self.schema, item)?;
                // Conditional on the ttl and the window as read.
                let (outcome, consumed) = retried(Retry::default(), || {
                    let (ttl, read) = (AttributeValue::N(ttl.clone()), current.clone());
                    let (key, window) = (key.clone(), window.clone());
                    self.store
                        .set_window_if_unchanged(self.schema, key, ttl, read, window)
                })
                .await?;
                self.charge(consumed, counts);
                match outcome {
                    UpdateOutcome::Written => counts.written += 1,
                    UpdateOutcome::Changed => {
                        counts.changed_concurrently += 1;
                        return Ok(());
                    }
                }
                // The ttl passed while the window was being written: the sweeps may already be
                // past that window, so the item is deleted here like any expired one.
                let expired = parse_ttl(&ttl)
                    .is_ok_and(|t| ttl_state(t, self.clock.now()) == TtlState::Expired);
                if expired && self.options.index_only {
                    counts.expired_while_written += 1;
                    counts.expired_not_deleted += 1;
                } else if expired {
                    counts.expired_while_written += 1;
                    self.pace().await;
                    self.delete_expired(key, ttl, counts).await?;
                }
            }
        }
        Ok(())
    }

    /// Deletes the item at `key` if its ttl is still `ttl` (the Number as read).
    async fn delete_expired(
        &self,
        key: Key,
        ttl: String,
        counts: &mut BackfillReport,
    ) -> Result<(), StoreError> {
        let (outcome, consumed) = retried(Retry::default(), || {
            self.store.delete_if_ttl_unchanged(
                &self.schema.table_name,
                key.clone(),
                &self.schema.layout.ttl_attribute,
                AttributeValue::N(ttl.clone()),
            )
        })
        .await?;
        self.charge(consumed, counts);
        match outcome {
            ConditionalOutcome::Deleted => counts.deleted_expired += 1,
            ConditionalOutcome::Kept => counts.expired_kept += 1,
            ConditionalOutcome::Gone => counts.expired_gone += 1,
        }
        Ok(())
    }

    /// Waits for the write-rate limit to let one write through.
    async fn pace(&self) {
        if let Some(limit) = self.limit {
            limit.acquire().await;
        }
    }

    /// Records `consumed` write units (the rate limit took one already).
    fn charge(&self, consumed: f64, counts: &mut BackfillReport) {
        if let Some(limit) = self.limit {
            limit.charge(consumed - 1.0);
        }
        counts.consumed_wcu += consumed;
    }
}

/// The primary key of a scanned item.
fn key_of(schema: &TableSchema, item: &Key) -> Result<Key, StoreError> {
    let why = "item without its key attributes";
    (schema.key_of(item)).ok_or_else(|| StoreError::new(ErrorKind::Validation, "Scan", why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    use crate::expiry::Layout;
    use crate::tools::scan::MAX_SEGMENTS;
    use std::time::Duration;
    use tokio::time::Instant;

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("ttl-sweeper-{}-{name}.json", std::process::id()))
    }

    #[test]
    fn the_default_progress_file_is_named_after_the_table() {
        assert_eq!(
            default_state_path("sessions"),
            PathBuf::from("ttl-sweeper-backfill-sessions.json")
        );
        assert_eq!(
            default_state_path("arn:aws:dynamodb:eu-west-1:1:table/s"),
            PathBuf::from("ttl-sweeper-backfill-arn_aws_dynamodb_eu-west-1_1_table_s.json")
        );
    }

    #[test]
    fn a_saved_state_resumes_only_for_the_same_table_width_and_shards() {
        let path = temp_path("resume");
        let layout = Layout::default();
        let mut state = BackfillState::new("sessions", &layout, 4);
        state.positions[1] = serde_json::json!("done");
        state.report.scanned = 42;
        state.save_atomically(&path).unwrap();
        let load = |table, layout| BackfillState::load_for_resume(&path, table, layout);
        assert!(
            !path.with_extension("json.tmp").exists(),
            "the temporary file is renamed"
        );
        assert_eq!(load("sessions", &layout).unwrap(), state);

        let sharded = Layout {
            window_shards: 8,
            ..Layout::default()
        };
        for (table, layout) in [("sessions", &sharded), ("orders", &layout)] {
            let err = load(table, layout).unwrap_err();
            assert!(matches!(err, ProgressFileError::OtherRun { .. }), "{err}");
            assert!(
                err.to_string()
                    .contains("\"sessions\" with 60 s windows and 1 shards"),
                "{err}"
            );
        }
        std::fs::write(&path, "{}").unwrap();
        let err = load("sessions", &layout).unwrap_err();
        assert!(matches!(err, ProgressFileError::Parse { .. }), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = load("sessions", &layout).unwrap_err();
        assert!(matches!(err, ProgressFileError::Read { .. }), "{err}");
    }

    #[test]
    fn segments_scale_with_size_within_bounds() {
        assert_eq!(default_segments(0), 4);
        assert_eq!(default_segments(10 * 1024 * 1024 * 1024), 40);
        assert_eq!(default_segments(i64::MAX / 2), 256);
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_paces_writes() {
        let limit = RateLimit::new(10.0);
        let start = Instant::now();
        for _ in 0..30 {
            limit.acquire().await;
        }
        // 10 in the initial bucket, then 10 per second: 20 more take about 2 s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(1900) && took <= Duration::from_millis(2200),
            "{took:?}"
        );
        limit.charge(10.0);
        let before = Instant::now();
        limit.acquire().await;
        assert!(
            before.elapsed() >= Duration::from_millis(900),
            "extra cost is paid back"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_below_one_unit_per_second_still_writes_at_that_rate() {
        // A bucket of capacity 0.5 never held a whole unit: the first write waited forever.
        let limit = RateLimit::new(0.5);
        let start = Instant::now();
        for _ in 0..3 {
            tokio::time::timeout(Duration::from_secs(60), limit.acquire())
                .await
                .expect("a unit comes within 60 s");
        }
        // One at once, then one every 2 s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(3900) && took <= Duration::from_millis(4200),
            "{took:?}"
        );
    }

    #[test]
    fn max_wcu_and_page_size_are_checked_with_the_accepted_range() {
        for good in ["0.01", "0.5", "500", "1000000"] {
            assert!(parse_max_wcu(good).is_ok(), "{good}");
        }
        for bad in ["0", "-5", "NaN", "inf", "0.001", "1e7", "", "lots"] {
            let err = parse_max_wcu(bad).unwrap_err();
            assert!(err.contains("0.01 to 1000000"), "{bad}: {err}");
        }
        assert_eq!(parse_page_size("1"), Ok(1));
        assert_eq!(parse_page_size("500"), Ok(500));
        assert_eq!(parse_page_size("1000"), Ok(1000));
        for bad in ["0", "-1", "1001", "2147483647", "99999999999", "lots"] {
            assert!(
                parse_page_size(bad).unwrap_err().contains("1 to 1000"),
                "{bad}"
            );
        }
    }

    fn item(ttl: Option<AttributeValue>, window: Option<&str>) -> Key {
        let mut item: Key = [("id".to_string(), AttributeValue::S("a".into()))].into();
        if let Some(ttl) = ttl {
            item.insert("ttl".into(), ttl);
        }
        if let Some(w) = window {
            item.insert("expirationWindow".into(), AttributeValue::S(w.into()));
        }
        item
    }

    #[test]
    fn only_items_expired_by_native_ttl_rule_are_planned_for_deletion() {
        use crate::expiry::window::{window_key, MAX_EXPIRED_AGE_SECONDS};
        let now_s = 1_800_000_000i64;
        let now = Timestamp::from_millis(now_s * 1000 + 500);
        let n = |t: i64| Some(AttributeValue::N(t.to_string()));
        let plan = |ttl, window| plan_item(&item(ttl, window), &crate::tools::test_schema(), now);
        let delete = |t: i64| ItemPlan::DeleteExpired { ttl: t.to_string() };

        assert_eq!(plan(None, None), ItemPlan::NoTtl);
        assert_eq!(
            plan(Some(AttributeValue::S("1".into())), None),
            ItemPlan::InvalidTtl
        );
        assert_eq!(plan(n(now_s * 1000), None), ItemPlan::InvalidTtl, "millis");
        assert_eq!(plan(n(-5), None), ItemPlan::InvalidTtl);
        // Expired, with or without a window, right or wrong: deleted.
        assert_eq!(plan(n(now_s - 3600), None), delete(now_s - 3600));
        let right = window_key((now_s - 3600) as f64, 60).unwrap();
        assert_eq!(plan(n(now_s - 3600), Some(&right)), delete(now_s - 3600));
        assert_eq!(
            plan(n(now_s), None),
            delete(now_s),
            "now_s < now (now_s + 0.5 s)"
        );
        let edge = now_s - MAX_EXPIRED_AGE_SECONDS;
        assert_eq!(plan(n(edge), None), delete(edge), "five years exactly");
        // More than five years old: never deleted, never given a window.
        assert_eq!(plan(n(edge - 1), None), ItemPlan::TooOldTtl);
        assert_eq!(plan(n(5), Some(&right)), ItemPlan::TooOldTtl);
        // Live: a window, unless it is already right.
        let live = now_s + 1;
        let window = window_key(live as f64, 60).unwrap();
        assert_eq!(plan(n(live), Some(&window)), ItemPlan::AlreadyOk);
        assert_eq!(
            plan(n(live), Some(&right)),
            ItemPlan::SetWindow {
                ttl: live.to_string(),
                current: Some(AttributeValue::S(right.clone())),
                window: window.clone(),
            }
        );
        assert_eq!(
            plan(n(live), None),
            ItemPlan::SetWindow {
                ttl: live.to_string(),
                current: None,
                window,
            }
        );
    }

    #[test]
    fn a_complete_run_is_followed_by_a_fresh_one_and_an_interrupted_one_needs_resume() {
        let path = temp_path("start");
        let _ = std::fs::remove_file(&path);
        let layout = Layout::default();
        let start = |resume, dry_run| start(&path, "sessions", &layout, 3, resume, dry_run);
        let refused = |resume| start(resume, false).unwrap_err();

        // No file: fresh; --resume has nothing to resume.
        assert_eq!(
            start(false, false).unwrap(),
            Start::Fresh(BackfillState::new("sessions", &layout, 3))
        );
        assert!(matches!(refused(true), ProgressFileError::Read { .. }));

        // An interrupted run: refused without --resume (naming it), resumed with it.
        let mut state = BackfillState::new("sessions", &layout, 4);
        state.positions[0] = serde_json::json!("done");
        state.report.scanned = 42;
        state.save_atomically(&path).unwrap();
        let err = start(false, false).unwrap_err();
        assert!(
            matches!(err, ProgressFileError::Interrupted { .. }),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("--resume") && text.contains("1 of 4 segments") && text.contains("42"),
            "{text}"
        );
        assert_eq!(start(true, false).unwrap(), Start::Resume(state.clone()));
        assert!(
            matches!(start(false, true).unwrap(), Start::Fresh(_)),
            "a dry run never saves, so it never overwrites"
        );

        // A complete run (even one killed before it marked its summary complete): a fresh run
        // replaces it; --resume has nothing to do.
        state.positions = vec![serde_json::json!("done"); 4];
        state.save_atomically(&path).unwrap();
        assert_eq!(
            start(false, false).unwrap(),
            Start::Fresh(BackfillState::new("sessions", &layout, 3))
        );
        assert_eq!(start(true, false).unwrap(), Start::AlreadyComplete(state));

        // Not a progress file: refused either way.
        std::fs::write(&path, "hello").unwrap();
        assert!(matches!(
            refused(false),
            ProgressFileError::NotProgress { .. }
        ));
        assert!(matches!(refused(true), ProgressFileError::Parse { .. }));
        // A progress file with an absurd number of segments.
        let mut huge = BackfillState::new("sessions", &layout, 1);
        huge.positions = vec![serde_json::json!("start"); MAX_SEGMENTS as usize + 1];
        huge.save_atomically(&path).unwrap();
        assert!(matches!(refused(true), ProgressFileError::Segments { .. }));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_progress_file_saved_before_the_deletion_counts_still_resumes() {
        let path = temp_path("old-format");
        std::fs::write(
            &path,
            r#"{"table":"sessions","window_seconds":60,"window_shards":1,
                "positions":["done","start"],
                "report":{"scanned":7,"already_ok":1,"written":6,"written_expired":2,
                          "changed_concurrently":0,"no_ttl":0,"invalid_ttl":0,
                          "consumed_wcu":6.0,"dry_run":false,"complete":false,"errors":[]}}"#,
        )
        .unwrap();
        let state = BackfillState::load_for_resume(&path, "sessions", &Layout::default()).unwrap();
        assert_eq!(state.report.written, 6);
        assert_eq!(state.report.deleted_expired, 0);
        std::fs::remove_file(&path).unwrap();
    }
}
