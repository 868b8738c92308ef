//! `ttl-sweeper backfill`: give every existing item with a numeric ttl its window attribute, and
//! delete the items that have already expired.
//!
//! A parallel Scan reads the key, ttl and window attributes. Each item whose window attribute is
//! missing or wrong gets it with a conditional `UpdateItem` that only succeeds if the item still
//! has the ttl and window it was read with — a concurrent change is never overwritten and a
//! deleted item never comes back.
//!
//! An item already expired at the backfill's instant (by native TTL's rule,
//! [`ttl_state`] is [`TtlState::Expired`]) is deleted instead, with a conditional `DeleteItem`
//! that requires the ttl it was read with: the sweep reads only recent windows, so an item that
//! expired before them would otherwise stay until native TTL gets to it. An item whose ttl was
//! extended or rewritten meanwhile is kept. A ttl more than five years old is one native TTL
//! never acts on: it is counted as invalid and left alone, without a window.
//!
//! Progress is saved after every page, so a killed run resumes where it stopped, and re-running
//! is harmless: correct items are only counted.
//!
//! The progress file ([`BackfillState`]) lives here too: its default path, how a run starts from
//! it ([`start`]: fresh, resumed, or already complete), loading it to resume (only for the table,
//! window width and shard count it was made for) and saving it atomically.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::scan::{parallel_scan, Position, ScanPageOf, MAX_SEGMENTS};
use crate::engine::full_jitter;
use crate::expiry::window::{parse_ttl, ttl_state, TtlState};
use crate::expiry::{Layout, Timestamp};
use crate::store::scan::UpdateOutcome;
use crate::store::{
    key_from_json, key_to_json, ConditionalOutcome, DynamoStore, ErrorKind, Key, StoreError,
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
    /// Window attributes written (in a dry run: that would be written).
    pub written: u64,
    /// Items changed or deleted between the scan and the update: left as they are.
    pub changed_concurrently: u64,
    /// Items already expired at the backfill's instant, deleted (in a dry run: that would be
    /// deleted).
    pub deleted_expired: u64,
    /// Items read expired whose ttl had changed by the time of the delete (extended, removed or
    /// rewritten): kept as they are.
    pub expired_kept: u64,
    /// Items read expired that were already gone when the delete arrived (the application, the
    /// sweeper or native TTL deleted them).
    pub expired_gone: u64,
    /// Items without a ttl attribute: not expiring, nothing to do.
    pub no_ttl: u64,
    /// Items whose ttl is not usable: not a Number, negative, milliseconds, or more than five
    /// years in the past. Left alone: never deleted, never given a window.
    pub invalid_ttl: u64,
    /// Of `invalid_ttl`, ttls more than five years before the backfill's instant: native TTL
    /// ignores them, and so do the sweeper and the backfill.
    pub too_old_ttl: u64,
    /// Write capacity consumed.
    pub consumed_wcu: f64,
    /// True for a dry run (nothing written).
    pub dry_run: bool,
    /// True when every segment was scanned to the end.
    pub complete: bool,
    /// Errors that stopped a segment.
    pub errors: Vec<String>,
}

/// Resumable state, saved as JSON after every page.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackfillState {
    /// The table being back-filled.
    pub table: String,
    /// Window width and shard count the windows are computed with.
    pub window_seconds: u32,
    /// Shards per window.
    pub window_shards: u32,
    /// Per segment: `"start"`, `"done"` or the key to continue after.
    pub positions: Vec<serde_json::Value>,
    /// Counts so far.
    pub report: BackfillReport,
}

impl BackfillState {
    /// A fresh state for `segments` segments.
    pub fn new(table: &str, layout: &Layout, segments: u32) -> Self {
        BackfillState {
            table: table.to_owned(),
            window_seconds: layout.window_seconds,
            window_shards: layout.window_shards,
            positions: vec![serde_json::json!("start"); segments as usize],
            report: BackfillReport::default(),
        }
    }

