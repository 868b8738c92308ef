//! Telling an expiry from an application's delete in DynamoDB Streams.
//!
//! A `REMOVE` record of an expired item looks the same whoever deleted it: native TTL, the sweeper,
//! or the application. Native TTL marks its own deletes with `userIdentity`, but only in the Region
//! where the item expired (a global table's replicas get a plain `REMOVE`). What every `REMOVE`
//! record does carry, in every Region, is the old image and the time the record was written.
//! [`is_expiry_removal`] compares the two: the item was expired when it was removed if its ttl (a
//! Number of epoch seconds, by native TTL's rule) is before the record's
//! `ApproximateCreationDateTime`.
//!
//! The record's time is rounded *down* to the second by DynamoDB Streams, so the comparison is made
//! against the end of that second: a ttl of `1700000000` removed at `1700000000.4` (reported as
//! `1700000000`) is an expiry. With whole-second ttls, the usual case, that is exact; a fractional
//! ttl removed within the same second can be counted as an expiry up to one second early.
//!
//! Records the function cannot judge are not expiries: `INSERT` and `MODIFY`, a stream without old
//! images (`KEYS_ONLY`, `NEW_IMAGE`), a ttl that is missing, not a Number, negative, in
//! milliseconds, or more than five years before the record (native TTL and the sweeper never delete
//! those), and a record with no creation time.
//!
//! The same rule in Python and TypeScript is in `docs/events.md`, tested against the vectors in
//! `spec/expiry-removal-vectors.json`.

use aws_lambda_events::dynamodb::EventRecord;
use serde_dynamo::AttributeValue;

use crate::expiry::window::{parse_ttl, ttl_state, TtlState};
use crate::expiry::Timestamp;

