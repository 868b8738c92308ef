//! The event model, pure: what an expiry event says, its stable id, and its JSON shapes — the
//! `detail` object, and the envelope (`{"source", "detail-type", "detail"}`) of SQS and Firehose.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::expiry::Timestamp;
use crate::store::{key_to_json, Key};

/// The `source` of every event.
pub const SOURCE: &str = "ttl-sweeper";
/// The detail-type of an expiry.
pub const ITEM_EXPIRED: &str = "Item Expired";
/// The detail-type of an archive-mode cancellation: the delete found the ttl changed.
pub const EXPIRY_CANCELLED: &str = "Item Expiry Cancelled";
/// The `version` of the detail's shape.
pub const DETAIL_VERSION: u32 = 1;

/// When events are published relative to the delete (`EXPIRY_EVENTS_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventsMode {
    /// Delete, then publish.
    Notify,
    /// Publish; delete only what the sink accepted.
    Archive,
}

impl std::fmt::Display for EventsMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EventsMode::Notify => "notify",
            EventsMode::Archive => "archive",
        })
    }
}

/// How the item itself gets into an event (`EXPIRY_EVENTS_ITEM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemSource {
    /// When it comes without an extra read (conditional deletes in notify mode return it).
    Auto,
    /// A consistent `BatchGetItem` before the events are built.
    Read,
    /// Never.
    Off,
}

/// Expiry or cancellation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `Item Expired`.
    Expired,
    /// `Item Expiry Cancelled`.
    Cancelled,
}

impl EventKind {
    /// The detail-type.
    pub fn detail_type(self) -> &'static str {
        match self {
            EventKind::Expired => ITEM_EXPIRED,
            EventKind::Cancelled => EXPIRY_CANCELLED,
        }
    }
}

/// The stable id of an expiry: lowercase hex SHA-256 of `table`, the key in DynamoDB JSON with
/// attributes in name order and no whitespace, and the ttl's shortest decimal form, separated by
/// newlines: the same id whatever order the key's attributes come in.
pub fn event_id(table: &str, key: &Key, ttl: f64) -> String {
    let hash = Sha256::digest(format!("{table}\n{}\n{ttl}", key_to_json(key)));
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// The ttl as a JSON number: whole seconds as an integer (`1700000000`, not `1700000000.0`).
fn ttl_number(ttl: f64) -> Value {
    if ttl.fract() == 0.0 && ttl.abs() < 9.0e15 {
        json!(ttl as i64)
    } else {
        json!(ttl)
    }
}

/// One event, ready to encode for a sink.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiryEvent {
    /// Expiry or cancellation.
    pub kind: EventKind,
    /// The stable id ([`event_id`]).
    pub id: String,
    /// The key, as DynamoDB JSON (for reports of failed events).
    pub key: Value,
    /// The event's time: `deleted_at`, or `cancelled_at` for a cancellation.
    pub time: Timestamp,
    /// The detail object without `item` and `item_truncated`.
    detail: Value,
    /// The item as DynamoDB JSON, while it is kept.
    item: Option<Value>,
    /// True once the item was dropped for size.
    truncated: bool,
}

/// What an event describes, as the engine knows it.
#[derive(Debug, Clone, Copy)]
pub struct EventFacts<'a> {
    /// The table as configured.
    pub table: &'a str,
    /// The item's primary key.
    pub key: &'a Key,
    /// The ttl as read, epoch seconds.
    pub ttl: f64,
    /// When it was deleted (notify) or about to be (archive).
    pub deleted_at: Timestamp,
    /// `batch` or `conditional`.
    pub delete_mode: &'a str,
    /// Notify or archive.
    pub mode: EventsMode,
    /// The whole item, when available.
    pub item: Option<&'a Key>,
}

impl ExpiryEvent {
    /// The `Item Expired` event of `facts`.
    pub fn expired(facts: &EventFacts<'_>) -> Self {
        let id = event_id(facts.table, facts.key, facts.ttl);
        let key = key_to_json(facts.key);
        let lag_ms = (facts.deleted_at.millis() as f64 - facts.ttl * 1000.0)
            .max(0.0)
            .round() as u64;
        let detail = json!({
            "version": DETAIL_VERSION,
            "id": id,
            "table": facts.table,
            "key": key,
            "ttl": ttl_number(facts.ttl),
            "deleted_at": facts.deleted_at.iso(),
            "lag_ms": lag_ms,
            "delete_mode": facts.delete_mode,
            "mode": facts.mode,
        });
        ExpiryEvent {
            kind: EventKind::Expired,
            id,
            key,
            time: facts.deleted_at,
            detail,
            item: facts.item.map(key_to_json),
            truncated: false,
        }
    }

