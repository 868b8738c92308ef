//! `ttl-sweeper backfill`: give every existing item with a numeric ttl its window attribute.
//!
//! A parallel Scan reads the key, ttl and window attributes; each item whose window attribute is
//! missing or wrong gets it with a conditional `UpdateItem` that only succeeds if the item still
//! has the ttl and window it was read with — a concurrent change is never overwritten and a
//! deleted item never comes back. Items already expired get their window too, so the next sweep
//! removes them. Progress is saved after every page, so a killed run resumes where it stopped, and
//! re-running is harmless: correct items are only counted.
//!
//! The progress file ([`BackfillState`]) lives here too: its default path, loading it to resume
//! (only for the table, window width and shard count it was made for) and saving it atomically.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::scan::{parallel_scan, Position, ScanPageOf};
use crate::engine::full_jitter;
use crate::expiry::window::parse_ttl;
use crate::expiry::Layout;
use crate::store::scan::UpdateOutcome;
use crate::store::{
    key_from_json, key_to_json, DynamoStore, ErrorKind, Key, StoreError, TableSchema,
};

/// Counts of one backfill run (or, resumed, of all runs of one state file).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BackfillReport {
    /// Items read.
    pub scanned: u64,
    /// Items whose window attribute was already correct.
    pub already_ok: u64,
    /// Window attributes written (in a dry run: that would be written).
    pub written: u64,
    /// Of those, items whose ttl had already passed: the next sweep deletes them.
    pub written_expired: u64,
    /// Items changed or deleted between the scan and the update: left as they are.
    pub changed_concurrently: u64,
    /// Items without a ttl attribute: not expiring, nothing to do.
    pub no_ttl: u64,
    /// Items whose ttl is not a usable Number (string, milliseconds, negative): left alone.
    pub invalid_ttl: u64,
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

/// Knobs of a backfill run.
#[derive(Debug, Clone)]
pub struct BackfillOptions {
    /// Count only; write nothing.
    pub dry_run: bool,
    /// Write capacity units per second at most.
    pub max_wcu: Option<f64>,
    /// Scan page size.
    pub page_limit: Option<i32>,
    /// The current time (epoch seconds), to count items that are already expired.
    pub now: i64,
}

/// The default segment count for a table of `size_bytes`: one per 256 MiB, between 4 and 256.
pub fn default_segments(size_bytes: i64) -> u32 {
    let per = 256 * 1024 * 1024;
    ((size_bytes.max(0) + per - 1) / per).clamp(4, 256) as u32
}

/// A token bucket for write capacity.
struct RateLimit {
    per_second: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    fn new(per_second: f64) -> Self {
        RateLimit {
            per_second,
            state: Mutex::new((per_second, Instant::now())),
        }
    }

    /// Waits until one unit is available and takes it.
    async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.per_second)
                    .min(self.per_second);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                (1.0 - s.0) / self.per_second
            };
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }

    /// Charges what a write cost beyond the unit taken for it.
    fn charge(&self, extra: f64) {
        if extra > 0.0 {
            self.state.lock().unwrap_or_else(|e| e.into_inner()).0 -= extra;
        }
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
                    let raw_ttl = match item.get(&layout.ttl_attribute) {
                        None => {
                            counts.no_ttl += 1;
                            continue;
                        }
                        Some(AttributeValue::N(n)) => n.clone(),
                        Some(_) => {
                            counts.invalid_ttl += 1;
                            continue;
                        }
                    };
                    let Ok(ttl) = parse_ttl(&raw_ttl) else {
                        counts.invalid_ttl += 1;
                        continue;
                    };
                    let pk = item
                        .get(&schema.key_attributes[0])
                        .cloned()
                        .unwrap_or(AttributeValue::Null(true));
                    let Ok(expected) = layout.window_for(ttl, &pk) else {
                        counts.invalid_ttl += 1;
                        continue;
                    };
                    let current = item.get(&layout.window_attribute);
                    if current == Some(&AttributeValue::S(expected.clone())) {
                        counts.already_ok += 1;
                        continue;
                    }
                    if options.dry_run {
                        counts.written += 1;
                        counts.written_expired += u64::from(ttl < now as f64);
                        continue;
                    }
                    if let Some(limit) = limit {
                        limit.acquire().await;
                    }
                    let key = schema.key_of(item).ok_or_else(|| {
                        StoreError::new(
                            ErrorKind::Validation,
                            "Scan",
                            "item without its key attributes",
                        )
                    })?;
                    let (outcome, consumed) = update_with_retries(
                        store,
                        schema,
                        key,
                        raw_ttl,
                        current.cloned(),
                        expected,
                    )
                    .await?;
                    if let Some(limit) = limit {
                        limit.charge(consumed - 1.0);
                    }
                    counts.consumed_wcu += consumed;
                    match outcome {
                        UpdateOutcome::Written => {
                            counts.written += 1;
                            counts.written_expired += u64::from(ttl < now as f64);
                        }
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
    state.report.complete = state.positions.iter().all(|p| p == "done");
    save(&state);
    state
}

async fn update_with_retries(
    store: &DynamoStore,
    schema: &TableSchema,
    key: Key,
    raw_ttl: String,
    current: Option<AttributeValue>,
    expected: String,
) -> Result<(UpdateOutcome, f64), StoreError> {
    let mut attempt = 0u32;
    loop {
        let result = store
            .set_window_if_unchanged(
                &schema.table_name,
                key.clone(),
                &schema.layout.ttl_attribute,
                AttributeValue::N(raw_ttl.clone()),
                &schema.layout.window_attribute,
                current.clone(),
                expected.clone(),
            )
            .await;
        match result {
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
    total.written_expired += page.written_expired;
    total.changed_concurrently += page.changed_concurrently;
    total.no_ttl += page.no_ttl;
    total.invalid_ttl += page.invalid_ttl;
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
}
