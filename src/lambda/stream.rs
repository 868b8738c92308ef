//! The stream indexer's invocations: a batch of the table's DynamoDB Streams records from an event
//! source mapping, indexed into the sweeper's expiry index table by [`crate::index`] and answered
//! with the sequence number of each item's first failed record (`ReportBatchItemFailures`), which
//! Lambda delivers again with the records after it. A batch that does not parse, or holds a record
//! of another table's stream, fails the invocation as a whole and nothing of it is written.
//! Each execution environment reports how its batches went into the expiry index table
//! ([`Reporter`]), where the sweeper's lease reads it.

use std::time::Duration;

mod report;
pub use report::Reporter;

use aws_lambda_events::dynamodb::Event;
use serde::Deserialize;
use serde_json::{json, Value};

use super::event::EventError;
use super::handler::{until, HandlerError, DEADLINE_MARGIN};
use crate::engine::tables::Table;
use crate::engine::Stop;
use crate::expiry::Clock;
use crate::index::{delete_expired, index_records, IndexTarget, Indexed};
use crate::store::DynamoStore;
use crate::telemetry;
use tokio::time::Instant;

/// True when `event` is a batch of DynamoDB Streams records (`{"Records": [{"eventSource":
/// "aws:dynamodb", ...}]}`), for the stream indexer rather than a sweep.
pub fn is_stream_batch(event: &Value) -> bool {
    let of_dynamodb = |r: &Value| r["eventSource"].as_str() == Some("aws:dynamodb");
    let records = event.get("Records").and_then(Value::as_array);
    records.is_some_and(|records| records.iter().any(of_dynamodb))
}

/// Handles one stream invocation from the Lambda runtime: marks it in the logs
/// ([`telemetry::Invocation`]), then [`index_batch`] with `remaining`, the time left, for the table
/// whose stream the records come from (the one table when only one is swept).
pub async fn invoke_batch(
    tables: &[Table<DynamoStore>],
    event: &lambda_runtime::LambdaEvent<Value>,
    clock: &dyn Clock,
    remaining: Option<Duration>,
) -> Result<Value, HandlerError> {
    let _invocation = telemetry::Invocation::begin(&event.context);
    let arn = event.payload["Records"][0]["eventSourceARN"].as_str();
    let table = match tables {
        [one] => Some(one),
        several => several
            .iter()
            .find(|t| arn.is_some_and(|arn| from_table(arn, t.name()))),
    };
    let sweeper = match table {
        Some(table) => table.sweeper().await.map_err(|e| e.message),
        None => Err(format!(
            "stream records of {}, a table this function does not sweep",
            arn.unwrap_or("an unnamed stream")
        )),
    };
    index_batch(sweeper.map_err(refused)?, clock, &event.payload, remaining).await
}

/// The error of a batch refused as a whole, logged: nothing of it is written.
fn refused(problem: String) -> HandlerError {
    let e = EventError::StreamBatch(problem);
    tracing::error!(error = %e, "rejected the stream batch; nothing written");
    HandlerError::Event(e)
}

