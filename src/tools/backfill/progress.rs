//! The backfill's progress file: [`BackfillState`], its default path, how a run starts from it
//! ([`start`]: fresh, resumed, or already complete), loading it to resume (only for the table,
//! window width and shard count it was made for) and saving it atomically; and a whole run with
//! its file ([`run_with_file`]), as `ttl-sweeper backfill` makes one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{backfill, default_segments, BackfillOptions, BackfillReport};
use crate::expiry::{Clock, Layout};
use crate::store::{key_from_json, OpenedTable, Scan};
use crate::tools::scan::{Position, MAX_SEGMENTS};

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
        let parse = |path, source| ProgressFileError::Parse { path, source };
        let state = read_state(path, parse)?;
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

    /// Writes the state to `path` through a temporary file renamed over it, so a run killed while
    /// saving leaves the previous progress intact, never a half-written file.
    pub fn save_atomically(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, path)
    }

    pub(super) fn position(&self, i: usize) -> Position {
        match &self.positions[i] {
            serde_json::Value::String(s) if s == "done" => Position::Done,
            serde_json::Value::Object(o) => o
                .get("after")
                .and_then(key_from_json)
                .map_or(Position::Start, Position::After),
            _ => Position::Start,
        }
    }
}

/// The state in the file at `path`; `unparsed` is the error of a file that holds none.
fn read_state(
    path: &Path,
    unparsed: fn(PathBuf, serde_json::Error) -> ProgressFileError,
) -> Result<BackfillState, ProgressFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProgressFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| unparsed(path.to_owned(), source))
}

/// The progress file of a backfill on `table` when none is given:
/// `ttl-sweeper-backfill-<table>.json` in the working directory (an ARN's `/` and `:` become `_`).
pub fn default_state_path(table: &str) -> PathBuf {
    let name = table.replace(['/', ':'], "_");
    format!("ttl-sweeper-backfill-{name}.json").into()
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
    /// Without `--resume`: something not a progress file is where the run would save its progress.
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
    /// `--resume` of a run that already finished: nothing to do; the state holds its summary.
    AlreadyComplete(BackfillState),
}

/// Where a backfill keeps its progress, and how it starts from it ([`run_with_file`]).
#[derive(Debug, Clone, Copy)]
pub struct ProgressFile<'a> {
    /// The file (`--state`; [`default_state_path`] by default).
    pub path: &'a Path,
    /// The table as configured: the file is for it alone.
    pub table: &'a str,
    /// Continue the interrupted run the file holds (`--resume`).
    pub resume: bool,
    /// Parallel Scan segments of a fresh run; `None`: [`default_segments`] of the table's size.
    pub segments: Option<u32>,
}

/// How [`run_with_file`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    /// The run went to its end or to an error: its state (saved after every page, unless a dry
    /// run), whose report counts every run of the file.
    Ran(BackfillState),
    /// `--resume` of a run that is complete: nothing ran; that run's summary.
    AlreadyComplete(BackfillReport),
}

/// Runs a backfill of `opened` with its progress `file`: started as [`start`] decides (a resumed
/// run without the errors that stopped it; a replaced file said in the log), saved after every
/// page unless `options.dry_run`; `progress` sees the items scanned so far.
pub async fn run_with_file(
    store: &impl Scan,
    opened: &OpenedTable,
    options: &BackfillOptions,
    clock: &dyn Clock,
    file: ProgressFile<'_>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Finished, ProgressFileError> {
    let (path, dry_run) = (file.path, options.dry_run);
    let segments = file
        .segments
        .unwrap_or_else(|| default_segments(opened.size_bytes));
    let replacing = !file.resume && !dry_run && path.exists();
    let layout = &opened.schema.layout;
    let state = match start(path, file.table, layout, segments, file.resume, dry_run)? {
        Start::Fresh(state) => {
            if replacing {
                tracing::info!(
                    path = %path.display(),
                    "the progress file is from a complete run: starting a fresh one, which replaces it"
                );
            }
            state
        }
        Start::Resume(mut state) => {
            // The errors that stopped the interrupted run are not this run's.
            state.report.errors.clear();
            state
        }
        Start::AlreadyComplete(mut state) => {
            tracing::info!(
                path = %path.display(),
                "the backfill in the progress file is already complete: nothing to resume (run \
                 without --resume to start a fresh one); its summary follows"
            );
            state.report.complete = true;
            return Ok(Finished::AlreadyComplete(state.report));
        }
    };
    let save = |s: &BackfillState| {
        if !dry_run {
            if let Err(e) = s.save_atomically(path) {
                tracing::warn!(error = %e, path = %path.display(), "could not save progress");
            }
        }
    };
    let schema = &opened.schema;
    let done = backfill(store, schema, options, clock, state, &save, progress).await;
    Ok(Finished::Ran(done))
}

/// Decides how a backfill of `table` with `layout` starts from the progress file at `path`
/// ([`Start`]): with `resume`, from the file ([`BackfillState::load_for_resume`]); without, a
/// fresh run of `segments` segments, also in a dry run (which never saves), but the file of an
/// interrupted run is refused (only removing it should throw its progress away), and so is a
/// file that is not one ([`ProgressFileError`]).
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
    // A missing file starts a fresh run; one that cannot be read is refused.
    if dry_run || !path.try_exists().unwrap_or(true) {
        return Ok(fresh());
    }
    let not_progress = |path, source| ProgressFileError::NotProgress { path, source };
    let saved = read_state(path, not_progress)?;
    if saved.is_complete() {
        Ok(fresh())
    } else {
        Err(ProgressFileError::Interrupted {
            path: path.to_owned(),
            done: saved.positions.iter().filter(|p| *p == "done").count(),
            total: saved.positions.len(),
            scanned: saved.report.scanned,
            table: saved.table,
        })
    }
}
