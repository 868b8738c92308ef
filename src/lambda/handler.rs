//! One Lambda invocation: parse the event, sweep as of its time (never later than the clock),
//! stop before the invocation's deadline, log the summary and the EMF metrics, and return the
//! report — or an error, so that the invocation counts as failed, when any key could not be deleted.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::event::{parse_event, EventError, CLOCK_SKEW_TOLERANCE};
use crate::engine::hook::EventTally;
use crate::engine::tables::{unopened, Table};
use crate::engine::{run_ticks, Stop, SweepErrorEntry, SweepReport, Sweeper, Ticks};
use crate::expiry::{Clock, Timestamp};
use crate::store::{ErrorKind, Store};
use crate::telemetry;

/// Time kept free before the Lambda deadline: no new request starts after it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(3);

/// A DynamoDB call still unanswered this long before the Lambda deadline is cut
/// ([`crate::engine::Stop::bound`]), so that the summary, the metrics and the response go out.
pub const REPORT_RESERVE: Duration = Duration::from_secs(1);

/// The longest a Lambda invocation may run (15 minutes): no invocation has more time left.
pub const MAX_FUNCTION_TIMEOUT: Duration = Duration::from_secs(900);

/// The time an invocation takes for itself when no clock can tell how much it has ([`time_left`]):
/// enough for a short sweep and its report, within the timeouts this function is deployed with.
pub const TIME_LEFT_FLOOR: Duration = Duration::from_secs(10);

/// The time left before an invocation's `deadline` (epoch ms from the Runtime API), derived once
/// at its start from the host clock (`host`) and DynamoDB's (`dynamodb`, the upper bound its
/// `Date` headers give; see [`crate::store::ServerClock`]), then counted on the monotonic clock.
///
/// A clock that says the deadline has already passed is wrong (an invocation starts with its whole
/// timeout ahead) and is not believed; of the others the shorter is taken. No clock believed:
/// [`TIME_LEFT_FLOOR`]. At most [`MAX_FUNCTION_TIMEOUT`].
pub fn time_left(deadline: Timestamp, host: Timestamp, dynamodb: Option<Timestamp>) -> Duration {
    let left = [Some(host), dynamodb]
        .into_iter()
        .flatten()
        .map(|now| deadline.millis_since(now))
        .filter(|ms| *ms > 0)
        .min();
    match left {
        Some(ms) => Duration::from_millis(ms.unsigned_abs()).min(MAX_FUNCTION_TIMEOUT),
        None => {
            tracing::warn!(
                deadline = %deadline,
                host = %host,
                dynamodb_at_most = dynamodb.map(|t| t.to_string()),
                floor_s = TIME_LEFT_FLOOR.as_secs(),
                "every clock says the invocation's deadline has passed as it starts: \
                 stopping after the floor"
            );
            TIME_LEFT_FLOOR
        }
    }
}

/// In tick mode an invocation keeps ticking this long past the start of the next scheduled one,
/// which has then surely started: consecutive invocations overlap instead of leaving a gap. The
/// function needs a timeout of the schedule period plus this plus [`DEADLINE_MARGIN`], and a
/// reserved concurrency of 2.
pub const HANDOFF_OVERLAP: Duration = Duration::from_secs(10);

/// An event older than the schedule period plus this is stale (replayed, or delivered after
/// retries): the invocation sweeps as of the clock instead of the event's time.
pub const STALE_EVENT_SLACK: Duration = Duration::from_secs(60);

/// How invocations behave, from configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerSettings {
    /// CloudWatch namespace of the EMF metrics.
    pub namespace: String,
    /// Tick period, in tick mode.
    pub tick: Option<Duration>,
    /// Period of the schedule that invokes the function.
    pub schedule: Duration,
    /// Tick mode: how long an invocation overlaps the next one ([`HANDOFF_OVERLAP`]).
    pub handoff: Duration,
}