    /// Loads the progress file at `path` to continue an interrupted run on `table` with
    /// `layout`; a file made for another table, window width or shard count is refused, since
    /// continuing it would write windows the sweeper does not read.
    pub fn load_for_resume(
        path: &Path,
        table: &str,
        layout: &Layout,
    ) -> Result<BackfillState, ProgressFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProgressFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let state: BackfillState =
            serde_json::from_str(&text).map_err(|source| ProgressFileError::Parse {
                path: path.to_owned(),
                source,
            })?;
        let segments = state.positions.len();
        if segments == 0 || segments > MAX_SEGMENTS as usize {
            return Err(ProgressFileError::Segments {
                path: path.to_owned(),
                segments,
            });
        }
        if state.table != table
            || state.window_seconds != layout.window_seconds
            || state.window_shards != layout.window_shards
        {
            return Err(ProgressFileError::OtherRun {
                path: path.to_owned(),
                found: (state.table, state.window_seconds, state.window_shards),
                wanted: (
                    table.to_owned(),
                    layout.window_seconds,
                    layout.window_shards,
                ),
            });
        }
        Ok(state)
    }

    /// True when every segment was scanned to the end: the run is over, there is nothing to
    /// resume (even if the run was killed before it could mark its summary complete).
    pub fn is_complete(&self) -> bool {
        !self.positions.is_empty() && self.positions.iter().all(|p| p == "done")
    }

    /// Segments scanned to the end.
    fn segments_done(&self) -> usize {
        self.positions.iter().filter(|p| *p == "done").count()
    }

    /// Writes the state to `path` through a temporary file renamed over it, so a run killed while
    /// saving leaves the previous progress intact, never a half-written file.
    pub fn save_atomically(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, path)
    }

    fn position(&self, i: usize) -> Position {
        match &self.positions[i] {
            serde_json::Value::String(s) if s == "done" => Position::Done,
            serde_json::Value::Object(o) => o
                .get("after")
                .and_then(key_from_json)
                .map(Position::After)
                .unwrap_or(Position::Start),
            _ => Position::Start,
        }
    }
}

/// The progress file of a backfill on `table` when none is given:
/// `ttl-sweeper-backfill-<table>.json` in the working directory (an ARN's `/` and `:` become `_`).
pub fn default_state_path(table: &str) -> PathBuf {
    format!(
        "ttl-sweeper-backfill-{}.json",
        table.replace(['/', ':'], "_")
    )
    .into()
}

/// A progress file that cannot be used to resume.
#[derive(Debug, thiserror::Error)]
pub enum ProgressFileError {
    /// The file cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The progress file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a backfill progress file.
    #[error("{} is not a backfill progress file", path.display())]
    Parse {
        /// The progress file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The file lists no segments, or more than [`MAX_SEGMENTS`].
    #[error(
        "{} lists {segments} segments; a backfill has 1 to {MAX_SEGMENTS}",
        path.display()
    )]
    Segments {
        /// The progress file.
        path: PathBuf,
        /// Segments in the file.
        segments: usize,
    },
    /// Without `--resume`: the file holds the progress of a run that did not finish.
    #[error(
        "{} holds an interrupted backfill of table {table:?} ({done} of {total} segments done, \
         {scanned} items scanned): pass --resume to continue that run, or remove the file to \
         start over",
        path.display()
    )]
    Interrupted {
        /// The progress file.
        path: PathBuf,
        /// The table in the file.
        table: String,
        /// Segments finished.
        done: usize,
        /// Segments in all.
        total: usize,
        /// Items scanned so far.
        scanned: u64,
    },
    /// Without `--resume`: something that is not a progress file is where the run would save
    /// its progress.
    #[error(
        "{} exists and is not a backfill progress file: remove it or pass another --state",
        path.display()
    )]
    NotProgress {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The file belongs to a run on another table, window width or shard count.
    #[error(
        "{} is for table {:?} with {} s windows and {} shards; this run is for {:?} with {} s and {}",
        path.display(), found.0, found.1, found.2, wanted.0, wanted.1, wanted.2
    )]
    OtherRun {
        /// The progress file.
        path: PathBuf,
        /// Table, window seconds and shards in the file.
        found: (String, u32, u32),
        /// Table, window seconds and shards of this run.
        wanted: (String, u32, u32),
    },
}

/// How a backfill starts, given what is at its progress file's path (see [`start`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// A new run from the beginning of every segment. A progress file left by a complete run is
    /// replaced by this run's first save.
    Fresh(BackfillState),
    /// Continues an interrupted run where its progress file says.
    Resume(BackfillState),
    /// `--resume` of a run that already finished: there is nothing to do; the state holds that
    /// run's summary.
    AlreadyComplete(BackfillState),
}

