//! The faults that answer part of a batch: what the proxy forwards of a `BatchWriteItem` or a
//! sink's batch, and what it answers as unprocessed or failed instead.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::Response;
use serde_json::{json, Value};

use super::requests::{entries_field, sink_entries};
use super::{fnv, reply, request_identity, send_part, Forwarder};

/// Forwards part of a `BatchWriteItem` and answers the rest as unprocessed, merged with whatever
/// the server itself left unprocessed.
pub(super) async fn split_batch(json: &Value, forward: &Forwarder) -> Response<Full<Bytes>> {
    let mut rng =
        fastrand::Rng::with_seed(fnv(request_identity("BatchWriteItem", json).as_bytes()));
    let mut sent = serde_json::Map::new();
    let mut held = serde_json::Map::new();
    for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
        let requests = requests.as_array().cloned().unwrap_or_default();
        // hold back at least one request, at most all of them
        let first_held = rng.usize(..requests.len().max(1));
        let (mut s, mut h) = (Vec::new(), Vec::new());
        for (i, r) in requests.into_iter().enumerate() {
            if i == first_held || rng.bool() {
                h.push(r);
            } else {
                s.push(r);
            }
        }
        if !s.is_empty() {
            sent.insert(table.clone(), Value::Array(s));
        }
        held.insert(table.clone(), Value::Array(h));
    }
    send_and_hold(json, sent, held, forward).await
}

/// Forwards the write requests `sent` of the `BatchWriteItem` `json` and answers `held` as
/// unprocessed, merged with whatever the server itself left unprocessed. A refusal of the part
/// sent is passed on as it is.
async fn send_and_hold(
    json: &Value,
    sent: serde_json::Map<String, Value>,
    mut unprocessed: serde_json::Map<String, Value>,
    forward: &Forwarder,
) -> Response<Full<Bytes>> {
    if !sent.is_empty() {
        let mut body = json.clone();
        body["RequestItems"] = Value::Object(sent);
        let answer = match send_part(forward, &body, "1.0").await {
            Ok(answer) => answer,
            Err(refused) => return refused,
        };
        for (table, requests) in answer["UnprocessedItems"].as_object().into_iter().flatten() {
            let entry = unprocessed
                .entry(table.clone())
                .or_insert_with(|| Value::Array(vec![]));
            let more = requests.as_array().cloned().unwrap_or_default();
            entry.as_array_mut().unwrap().extend(more);
        }
    }
    // A new body: no x-amz-crc32 header, which would no longer match.
    let body = json!({ "UnprocessedItems": unprocessed }).to_string();
    reply(200, "1.0", body, true)
}

/// Forwards the write requests of a `BatchWriteItem` that do not name the item `id` and answers
/// those that do as unprocessed, with whatever the server itself left unprocessed.
pub(super) async fn hold_back(
    json: &Value,
    id: &str,
    forward: &Forwarder,
) -> Response<Full<Bytes>> {
    let names = format!("\"id\":{}", json!({ "S": id }));
    let mut sent = serde_json::Map::new();
    let mut unprocessed = serde_json::Map::new();
    for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
        let requests = requests.as_array().cloned().unwrap_or_default();
        let (held, passed): (Vec<Value>, Vec<Value>) = requests
            .into_iter()
            .partition(|r| r.to_string().contains(&names));
        if !passed.is_empty() {
            sent.insert(table.clone(), Value::Array(passed));
        }
        if !held.is_empty() {
            unprocessed.insert(table.clone(), Value::Array(held));
        }
    }
    send_and_hold(json, sent, unprocessed, forward).await
}

/// Forwards part of a sink batch and answers the rest as failed entries, in the operation's own
/// shape (SQS `Failed`; EventBridge and Firehose one result per entry, in order, with an error
/// code and a failed count), merged with what the server itself answered.
pub(super) async fn split_entries(
    op: &str,
    json: &Value,
    forward: &Forwarder,
) -> Response<Full<Bytes>> {
    let entries = sink_entries(op, json);
    let mut rng = fastrand::Rng::with_seed(fnv(request_identity(op, json).as_bytes()));
    let first_held = rng.usize(..entries.len().max(1));
    let held: Vec<bool> = (0..entries.len())
        .map(|i| i == first_held || rng.bool())
        .collect();
    let sent: Vec<Value> = entries
        .iter()
        .zip(&held)
        .filter(|(_, h)| !**h)
        .map(|(e, _)| e.clone())
        .collect();
    let answer: Value = if sent.is_empty() {
        Value::Null
    } else {
        let mut body = json.clone();
        body[entries_field(op)] = Value::Array(sent);
        match send_part(forward, &body, "1.1").await {
            Ok(answer) => answer,
            Err(refused) => return refused,
        }
    };
    let body = match op {
        "SendMessageBatch" => {
            let mut failed = answer["Failed"].as_array().cloned().unwrap_or_default();
            for (e, _) in entries.iter().zip(&held).filter(|(_, h)| **h) {
                failed.push(json!({
                    "Id": e["Id"], "SenderFault": false, "Code": "InternalError",
                    "Message": "Injected per-entry failure",
                }));
            }
            json!({
                "Successful": answer["Successful"].as_array().cloned().unwrap_or_default(),
                "Failed": failed,
            })
        }
        _ => {
            let (results_field, count_field, ok_id, code) = if op == "PutEvents" {
                (
                    "Entries",
                    "FailedEntryCount",
                    "EventId",
                    "ThrottlingException",
                )
            } else {
                (
                    "RequestResponses",
                    "FailedPutCount",
                    "RecordId",
                    "ServiceUnavailableException",
                )
            };
            let mut from_server = answer[results_field]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter();
            let mut failed = 0;
            let results: Vec<Value> = held
                .iter()
                .map(|h| {
                    let r = if *h {
                        json!({ "ErrorCode": code, "ErrorMessage": "Injected per-entry failure" })
                    } else {
                        from_server.next().unwrap_or(Value::Null)
                    };
                    if r.get(ok_id).is_none() {
                        failed += 1;
                    }
                    r
                })
                .collect();
            let mut body = json!({ results_field: results, count_field: failed });
            if op == "PutRecordBatch" {
                body["Encrypted"] = json!(false);
            }
            body
        }
    };
    reply(200, "1.1", body.to_string(), true)
}