    /// The `Item Expiry Cancelled` event of `facts` (the same id and fields as its expiry, no
    /// item), found at `cancelled_at`.
    pub fn cancelled(facts: &EventFacts<'_>, cancelled_at: Timestamp) -> Self {
        let mut event = ExpiryEvent::expired(&EventFacts {
            item: None,
            ..*facts
        });
        event.kind = EventKind::Cancelled;
        event.time = cancelled_at;
        event.detail["cancelled_at"] = json!(cancelled_at.iso());
        event.detail["reason"] = json!("ttl changed");
        event
    }

    /// The de-duplication id of the event, where a sink de-duplicates by id (SQS FIFO's
    /// `MessageDeduplicationId`): the id for an expiry, the id with `-cancelled` appended for a
    /// cancellation. A cancellation shares its expiry's `id` but must never be taken for a
    /// duplicate of it; a retried expiry or cancellation gets the same de-duplication id again.
    pub fn deduplication_id(&self) -> String {
        match self.kind {
            EventKind::Expired => self.id.clone(),
            EventKind::Cancelled => format!("{}-cancelled", self.id),
        }
    }

    /// True when the event carries the item.
    pub fn has_item(&self) -> bool {
        self.item.is_some()
    }

    /// True when the item was dropped for size.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// Drops the item (to fit a size limit) and marks the event truncated; false if it had none.
    pub fn drop_item(&mut self) -> bool {
        let dropped = self.item.take().is_some();
        self.truncated |= dropped;
        dropped
    }

    /// The detail object (its JSON text is EventBridge's `Detail`).
    pub fn detail(&self) -> Value {
        let mut detail = self.detail.clone();
        if let Some(item) = &self.item {
            detail["item"] = item.clone();
        }
        detail["item_truncated"] = json!(self.truncated);
        detail
    }

    /// The envelope as JSON text: `{"source":..,"detail-type":..,"detail":{..}}` (an SQS
    /// message body; a Firehose record adds a newline).
    pub fn envelope_json(&self) -> String {
        json!({
            "source": SOURCE,
            "detail-type": self.kind.detail_type(),
            "detail": self.detail(),
        })
        .to_string()
    }
}

/// The SQS message body: the envelope, with U+FFFE and U+FFFF (which SQS refuses in a message)
/// written as JSON escapes; they can only occur inside JSON strings, so the JSON means the same.
pub fn sqs_body(event: &ExpiryEvent) -> String {
    let body = event.envelope_json();
    body.replace('\u{FFFE}', "\\ufffe")
        .replace('\u{FFFF}', "\\uffff")
}