/// Decides how a backfill of `table` with `layout` starts from the progress file at `path`.
///
/// With `resume`, the file must exist and be for this table, window width and shard count
/// ([`BackfillState::load_for_resume`]): an interrupted run continues, a complete one is
/// [`Start::AlreadyComplete`].
///
/// Without it, the run is a fresh one of `segments` segments when there is no file, when the file
/// holds a complete run (re-running a finished backfill, say weekly, just works), and in a dry
/// run (which never saves). A file holding an interrupted run is refused
/// ([`ProgressFileError::Interrupted`]): starting over would throw its progress away, which only
/// removing the file should do; so is a file that is not a progress file
/// ([`ProgressFileError::NotProgress`]).
pub fn start(
    path: &Path,
    table: &str,
    layout: &Layout,
    segments: u32,
    resume: bool,
    dry_run: bool,
) -> Result<Start, ProgressFileError> {
    if resume {
        let state = BackfillState::load_for_resume(path, table, layout)?;
        return Ok(if state.is_complete() {
            Start::AlreadyComplete(state)
        } else {
            Start::Resume(state)
        });
    }
    let fresh = || Start::Fresh(BackfillState::new(table, layout, segments));
    if dry_run {
        return Ok(fresh());
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(fresh()),
        Err(source) => {
            return Err(ProgressFileError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    let saved: BackfillState =
        serde_json::from_str(&text).map_err(|source| ProgressFileError::NotProgress {
            path: path.to_owned(),
            source,
        })?;
    if saved.is_complete() {
        Ok(fresh())
    } else {
        Err(ProgressFileError::Interrupted {
            path: path.to_owned(),
            done: saved.segments_done(),
            total: saved.positions.len(),
            scanned: saved.report.scanned,
            table: saved.table,
        })
    }
}

/// Knobs of a backfill run.
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// Count only; write and delete nothing.
    pub dry_run: bool,
    /// Write capacity units per second at most (see [`check_max_wcu`]), for writes and deletes.
    pub max_wcu: Option<f64>,
    /// Scan page size.
    pub page_limit: Option<i32>,
    /// The backfill's instant: an item whose ttl is before it, and not more than five years
    /// before it, is expired and deleted.
    pub now: Timestamp,
}

/// The range `--max-wcu` accepts: from 0.01 (one write every 100 s) to 1,000,000 write capacity
/// units per second.
pub const MAX_WCU_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1_000_000.0;

/// Checks a `--max-wcu` value: a number in [`MAX_WCU_RANGE`].
pub fn check_max_wcu(wcu: f64) -> Result<f64, String> {
    if MAX_WCU_RANGE.contains(&wcu) {
        Ok(wcu)
    } else {
        Err(format!(
            "{wcu} write capacity units per second: expected a number from {} to {}",
            MAX_WCU_RANGE.start(),
            MAX_WCU_RANGE.end()
        ))
    }
}

/// Parses and checks a `--max-wcu` value (see [`check_max_wcu`]).
pub fn parse_max_wcu(text: &str) -> Result<f64, String> {
    let wcu: f64 = text.trim().parse().map_err(|_| {
        format!(
            "{text:?} is not a number: expected write capacity units per second from {} to {}",
            MAX_WCU_RANGE.start(),
            MAX_WCU_RANGE.end()
        )
    })?;
    check_max_wcu(wcu)
}

/// The most items a Scan page may be asked for (`--page-size`).
pub const MAX_PAGE_SIZE: i32 = 1000;

/// Checks a `--page-size` value: 1 to [`MAX_PAGE_SIZE`].
pub fn check_page_size(items: i32) -> Result<i32, String> {
    parse_page_size(&items.to_string())
}

/// Parses and checks a `--page-size` value: a whole number from 1 to [`MAX_PAGE_SIZE`].
pub fn parse_page_size(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(MAX_PAGE_SIZE)).contains(&n) => Ok(n as i32),
        _ => Err(format!(
            "{text:?} items per page: expected a whole number from 1 to {MAX_PAGE_SIZE}"
        )),
    }
}

/// The default segment count for a table of `size_bytes`: one per 256 MiB, between 4 and 256.
pub fn default_segments(size_bytes: i64) -> u32 {
    let per = 256 * 1024 * 1024;
    ((size_bytes.max(0) + per - 1) / per).clamp(4, 256) as u32
}

/// A token bucket for write capacity: `per_second` units per second on average, in bursts of at
/// most `max(per_second, 1)` units. The bucket holds at least one unit, so that a rate below one
/// unit per second still lets a write through now and then.
struct RateLimit {
    per_second: f64,
    capacity: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    fn new(per_second: f64) -> Self {
        let capacity = per_second.max(1.0);
        RateLimit {
            per_second,
            capacity,
            state: Mutex::new((capacity, Instant::now())),
        }
    }