/// Why an invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The input was not understood; nothing was swept.
    #[error(transparent)]
    Event(#[from] EventError),
    /// Of several tables, some could not be swept or had keys that could not be deleted.
    #[error("{failed} of {tables} tables failed; the first: {first}")]
    TablesFailed {
        /// Tables that failed.
        failed: usize,
        /// Tables swept.
        tables: usize,
        /// The first failed table and its first error.
        first: String,
        /// Every table's report, in the order configured.
        reports: Vec<SweepReport>,
    },
    /// The sweep ran but some keys could not be deleted or some windows could not be read.
    #[error(
        "sweep of {} at {}: {} item(s) failed, {} error(s): {first}",
        .report.table, .report.sweep_at, .report.items_failed, .report.errors.len()
    )]
    SweepFailed {
        /// The first error message, if any.
        first: String,
        /// The full report.
        report: Box<SweepReport>,
    },
}

impl HandlerError {
    /// A stable error type for Lambda's error reporting.
    pub fn error_type(&self) -> &'static str {
        match self {
            HandlerError::Event(_) => "InvalidEvent",
            HandlerError::SweepFailed { .. } | HandlerError::TablesFailed { .. } => "SweepFailed",
        }
    }
}

impl From<HandlerError> for lambda_runtime::Diagnostic {
    fn from(e: HandlerError) -> Self {
        lambda_runtime::Diagnostic {
            error_type: e.error_type().to_owned(),
            error_message: e.to_string(),
        }
    }
}

/// Handles one invocation from the Lambda runtime: marks it in the logs
/// ([`telemetry::Invocation`]), writes the `ColdStart` EMF record on the environment's first
/// invocation, and runs [`handle_tables`] with `remaining`, the time left.
pub async fn invoke<S: Store>(
    tables: &[Table<S>],
    event: &lambda_runtime::LambdaEvent<Value>,
    clock: &impl Clock,
    remaining: Option<Duration>,
    settings: &HandlerSettings,
) -> Result<Value, HandlerError> {
    let invocation = telemetry::Invocation::begin(&event.context);
    if invocation.cold_start() {
        let function = &event.context.env_config.function_name;
        let (service, at) = (telemetry::service_name(), clock.now().millis());
        let record = telemetry::cold_start_record(&settings.namespace, function, &service, at);
        println!("{record}");
    }
    handle_tables(tables, &event.payload, clock, remaining, settings).await
}

/// Handles one invocation for every table, side by side, each as [`handle`] does. One table
/// answers its report; several answer `{"tables": [report, ...]}`, in the order configured, and
/// the invocation fails, naming them, when any of them did (or could not be opened).
pub async fn handle_tables<S: Store>(
    tables: &[Table<S>],
    event: &Value,
    clock: &impl Clock,
    remaining: Option<Duration>,
    settings: &HandlerSettings,
) -> Result<Value, HandlerError> {
    let trigger = parse(event)?;
    let begun = Instant::now();
    let each = tables.iter().map(|table| async {
        match table.sweeper().await {
            Ok(sweeper) => {
                // A table opened now (it could not be before) took some of the time left.
                let remaining = remaining.map(|r| r.saturating_sub(begun.elapsed()));
                sweep_as_asked(sweeper, trigger, clock, remaining, settings).await
            }
            Err(error) => finish(unopened(table.name(), error), clock.now(), settings),
        }
    });
    let mut results = futures::future::join_all(each).await;
    if results.len() == 1 {
        let report = results.pop().expect("one result")?;
        return Ok(serde_json::to_value(report).unwrap_or_default());
    }
    let mut reports = Vec::with_capacity(results.len());
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(report) => reports.push(report),
            Err(HandlerError::SweepFailed { report, first, .. }) => {
                failures.push(format!("{}: {first}", report.table));
                reports.push(*report);
            }
            Err(other) => return Err(other),
        }
    }
    if failures.is_empty() {
        return Ok(json!({ "tables": reports }));
    }
    Err(HandlerError::TablesFailed {
        failed: failures.len(),
        tables: reports.len(),
        first: failures.swap_remove(0),
        reports,
    })
}

