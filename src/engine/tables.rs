//! Several tables, one sweeper: [`Table`], one swept table's sweeper, opened when first needed and
//! opened again after a failure, so that one table that cannot be opened (deleted, its index
//! missing, its describe throttled) is reported in every sweep and never stops the others.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::{Stop, SweepErrorEntry, SweepReport, Sweeper};
use crate::expiry::{Clock, Timestamp};
use crate::store::{lock, Store, StoreError};

/// Opens one table: its start-up checks, then its sweeper.
pub type Open<S> = Box<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<Sweeper<S>, StoreError>> + Send>> + Send + Sync,
>;

/// One swept table: its sweeper once the table has been opened; until then, the last error and
/// when to try again.
pub struct Table<S> {
    name: String,
    sweeper: OnceCell<Sweeper<S>>,
    open: Open<S>,
    retry_every: Duration,
    /// The last failure to open, and the earliest instant to try again.
    failed: Mutex<Option<(SweepErrorEntry, Instant)>>,
}

impl<S> std::fmt::Debug for Table<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("open", &self.sweeper.initialized())
            .finish()
    }
}

impl<S: Store> Table<S> {
    /// A table already opened.
    pub fn ready(sweeper: Sweeper<S>) -> Self {
        let open: Open<S> =
            Box::new(|| Box::pin(async { unreachable!("an opened table is never opened again") }));
        let unopened = Table::lazy(&sweeper.schema().table_name, open, Duration::MAX);
        Table {
            sweeper: OnceCell::new_with(Some(sweeper)),
            ..unopened
        }
    }

    /// A table `name` that `open` opens when first needed, and again at most every `retry_every`
    /// while it fails.
    pub fn lazy(name: &str, open: Open<S>, retry_every: Duration) -> Self {
        Table {
            name: name.to_owned(),
            sweeper: OnceCell::new(),
            open,
            retry_every,
            failed: Mutex::new(None),
        }
    }

    /// The table's name, as configured.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sweeper, opening the table if it is not yet open and the last failure is old enough;
    /// else the failure (the last one, until it is time to try again).
    pub async fn sweeper(&self) -> Result<&Sweeper<S>, SweepErrorEntry> {
        if let Some(sweeper) = self.sweeper.get() {
            return Ok(sweeper);
        }
        if let Some((error, retry_at)) = &*lock(&self.failed) {
            if Instant::now() < *retry_at {
                return Err(error.clone());
            }
        }
        match self.sweeper.get_or_try_init(|| (self.open)()).await {
            Ok(sweeper) => {
                if lock(&self.failed).take().is_some() {
                    tracing::info!(table = %self.name, "the table opened: sweeping it");
                }
                Ok(sweeper)
            }
            Err(error) => {
                tracing::error!(table = %self.name, error = %error, retry_in_s = self.retry_every.as_secs(), "the table cannot be swept; the other tables are");
                let retry_at = Instant::now()
                    .checked_add(self.retry_every)
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
                let entry = SweepErrorEntry::new(None, &error);
                *lock(&self.failed) = Some((entry.clone(), retry_at));
                Err(entry)
            }
        }
    }
}

/// One sweep of every table as of `now`, side by side: one report per table, in the order given,
/// that of a table that cannot be opened saying so. `clock` is the sweep clock, whose pull-back
/// each report carries.
pub async fn sweep_each<S: Store>(
    tables: &[Table<S>],
    now: Timestamp,
    clock: &dyn Clock,
) -> Vec<SweepReport> {
    let each = tables.iter().map(|table| async move {
        let mut report = match table.sweeper().await {
            Ok(sweeper) => sweeper.sweep(now, &Stop::never()).await,
            Err(error) => unopened(table.name(), error),
        };
        report.clock_ahead_ms = report.clock_ahead_ms.max(clock.take_ahead_ms());
        report
    });
    futures::future::join_all(each).await
}

/// The report of a sweep of `table` that could not run: the table could not be opened.
pub fn unopened(table: &str, error: SweepErrorEntry) -> SweepReport {
    SweepReport {
        table: table.to_owned(),
        errors: vec![error],
        ..SweepReport::default()
    }
}