    /// Waits until one unit is available and takes it.
    async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.per_second)
                    .min(self.capacity);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                (1.0 - s.0) / self.per_second
            };
            // A rate checked by `check_max_wcu` always gives a valid wait; anything else retries
            // after a second rather than panicking.
            let wait = Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
        }
    }

    /// Charges what a write cost beyond the unit taken for it.
    fn charge(&self, extra: f64) {
        if extra > 0.0 {
            self.state.lock().unwrap_or_else(|e| e.into_inner()).0 -= extra;
        }
    }
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
    /// Set the window attribute to `window` if the ttl is still `ttl` and the window still
    /// `current`.
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
    let raw_ttl = match item.get(&layout.ttl_attribute) {
        None => return ItemPlan::NoTtl,
        Some(AttributeValue::N(n)) => n,
        Some(_) => return ItemPlan::InvalidTtl,
    };
    let Ok(ttl) = parse_ttl(raw_ttl) else {
        return ItemPlan::InvalidTtl;
    };
    match ttl_state(ttl, now) {
        TtlState::TooOld => return ItemPlan::TooOldTtl,
        TtlState::Expired => {
            return ItemPlan::DeleteExpired {
                ttl: raw_ttl.clone(),
            }
        }
        TtlState::Live => {}
    }
    let pk = item
        .get(&schema.key_attributes[0])
        .cloned()
        .unwrap_or(AttributeValue::Null(true));
    let Ok(window) = layout.window_for(ttl, &pk) else {
        return ItemPlan::InvalidTtl;
    };
    let current = item.get(&layout.window_attribute);
    if current == Some(&AttributeValue::S(window.clone())) {
        return ItemPlan::AlreadyOk;
    }
    ItemPlan::SetWindow {
        ttl: raw_ttl.clone(),
        current: current.cloned(),
        window,
    }
}