/// Handles one invocation. `clock` reads the current time; `remaining` is the time left before
/// the invocation's deadline (`None`: no deadline; see [`time_left`]): new requests stop
/// [`DEADLINE_MARGIN`] before it and calls in flight are cut [`REPORT_RESERVE`] before it.
pub async fn handle<S: Store>(
    sweeper: &Sweeper<S>,
    event: &Value,
    clock: &impl Clock,
    remaining: Option<Duration>,
    settings: &HandlerSettings,
) -> Result<SweepReport, HandlerError> {
    sweep_as_asked(sweeper, parse(event)?, clock, remaining, settings).await
}

/// The instant `event` asks to sweep as of ([`parse_event`]); an event refused is logged.
fn parse(event: &Value) -> Result<Option<Timestamp>, HandlerError> {
    Ok(parse_event(event).inspect_err(|e| {
        tracing::error!(error = %e, "rejected the invocation's event; nothing swept");
    })?)
}

/// The sweep as of `trigger` (the event's time; `None`: now), of `sweeper`'s table, as [`handle`]
/// describes.
async fn sweep_as_asked<S: Store>(
    sweeper: &Sweeper<S>,
    trigger: Option<Timestamp>,
    clock: &impl Clock,
    remaining: Option<Duration>,
    settings: &HandlerSettings,
) -> Result<SweepReport, HandlerError> {
    let held = clock.hold(trigger);
    let (start, mut now) = (held.clock, held.at);
    if held.ahead > CLOCK_SKEW_TOLERANCE {
        let trigger = trigger.unwrap_or_default();
        tracing::warn!(%trigger, clock = %start, "event time is ahead of the clock; sweeping as of the clock");
    }
    if now < start - (settings.schedule + STALE_EVENT_SLACK) {
        // A replayed or long-delayed event: sweeping as of its time would be safe but would miss
        // everything since, and tick mode would read every window in between.
        tracing::warn!(event_time = %now, clock = %start, "event time is older than the schedule period; sweeping as of the clock");
        now = start;
    }
    let started = Instant::now();
    let stop = Stop::at(remaining.map(|r| started + r.saturating_sub(DEADLINE_MARGIN)))
        .with_calls_ending(remaining.map(|r| started + r.saturating_sub(REPORT_RESERVE)));
    let sweep = async {
        match settings.tick {
            None => sweeper.sweep(now, &stop).await,
            Some(every) => {
                // This invocation covers its schedule period, from its scheduled time (the event's)
                // to the next one's, and overlaps the next invocation by `handoff`.
                let end = now + settings.schedule + settings.handoff;
                let left = Duration::from_millis(
                    u64::try_from(end.millis_since(clock.now())).unwrap_or(0),
                );
                if remaining.is_some_and(|r| r < left + DEADLINE_MARGIN) {
                    tracing::warn!(
                    remaining_ms = remaining.map(|r| r.as_millis() as u64),
                    needed_ms = (left + DEADLINE_MARGIN).as_millis() as u64,
                    "the function's timeout ends this invocation before the next one surely started: \
                     expired items can wait until it does (timeout >= SCHEDULE_SECONDS + 13 s)"
                );
                }
                let ticks = Ticks {
                    every,
                    full_every: settings.schedule,
                    until: Some(Instant::now() + left),
                };
                run_ticks(sweeper, now, clock, &ticks, &stop, telemetry::log_tick).await
            }
        }
    };
    // The last resort, for what the store's bound does not cover (an expiry-event sink that does
    // not answer): the sweep is dropped and the summary says so. The sweep's future, large in a
    // debug build, is kept on the heap rather than on the stack of the thread that polls it.
    let sweep = Box::pin(sweep);
    let cut = remaining.map(|r| started + r.saturating_sub(REPORT_RESERVE / 2));
    let mut report = until(cut, sweep)
        .await
        .unwrap_or_else(|| cut_short(sweeper, now));
    report.clock_ahead_ms = report.clock_ahead_ms.max(clock.take_ahead_ms());
    finish(report, start, settings)
}