#[cfg(test)]
/// For tests: the `Item Expired` event of the item `{"id": {"S": id}}` of table `t`.
pub(crate) fn test_event(id: &str) -> ExpiryEvent {
    use aws_sdk_dynamodb::types::AttributeValue;
    let key: Key = [("id".to_string(), AttributeValue::S(id.into()))].into();
    ExpiryEvent::expired(&EventFacts {
        table: "t",
        key: &key,
        ttl: 1.0,
        deleted_at: Timestamp::from_secs(2),
        delete_mode: "batch",
        mode: EventsMode::Notify,
        item: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue as AV;

    fn key(pairs: &[(&str, &str)]) -> Key {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), AV::S(v.to_string())))
            .collect()
    }

    fn facts<'a>(key: &'a Key, item: Option<&'a Key>) -> EventFacts<'a> {
        EventFacts {
            table: "sessions",
            key,
            ttl: 1_700_000_000.0,
            deleted_at: Timestamp::from_millis(1_700_000_001_234),
            delete_mode: "conditional",
            mode: EventsMode::Notify,
            item,
        }
    }

    #[test]
    fn the_id_is_stable_and_depends_on_table_key_and_ttl_only() {
        let a = key(&[("pk", "u#1"), ("sk", "s#2")]);
        let id = event_id("sessions", &a, 1_700_000_000.0);
        assert_eq!(id.len(), 64);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        // Documented encoding: table, key JSON and ttl text, newline-separated.
        let expected: String = Sha256::digest(
            "sessions\n{\"pk\":{\"S\":\"u#1\"},\"sk\":{\"S\":\"s#2\"}}\n1700000000".as_bytes(),
        )
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
        assert_eq!(id, expected);
        assert_ne!(id, event_id("other", &a, 1_700_000_000.0));
        assert_ne!(id, event_id("sessions", &a, 1_700_000_000.5));
        assert_ne!(
            id,
            event_id(
                "sessions",
                &key(&[("pk", "u#1"), ("sk", "s#3")]),
                1_700_000_000.0
            )
        );
    }

    proptest::proptest! {
        /// Whatever order the key's attributes were inserted in, the id is the same.
        #[test]
        fn the_id_ignores_attribute_order(
            names in proptest::collection::btree_set("[a-z]{1,6}", 1..4),
            values in proptest::collection::vec("[ -~]{0,8}", 4),
            ttl in 0.0f64..4e9,
            seed in 0u64..1000,
        ) {
            let pairs: Vec<(String, AV)> = names
                .iter()
                .zip(&values)
                .map(|(n, v)| (n.clone(), AV::S(v.clone())))
                .collect();
            let forward: Key = pairs.iter().cloned().collect();
            let mut shuffled = pairs.clone();
            fastrand::Rng::with_seed(seed).shuffle(&mut shuffled);
            let mut backward = Key::with_capacity(1);
            for (n, v) in shuffled.into_iter().rev() {
                backward.insert(n, v);
            }
            proptest::prop_assert_eq!(event_id("t", &forward, ttl), event_id("t", &backward, ttl));
        }
    }

    #[test]
    fn the_detail_has_every_documented_field() {
        let k = key(&[("pk", "u#1")]);
        let item = key(&[("pk", "u#1"), ("name", "Ada")]);
        let e = ExpiryEvent::expired(&facts(&k, Some(&item)));
        let d = e.detail();
        assert_eq!(d["version"], 1);
        assert_eq!(d["id"], event_id("sessions", &k, 1_700_000_000.0));
        assert_eq!(d["table"], "sessions");
        assert_eq!(d["key"], json!({"pk": {"S": "u#1"}}));
        assert_eq!(d["ttl"], 1_700_000_000.0);
        assert_eq!(
            d["ttl"].to_string(),
            "1700000000",
            "whole seconds print as an integer"
        );
        assert_eq!(d["deleted_at"], "2023-11-14T22:13:21.234Z");
        assert_eq!(d["lag_ms"], 1234);
        assert_eq!(d["delete_mode"], "conditional");
        assert_eq!(d["mode"], "notify");
        assert_eq!(d["item"]["name"], json!({"S": "Ada"}));
        assert_eq!(d["item_truncated"], false);
        let env: Value = serde_json::from_str(&e.envelope_json()).unwrap();
        assert_eq!(env["source"], "ttl-sweeper");
        assert_eq!(env["detail-type"], "Item Expired");
        assert_eq!(env["detail"], d);
    }

    #[test]
    fn a_cancellation_keeps_the_id_and_drops_the_item() {
        let k = key(&[("pk", "u#1")]);
        let item = key(&[("pk", "u#1"), ("name", "Ada")]);
        let f = facts(&k, Some(&item));
        let at = Timestamp::from_millis(1_700_000_002_000);
        let c = ExpiryEvent::cancelled(&f, at);
        assert_eq!(c.id, ExpiryEvent::expired(&f).id);
        assert_eq!(c.kind.detail_type(), "Item Expiry Cancelled");
        let d = c.detail();
        assert_eq!(d["cancelled_at"], "2023-11-14T22:13:22.000Z");
        assert_eq!(d["deleted_at"], "2023-11-14T22:13:21.234Z");
        assert_eq!(d["reason"], "ttl changed");
        assert!(d.get("item").is_none());
        assert_eq!(c.time, at);
    }

    #[test]
    fn a_cancellation_has_its_own_deduplication_id_and_a_retry_the_same_one() {
        let k = key(&[("pk", "u#1")]);
        let f = facts(&k, None);
        let expired = ExpiryEvent::expired(&f);
        let at = Timestamp::from_millis(1_700_000_002_000);
        let cancelled = ExpiryEvent::cancelled(&f, at);
        assert_eq!(expired.deduplication_id(), expired.id);
        assert_ne!(cancelled.deduplication_id(), expired.deduplication_id());
        assert_eq!(
            cancelled.deduplication_id(),
            format!("{}-cancelled", expired.id)
        );
        // Found again later (a retry, another sweep): the same de-duplication id.
        let again = ExpiryEvent::cancelled(&f, Timestamp::from_millis(1_700_000_009_000));
        assert_eq!(again.deduplication_id(), cancelled.deduplication_id());
        // Within SQS's limit: at most 128 characters, alphanumerics and punctuation.
        let id = cancelled.deduplication_id();
        assert!(
            id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic()),
            "{id}"
        );
    }

    #[test]
    fn dropping_the_item_marks_the_event_truncated() {
        let k = key(&[("pk", "u#1")]);
        let item = key(&[("pk", "u#1"), ("blob", &"x".repeat(1000))]);
        let mut e = ExpiryEvent::expired(&facts(&k, Some(&item)));
        let before = e.detail().to_string().len();
        assert!(e.drop_item());
        assert!(e.is_truncated() && !e.has_item());
        assert!(e.detail().to_string().len() < before - 1000);
        assert_eq!(e.detail()["item_truncated"], true);
        assert!(!e.drop_item(), "nothing left to drop");
    }
}
