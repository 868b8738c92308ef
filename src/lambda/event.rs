//! The Lambda's input: which instant to sweep as of.
//!
//! Accepted, and nothing else:
//! - an EventBridge scheduled event (`{"source": "aws.events", "detail-type": "Scheduled Event",
//!   "time": "...", ...}`): its `time`;
//! - the published design's transformed input `{"time": "<RFC 3339>"}`: that time;
//! - `{}` or `null`: now.
//!
//! A sweep must never run as of a time ahead of the real clock — that would delete items that have
//! not expired — so the handler holds what the event asks for ([`parse_event`]) to the clock
//! ([`crate::expiry::Clock::hold`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::expiry::Timestamp;

/// How far ahead of the clock an event's time may be before it is reported as suspicious.
pub const CLOCK_SKEW_TOLERANCE: std::time::Duration = std::time::Duration::from_secs(5);

/// The Lambda input could not be understood; nothing was deleted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// The input is not one of the accepted shapes.
    #[error(
        "unsupported event {0}: expected an EventBridge scheduled event \
         ({{\"source\":\"aws.events\",\"time\":...}}), {{\"time\":\"<RFC 3339>\"}}, or {{}}"
    )]
    Unsupported(String),
    /// A batch of DynamoDB Streams records the stream indexer refuses as a whole: it does not parse,
    /// or holds a record of another table's stream.
    #[error("stream batch refused: {0}")]
    StreamBatch(String),
    /// The shape is right but the time is not an RFC 3339 timestamp.
    #[error("event time {0:?} is not an RFC 3339 timestamp (e.g. \"2022-07-19T20:55:00Z\")")]
    BadTime(String),
}

/// Parses the Lambda input: the instant it asks to sweep as of, `None` for now.
pub fn parse_event(value: &Value) -> Result<Option<Timestamp>, EventError> {
    let obj = match value {
        Value::Null => return Ok(None),
        Value::Object(obj) => obj,
        other => return Err(EventError::Unsupported(summarize(other))),
    };
    if obj.is_empty() {
        return Ok(None);
    }
    let at = |text| parse_time(text).map(Some);
    if let Some(source) = obj.get("source") {
        let source = source.as_str().unwrap_or_default();
        if source != "aws.events" && source != "aws.scheduler" {
            return Err(EventError::Unsupported(format!("from source {source:?}")));
        }
        let time = obj.get("time").and_then(Value::as_str);
        let untimed =
            || EventError::Unsupported("from aws.events without a \"time\" string".into());
        return at(time.ok_or_else(untimed)?);
    }
    if let (1, Some(time)) = (obj.len(), obj.get("time")) {
        let unreadable = || EventError::BadTime(time.to_string());
        return at(time.as_str().ok_or_else(unreadable)?);
    }
    Err(EventError::Unsupported(summarize(value)))
}

/// Parses an RFC 3339 timestamp.
pub fn parse_time(text: &str) -> Result<Timestamp, EventError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| Timestamp::from_datetime(t.with_timezone(&Utc)))
        .map_err(|_| EventError::BadTime(text.to_owned()))
}

fn summarize(value: &Value) -> String {
    match value {
        Value::Object(obj) => format!("with keys {:?}", obj.keys().take(10).collect::<Vec<_>>()),
        Value::Array(_) => "(an array)".into(),
        Value::String(_) => "(a string)".into(),
        Value::Number(_) => "(a number)".into(),
        Value::Bool(_) => "(a boolean)".into(),
        Value::Null => "(null)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::Clock;
    use proptest::prelude::*;
    use serde_json::json;
    use std::time::Duration;

    fn t(s: &str) -> Timestamp {
        parse_time(s).unwrap()
    }

    #[test]
    fn scheduled_event_fixture_gives_its_time() {
        let v: Value =
            serde_json::from_slice(include_bytes!("../../tests/fixtures/scheduled-event.json"))
                .unwrap();
        assert_eq!(parse_event(&v), Ok(Some(t("2022-07-19T20:55:00Z"))));
    }

    #[test]
    fn transformed_and_empty_inputs() {
        assert_eq!(
            parse_event(&json!({"time": "2022-07-19T20:55:00.000Z"})),
            Ok(Some(t("2022-07-19T20:55:00Z")))
        );
        assert_eq!(parse_event(&json!({})), Ok(None));
        assert_eq!(parse_event(&Value::Null), Ok(None));
    }

    #[test]
    fn malformed_inputs_are_rejected_with_what_was_expected() {
        let cases = [
            json!([1, 2]),
            json!("2022-07-19T20:55:00Z"),
            json!(42),
            json!({"foo": "bar"}),
            json!({"time": "2022-07-19T20:55:00Z", "extra": 1}),
            json!({"source": "aws.s3", "time": "2022-07-19T20:55:00Z"}),
            json!({"source": "aws.events"}),
        ];
        for case in cases {
            let err = parse_event(&case).unwrap_err();
            assert!(matches!(err, EventError::Unsupported(_)), "{case}: {err}");
            assert!(err.to_string().contains("expected"), "{err}");
        }
        for case in [
            json!({"time": "yesterday"}),
            json!({"time": 1658264100}),
            json!({"time": "2022-13-45T99:00:00Z"}),
            json!({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}, "time": "soon"}),
        ] {
            assert!(
                matches!(parse_event(&case), Err(EventError::BadTime(_))),
                "{case}"
            );
        }
    }

    #[test]
    fn future_event_times_are_held_to_the_clock() {
        let clock = t("2022-07-19T20:55:00Z");
        let held = |event: &str| (|| clock).hold(Some(t(event)));
        let past = held("2022-07-19T20:54:00Z");
        assert_eq!(
            (past.at, past.ahead),
            (clock - Duration::from_secs(60), Duration::ZERO)
        );
        let soon = held("2022-07-19T20:55:02Z");
        assert_eq!((soon.at, soon.ahead), (clock, Duration::from_secs(2)));
        let far = held("2099-01-01T00:00:00Z");
        assert_eq!(far.at, clock);
        assert!(far.ahead > CLOCK_SKEW_TOLERANCE);
        let now = (|| clock).hold(None);
        assert_eq!((now.at, now.ahead), (clock, Duration::ZERO));
    }

    proptest! {
        /// Whatever the input, parsing never panics and never yields a sweep instant after the clock.
        #[test]
        fn arbitrary_json_never_sweeps_ahead_of_the_clock(
            time in ".{0,30}",
            key in "[a-z-]{1,12}",
            clock in 0i64..4_000_000_000,
        ) {
            let clock = Timestamp::from_secs(clock);
            for v in [json!({"time": time}), json!({"source": "aws.events", "time": time}), json!({key.clone(): time})] {
                if let Ok(trigger) = parse_event(&v) {
                    prop_assert!((|| clock).hold(trigger).at <= clock);
                }
            }
        }
    }
}