/// Indexes the batch `event` into `target`'s expiry index table and answers the records to
/// deliver again. Records still unhandled half of [`DEADLINE_MARGIN`] before the end of
/// `remaining` are all delivered again (an entry written twice is the same entry). A table
/// without an expiry index table (`EXPIRY_INDEX_TABLE`) refuses the batch as a whole. How the
/// batch went is then reported, when due, by this execution environment's [`Reporter`], until a
/// quarter of [`DEADLINE_MARGIN`] before the end.
pub async fn index_batch(
    target: &impl IndexTarget<Store = DynamoStore>,
    clock: &dyn Clock,
    event: &Value,
    remaining: Option<Duration>,
) -> Result<Value, HandlerError> {
    let schema = target.schema();
    let table = &schema.table_name;
    let batch = Event::deserialize(event)
        .map_err(|e| refused(format!("the DynamoDB Streams records do not parse: {e}")))?;
    let foreign = batch.records.iter().find_map(|r| {
        let arn = r.event_source_arn.as_deref()?;
        (!from_table(arn, table)).then_some(arn)
    });
    if let Some(arn) = foreign {
        let problem =
            format!("stream records of another table ({arn}); this function indexes {table}");
        return Err(refused(problem));
    }
    let Some(index_table) = schema.index.table() else {
        return Err(refused(format!(
            "stream records of {table}, which has no expiry index table: set EXPIRY_INDEX_TABLE \
             (the construct and the SAM template do with followStream)"
        )));
    };
    let started = Instant::now();
    let cut = remaining.map(|left| started + left.saturating_sub(DEADLINE_MARGIN / 2));
    // Items written already expired are deleted at once, by requests that end by the cut.
    let stop = Stop::at(cut).with_calls_ending(cut);
    let work = async {
        let mut indexed = index_records(target.store(), schema, clock, &batch.records).await;
        delete_expired(target, clock, &mut indexed, &stop).await;
        indexed
    };
    let indexed = until(cut, work).await.unwrap_or_else(|| {
        tracing::warn!(
            records = batch.records.len(),
            "the stream batch did not finish before the deadline; all of it is delivered again"
        );
        let first = batch.records.first().map(crate::index::sequence);
        let failures = vec![first.unwrap_or_default().to_owned()];
        Indexed {
            failures,
            ..Indexed::default()
        }
    });
    let reporter = Reporter::of_this_environment();
    let reported = reporter.report(
        target.store(),
        (table, index_table),
        &batch.records,
        &indexed,
        clock.now(),
    );
    let end = remaining.map(|left| started + left.saturating_sub(DEADLINE_MARGIN / 4));
    if until(end, reported).await.is_none() {
        tracing::warn!("the stream indexer's report was cut at the deadline");
    }
    let report = &indexed.report;
    // A batch indexed whole says so at debug only: at a record an invocation, an info line (and
    // the platform's, which the functions' system log level, WARN, leaves out) would cost more
    // in log ingestion than the batch's entries. A record not indexed, or a ttl not valid, is
    // said at info.
    macro_rules! batch_indexed {
        ($level:ident) => {
            tracing::$level!(
                table = %table,
                records = report.records,
                entries_written = report.entries_written,
                expired_when_written = report.expired_when_written,
                deleted_at_once = report.deleted_at_once,
                invalid_ttl = report.invalid_ttl,
                failed = report.failed,
                report = %serde_json::to_string(report).unwrap_or_default(),
                "stream batch indexed"
            )
        };
    }
    if report.failed > 0 || report.invalid_ttl > 0 {
        batch_indexed!(info);
    } else {
        batch_indexed!(debug);
    }
    let failures = indexed
        .failures
        .iter()
        .map(|sequence| json!({ "itemIdentifier": sequence }));
    Ok(json!({ "batchItemFailures": failures.collect::<Vec<_>>() }))
}

/// True when the stream ARN `arn` (`arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>`)
/// is a stream of `table` (a name, or a table ARN as the configuration allows).
fn from_table(arn: &str, table: &str) -> bool {
    let Some((table_arn, _label)) = arn.split_once("/stream/") else {
        return false;
    };
    let name = table_arn.rsplit_once(":table/").map(|(_, name)| name);
    table == table_arn || name == Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_batches_of_dynamodb_records_are_stream_batches() {
        let stream = json!({"Records": [{"eventSource": "aws:dynamodb", "eventName": "INSERT"}]});
        assert!(is_stream_batch(&stream));
        for other in [
            json!({}),
            json!(null),
            json!({"source": "aws.events", "time": "2026-01-01T00:00:00Z"}),
            json!({"Records": [{"eventSource": "aws:sqs"}]}),
            json!({"Records": []}),
            json!({"Records": "aws:dynamodb"}),
        ] {
            assert!(!is_stream_batch(&other), "{other}");
        }
    }

    #[test]
    fn a_stream_is_the_table_s_by_its_name_or_arn() {
        let table = "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions";
        let stream = format!("{table}/stream/2026-11-26T00:00:00.000");
        assert!(from_table(&stream, "sessions"));
        assert!(from_table(&stream, table));
        for other in [
            "sessions-v2",
            "sess",
            "arn:aws:dynamodb:us-east-1:123456789012:table/sessions",
        ] {
            assert!(!from_table(&stream, other), "{other}");
        }
        assert!(
            !from_table(table, "sessions"),
            "a table ARN is not a stream ARN"
        );
    }
}