/// Runs (or resumes) a backfill. `save` is called with the state after every page;
/// `progress` with the number of items scanned so far.
pub async fn backfill(
    store: &DynamoStore,
    schema: &TableSchema,
    options: &BackfillOptions,
    state: BackfillState,
    save: &(dyn Fn(&BackfillState) + Sync),
    progress: &(dyn Fn(u64) + Sync),
) -> BackfillState {
    let now = options.now;
    let layout = &schema.layout;
    let positions: Vec<Position> = (0..state.positions.len())
        .map(|i| state.position(i))
        .collect();
    let shared = Mutex::new(state);
    let limit = options.max_wcu.map(RateLimit::new);
    let mut attributes = schema.key_attributes.clone();
    attributes.push(layout.ttl_attribute.clone());
    attributes.push(layout.window_attribute.clone());
    attributes.dedup();

    let result = parallel_scan(
        store,
        &schema.table_name,
        positions,
        &attributes,
        options.page_limit,
        |page: ScanPageOf| {
            let (shared, limit) = (&shared, &limit);
            async move {
                let mut counts = BackfillReport::default();
                for item in &page.items {
                    counts.scanned += 1;
                    let (ttl, current, window) = match plan_item(item, schema, now) {
                        ItemPlan::NoTtl => {
                            counts.no_ttl += 1;
                            continue;
                        }
                        ItemPlan::InvalidTtl => {
                            counts.invalid_ttl += 1;
                            continue;
                        }
                        ItemPlan::TooOldTtl => {
                            counts.invalid_ttl += 1;
                            counts.too_old_ttl += 1;
                            continue;
                        }
                        ItemPlan::AlreadyOk => {
                            counts.already_ok += 1;
                            continue;
                        }
                        ItemPlan::DeleteExpired { ttl } => {
                            if options.dry_run {
                                counts.deleted_expired += 1;
                                continue;
                            }
                            let key = key_of(schema, item)?;
                            if let Some(limit) = limit {
                                limit.acquire().await;
                            }
                            let (outcome, consumed) = with_retries(|| {
                                store.delete_if_ttl_unchanged(
                                    &schema.table_name,
                                    key.clone(),
                                    &layout.ttl_attribute,
                                    AttributeValue::N(ttl.clone()),
                                )
                            })
                            .await?;
                            if let Some(limit) = limit {
                                limit.charge(consumed - 1.0);
                            }
                            counts.consumed_wcu += consumed;
                            match outcome {
                                ConditionalOutcome::Deleted => counts.deleted_expired += 1,
                                ConditionalOutcome::Kept => counts.expired_kept += 1,
                                ConditionalOutcome::Gone => counts.expired_gone += 1,
                            }
                            continue;
                        }
                        ItemPlan::SetWindow {
                            ttl,
                            current,
                            window,
                        } => (ttl, current, window),
                    };
                    if options.dry_run {
                        counts.written += 1;
                        continue;
                    }
                    let key = key_of(schema, item)?;
                    if let Some(limit) = limit {
                        limit.acquire().await;
                    }
                    let (outcome, consumed) = with_retries(|| {
                        store.set_window_if_unchanged(
                            &schema.table_name,
                            key.clone(),
                            &layout.ttl_attribute,
                            AttributeValue::N(ttl.clone()),
                            &layout.window_attribute,
                            current.clone(),
                            window.clone(),
                        )
                    })
                    .await?;
                    if let Some(limit) = limit {
                        limit.charge(consumed - 1.0);
                    }
                    counts.consumed_wcu += consumed;
                    match outcome {
                        UpdateOutcome::Written => counts.written += 1,
                        UpdateOutcome::Changed => counts.changed_concurrently += 1,
                    }
                }
                let snapshot = {
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    add(&mut s.report, &counts);
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

/// The primary key of a scanned item.
fn key_of(schema: &TableSchema, item: &Key) -> Result<Key, StoreError> {
    schema.key_of(item).ok_or_else(|| {
        StoreError::new(
            ErrorKind::Validation,
            "Scan",
            "item without its key attributes",
        )
    })
}

/// Runs `request` until it succeeds, fails for good, or has been retried 8 times after retryable
/// errors, with backoff and full jitter.
async fn with_retries<T, F, Fut>(mut request: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 0u32;
    loop {
        match request().await {
            Err(e) if e.kind.is_retryable() && attempt < 8 => {
                attempt += 1;
                let wait = full_jitter(Duration::from_millis(50), Duration::from_secs(5), attempt);
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}

fn add(total: &mut BackfillReport, page: &BackfillReport) {
    total.scanned += page.scanned;
    total.already_ok += page.already_ok;
    total.written += page.written;
    total.changed_concurrently += page.changed_concurrently;
    total.deleted_expired += page.deleted_expired;
    total.expired_kept += page.expired_kept;
    total.expired_gone += page.expired_gone;
    total.no_ttl += page.no_ttl;
    total.invalid_ttl += page.invalid_ttl;
    total.too_old_ttl += page.too_old_ttl;
    total.consumed_wcu += page.consumed_wcu;
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            !path.with_extension("json.tmp").exists(),
            "the temporary file is renamed"
        );
        assert_eq!(
            BackfillState::load_for_resume(&path, "sessions", &layout).unwrap(),
            state
        );

        let sharded = Layout {
            window_shards: 8,
            ..Layout::default()
        };
        for (table, layout) in [("sessions", &sharded), ("orders", &layout)] {
            let err = BackfillState::load_for_resume(&path, table, layout).unwrap_err();
            assert!(matches!(err, ProgressFileError::OtherRun { .. }), "{err}");
            assert!(
                err.to_string()
                    .contains("\"sessions\" with 60 s windows and 1 shards"),
                "{err}"
            );
        }
        std::fs::write(&path, "{}").unwrap();
        let err = BackfillState::load_for_resume(&path, "sessions", &layout).unwrap_err();
        assert!(matches!(err, ProgressFileError::Parse { .. }), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = BackfillState::load_for_resume(&path, "sessions", &layout).unwrap_err();
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
        assert_eq!(check_page_size(1), Ok(1));
        assert_eq!(check_page_size(1000), Ok(1000));
        for bad in [0, -1, 1001, i32::MAX] {
            assert!(check_page_size(bad).unwrap_err().contains("1 to 1000"));
        }
        assert_eq!(parse_page_size("500"), Ok(500));
        for bad in ["0", "-1", "99999999999", "lots"] {
            assert!(
                parse_page_size(bad).unwrap_err().contains("1 to 1000"),
                "{bad}"
            );
        }
    }

    fn schema() -> TableSchema {
        TableSchema {
            table_name: "t".into(),
            index_name: "i".into(),
            key_attributes: vec!["id".into()],
            layout: Layout::default(),
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
        let plan = |ttl, window| plan_item(&item(ttl, window), &schema(), now);
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

        // No file: fresh; --resume has nothing to resume.
        assert_eq!(
            start(false, false).unwrap(),
            Start::Fresh(BackfillState::new("sessions", &layout, 3))
        );
        assert!(matches!(
            start(true, false).unwrap_err(),
            ProgressFileError::Read { .. }
        ));

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
            start(false, false).unwrap_err(),
            ProgressFileError::NotProgress { .. }
        ));
        assert!(matches!(
            start(true, false).unwrap_err(),
            ProgressFileError::Parse { .. }
        ));
        // A progress file with an absurd number of segments.
        let mut huge = BackfillState::new("sessions", &layout, 1);
        huge.positions = vec![serde_json::json!("start"); MAX_SEGMENTS as usize + 1];
        huge.save_atomically(&path).unwrap();
        assert!(matches!(
            start(true, false).unwrap_err(),
            ProgressFileError::Segments { .. }
        ));
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