/// `work`'s output, or `None` when it is still running at `cut` (none: never cut).
pub(super) async fn until<F: std::future::Future>(
    cut: Option<Instant>,
    work: F,
) -> Option<F::Output> {
    match cut {
        None => Some(work.await),
        Some(cut) => tokio::time::timeout_at(cut, work).await.ok(),
    }
}

/// A table's sweep ends: its summary line and its EMF record (timestamped `at`), and the report, or
/// the error of a sweep that failed, with its first error.
fn finish(
    report: SweepReport,
    at: Timestamp,
    settings: &HandlerSettings,
) -> Result<SweepReport, HandlerError> {
    telemetry::log_summary(&report);
    let record = telemetry::emf_record(&report, &settings.namespace, at.millis());
    println!("{record}");
    if report.is_success() {
        return Ok(report);
    }
    let event = report.failed_event_ids.first().map(|e| {
        let (failed, id, reason) = (report.events_failed, &e.id, &e.reason);
        format!("{failed} expiry event(s) not published, first {id}: {reason}")
    });
    let first = (report.errors.first().map(|e| e.message.clone()))
        .or_else(|| report.failed_keys.first().map(|k| k.reason.clone()))
        .or(event)
        .unwrap_or_default();
    let report = Box::new(report);
    Err(HandlerError::SweepFailed { first, report })
}

/// The report of a sweep dropped at the deadline: what it did is unknown, and it failed. In notify
/// mode the items it deleted whose events it had not surely published are reported by event id.
fn cut_short<S: Store>(sweeper: &Sweeper<S>, now: Timestamp) -> SweepReport {
    let unpublished = sweeper.unpublished_events();
    let mut report = SweepReport {
        sweep_at: now.iso(),
        table: sweeper.schema().table_name.clone(),
        delete_mode: sweeper.options().delete_mode.to_string(),
        stopped_early: true,
        errors: vec![SweepErrorEntry {
            window: None,
            kind: ErrorKind::Transient,
            message: "the sweep had not finished half a second before the invocation's \
                      deadline and was dropped: what it deleted is not counted here"
                .into(),
        }],
        ..SweepReport::default()
    };
    if !unpublished.is_empty() {
        tracing::error!(
            events = unpublished.len(),
            "the dropped sweep had deleted items whose expiry events were not surely published"
        );
        report.add_events(EventTally {
            failed: unpublished.len() as u64,
            failed_events: unpublished,
            ..EventTally::default()
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_survives_a_wrong_host_clock() {
        let secs = Duration::from_secs;
        let right = Timestamp::from_secs(1_000_000);
        let deadline = right + secs(60);
        // Both clocks right (DynamoDB's bound up to a second ahead): a minute, give or take.
        assert_eq!(
            time_left(deadline, right, Some(right + Duration::from_millis(500))),
            Duration::from_millis(59_500)
        );
        // The host ten minutes ahead, past the deadline: DynamoDB's clock still gives a stop.
        assert_eq!(
            time_left(deadline, right + secs(600), Some(right)),
            secs(60)
        );
        // The host ten minutes behind: the time is not stretched.
        assert_eq!(
            time_left(deadline, right - secs(600), Some(right)),
            secs(60)
        );
        // The host ahead but not past the deadline: the shorter time.
        assert_eq!(time_left(deadline, right + secs(20), Some(right)), secs(40));
        // Nothing to believe: the floor, still a stop.
        assert_eq!(
            time_left(deadline, right + secs(600), None),
            TIME_LEFT_FLOOR
        );
        assert_eq!(
            time_left(deadline, right + secs(600), Some(right + secs(61))),
            TIME_LEFT_FLOOR
        );
        // Only a host a day behind: no more than a Lambda may run.
        assert_eq!(
            time_left(deadline, right - secs(86_400), None),
            MAX_FUNCTION_TIMEOUT
        );
    }
}