/// True when `record` is a DynamoDB Streams `REMOVE` of an item expired by `ttl_attribute`, by the
/// rule of the [module](self) documentation: the sweeper's deletes and native TTL's, in every Region.
///
/// ```
/// use aws_lambda_events::dynamodb::Event;
/// use ttl_sweeper::streams::is_expiry_removal;
///
/// let event: Event = serde_json::from_str(r#"{"Records": [{
///     "eventID": "1", "eventName": "REMOVE", "awsRegion": "eu-west-1",
///     "dynamodb": {
///         "ApproximateCreationDateTime": 1700000003,
///         "Keys": {"id": {"S": "session-1"}},
///         "OldImage": {"id": {"S": "session-1"}, "ttl": {"N": "1700000000"}},
///         "SizeBytes": 40
///     }
/// }]}"#).unwrap();
/// assert!(is_expiry_removal(&event.records[0], "ttl"));
/// ```
pub fn is_expiry_removal(record: &EventRecord, ttl_attribute: &str) -> bool {
    if record.event_name != "REMOVE" {
        return false;
    }
    let Some(AttributeValue::N(text)) = record.change.old_image.get(ttl_attribute) else {
        return false;
    };
    let Ok(ttl) = parse_ttl(text) else {
        return false;
    };
    let created = record.change.approximate_creation_date_time.timestamp();
    if created <= 0 {
        // Absent from the record (it deserializes as the epoch): nothing to compare with.
        return false;
    }
    let end_of_second = Timestamp::from_secs(created.saturating_add(1));
    ttl_state(ttl, end_of_second) == TtlState::Expired
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const CREATED: i64 = 1_700_000_100;
    const FIVE_YEARS: i64 = crate::expiry::window::MAX_EXPIRED_AGE_SECONDS;

    fn record(event_name: &str, created: Option<f64>, old_ttl: Option<Value>) -> EventRecord {
        let mut change = json!({
            "Keys": {"id": {"S": "a"}},
            "NewImage": {"id": {"S": "a"}, "ttl": {"N": "1"}},
            "SizeBytes": 10,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        });
        if let Some(created) = created {
            change["ApproximateCreationDateTime"] = json!(created);
        }
        if let Some(ttl) = old_ttl {
            change["OldImage"] = json!({"id": {"S": "a"}, "ttl": ttl});
        }
        serde_json::from_value(json!({
            "eventID": "e", "eventName": event_name, "awsRegion": "us-east-1",
            "dynamodb": change,
        }))
        .expect("a valid stream record")
    }

    fn remove(ttl: Value) -> EventRecord {
        record("REMOVE", Some(CREATED as f64), Some(ttl))
    }

    fn n(text: impl ToString) -> Value {
        json!({ "N": text.to_string() })
    }

    #[test]
    fn a_ttl_before_the_record_is_an_expiry() {
        assert!(is_expiry_removal(&remove(n(CREATED - 1)), "ttl"));
        assert!(is_expiry_removal(&remove(n(CREATED - 86_400)), "ttl"));
        assert!(is_expiry_removal(&remove(n("1700000099.5")), "ttl"));
    }

    #[test]
    fn a_ttl_in_the_records_second_is_an_expiry_because_the_time_is_rounded_down() {
        assert!(is_expiry_removal(&remove(n(CREATED)), "ttl"));
        assert!(is_expiry_removal(&remove(n("1700000100.999")), "ttl"));
        assert!(!is_expiry_removal(&remove(n(CREATED + 1)), "ttl"));
    }

    #[test]
    fn a_ttl_after_the_record_is_an_applications_delete() {
        assert!(!is_expiry_removal(&remove(n(CREATED + 1)), "ttl"));
        assert!(!is_expiry_removal(&remove(n(CREATED + 3600)), "ttl"));
    }

    #[test]
    fn millisecond_string_negative_and_malformed_ttls_are_not_expiries() {
        for ttl in [
            n((CREATED - 10) * 1000),
            n((CREATED - 10) * 1_000_000),
            n(-5),
            n("NaN"),
            n("1e400"),
            json!({"S": (CREATED - 10).to_string()}),
            json!({"NULL": true}),
            json!({"L": [{"N": (CREATED - 10).to_string()}]}),
        ] {
            assert!(!is_expiry_removal(&remove(ttl.clone()), "ttl"), "{ttl}");
        }
    }

    #[test]
    fn a_ttl_more_than_five_years_old_is_not_an_expiry() {
        assert!(is_expiry_removal(
            &remove(n(CREATED - FIVE_YEARS + 10)),
            "ttl"
        ));
        assert!(!is_expiry_removal(
            &remove(n(CREATED - FIVE_YEARS - 10)),
            "ttl"
        ));
        assert!(!is_expiry_removal(&remove(n(0)), "ttl"));
    }

    #[test]
    fn inserts_modifies_and_records_without_old_image_or_time_are_not_expiries() {
        let old = Some(n(CREATED - 10));
        assert!(!is_expiry_removal(
            &record("INSERT", Some(CREATED as f64), old.clone()),
            "ttl"
        ));
        assert!(!is_expiry_removal(
            &record("MODIFY", Some(CREATED as f64), old.clone()),
            "ttl"
        ));
        assert!(!is_expiry_removal(
            &record("REMOVE", Some(CREATED as f64), None),
            "ttl"
        ));
        assert!(!is_expiry_removal(&record("REMOVE", None, old), "ttl"));
    }

    #[test]
    fn the_ttl_attribute_is_the_one_named() {
        let r = remove(n(CREATED - 10));
        assert!(is_expiry_removal(&r, "ttl"));
        assert!(!is_expiry_removal(&r, "expiresAt"));
    }

    #[test]
    fn a_null_old_image_reads_as_missing() {
        let r: EventRecord = serde_json::from_value(json!({
            "eventID": "e", "eventName": "REMOVE", "awsRegion": "us-east-1",
            "dynamodb": {"ApproximateCreationDateTime": CREATED, "Keys": {"id": {"S": "a"}},
                         "OldImage": null, "SizeBytes": 10}
        }))
        .unwrap();
        assert!(!is_expiry_removal(&r, "ttl"));
    }

    proptest! {
        /// Whole-second ttls: an expiry exactly when the ttl is at or before the record's
        /// (rounded-down) second and within five years of it.
        #[test]
        fn whole_second_ttls_follow_the_rule(
            created in 200_000_000i64..4_000_000_000,
            offset in -(2 * FIVE_YEARS)..(2 * 86_400i64),
            fraction in 0.0f64..1.0,
        ) {
            let ttl = created + offset;
            prop_assume!(ttl >= 0);
            let r = record("REMOVE", Some(created as f64 + fraction), Some(n(ttl)));
            let expected = offset <= 0 && ttl >= created + 1 - FIVE_YEARS;
            prop_assert_eq!(is_expiry_removal(&r, "ttl"), expected);
        }

        /// Whatever the ttl text, only REMOVE records can be expiries, and never a ttl after the
        /// record's second.
        #[test]
        fn only_removes_and_never_after_the_record(
            created in 1i64..4_000_000_000,
            ttl in proptest::num::f64::ANY,
            name in prop::sample::select(vec!["INSERT", "MODIFY", "REMOVE"]),
        ) {
            let r = record(name, Some(created as f64), Some(n(ttl)));
            let got = is_expiry_removal(&r, "ttl");
            if got {
                prop_assert_eq!(name, "REMOVE");
                prop_assert!(ttl < (created + 1) as f64);
                prop_assert!(ttl >= 0.0);
            }
        }

        /// Milliseconds by mistake (a ttl a thousand times too big) are never an expiry for a
        /// record written before the year 9999.
        #[test]
        fn millisecond_ttls_are_never_expiries(
            created in 1_000_000_000i64..4_000_000_000,
            ttl_secs in 1_000_000_000i64..4_000_000_000,
        ) {
            let r = record("REMOVE", Some(created as f64), Some(n(ttl_secs * 1000)));
            prop_assert!(!is_expiry_removal(&r, "ttl"));
        }
    }
}
