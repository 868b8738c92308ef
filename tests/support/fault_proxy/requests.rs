//! What a request to the proxy names: the operation and keys, tables, windows or event ids its
//! body carries, and the items an answer holds.

use serde_json::Value;

/// The `id`s of the items a read answers with: a `Query`'s `Items`, or a `BatchGetItem`'s
/// `Responses` (batch mode reads stale keys again, strongly consistent: a read too).
pub fn read_ids(answer: &Value) -> impl Iterator<Item = String> + '_ {
    let got = answer["Responses"]
        .as_object()
        .into_iter()
        .flat_map(|tables| tables.values());
    std::iter::once(&answer["Items"])
        .chain(got)
        .flat_map(item_ids)
}

/// The `id`s (String) of the items of a list of items in DynamoDB JSON.
pub fn item_ids(v: &Value) -> impl Iterator<Item = String> + '_ {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["id"]["S"].as_str().map(str::to_owned))
}

/// What a request does to which table, as (operation, table) pairs: one per request of a
/// `BatchWriteItem` (`BatchWriteItem:PutRequest`, `BatchWriteItem:DeleteRequest`) and per action of
/// a `TransactWriteItems` (`TransactWriteItems:Put`, `:Update`, `:Delete`, `:ConditionCheck`), per
/// table of a `BatchGetItem`; else the operation and its `TableName` (`-` when it names none: the
/// streams API, PartiQL).
pub fn by_table(op: &str, json: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match op {
        "BatchWriteItem" => {
            for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.as_array().into_iter().flatten() {
                    for kind in ["PutRequest", "DeleteRequest"] {
                        if r.get(kind).is_some() {
                            out.push((format!("{op}:{kind}"), table.clone()));
                        }
                    }
                }
            }
        }
        "BatchGetItem" => {
            for table in json["RequestItems"].as_object().into_iter().flatten() {
                out.push((op.to_owned(), table.0.clone()));
            }
        }
        "TransactWriteItems" => {
            for action in json["TransactItems"].as_array().into_iter().flatten() {
                for (kind, body) in action.as_object().into_iter().flatten() {
                    let table = body["TableName"].as_str().unwrap_or("-");
                    out.push((format!("{op}:{kind}"), table.to_owned()));
                }
            }
        }
        _ => {
            let table = json["TableName"].as_str().unwrap_or("-");
            out.push((op.to_owned(), table.to_owned()));
        }
    }
    out
}

/// The writes a request makes: (table, `put` | `update` | `delete`, the item or key). Each request
/// of a `BatchWriteItem`, each `Put`, `Update` or `Delete` of a `TransactWriteItems`.
pub fn writes<'a>(op: &str, json: &'a Value) -> Vec<(String, &'static str, &'a Value)> {
    let table = || json["TableName"].as_str().unwrap_or("?").to_owned();
    match op {
        "PutItem" => vec![(table(), "put", &json["Item"])],
        "UpdateItem" => vec![(table(), "update", &json["Key"])],
        "DeleteItem" => vec![(table(), "delete", &json["Key"])],
        "BatchWriteItem" => {
            let mut out = Vec::new();
            for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.as_array().into_iter().flatten() {
                    if r["PutRequest"].is_object() {
                        out.push((table.clone(), "put", &r["PutRequest"]["Item"]));
                    } else {
                        out.push((table.clone(), "delete", &r["DeleteRequest"]["Key"]));
                    }
                }
            }
            out
        }
        "TransactWriteItems" => {
            let mut out = Vec::new();
            for t in json["TransactItems"].as_array().into_iter().flatten() {
                for (what, body) in [("put", "Put"), ("update", "Update"), ("delete", "Delete")] {
                    if let Some(name) = t[body]["TableName"].as_str() {
                        let field = if what == "put" { "Item" } else { "Key" };
                        out.push((name.to_owned(), what, &t[body][field]));
                    }
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The `id`s of the keys the delete requests of a `BatchWriteItem`'s items by table hold.
pub fn delete_ids(requests: &Value) -> Vec<String> {
    let requests = requests.as_object().into_iter().flat_map(|o| o.values());
    let keys = requests.flat_map(|v| v.as_array().into_iter().flatten());
    let keys: Vec<Value> = keys.map(|r| r["DeleteRequest"]["Key"].clone()).collect();
    item_ids(&Value::Array(keys)).collect()
}

/// What a request is about, independent of table names and timing: the operation and the keys
/// it deletes, or the window and start key it reads.
pub fn request_identity(op: &str, json: &Value) -> String {
    let mut parts = vec![op.to_owned()];
    match op {
        "BatchWriteItem" => {
            for requests in json["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.1.as_array().into_iter().flatten() {
                    parts.push(r["DeleteRequest"]["Key"].to_string());
                }
            }
        }
        "DeleteItem" => parts.push(json["Key"].to_string()),
        op if is_sink_batch(op) => parts.extend(sink_event_ids(op, json)),
        "Query" => {
            // A GSI's window (`:win`), or an expiry index table's (`:w`).
            let values = &json["ExpressionAttributeValues"];
            let window = values.get(":win").or_else(|| values.get(":w"));
            parts.push(window.unwrap_or(&Value::Null).to_string());
            parts.push(json["ExclusiveStartKey"].to_string());
        }
        _ => parts.push(json.to_string()),
    }
    parts.join("|")
}

/// FNV-1a, 64 bits: a stable hash for seeding.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The expiry-event sinks' batch operations (the last part of their `X-Amz-Target`).
pub const SINK_BATCH_OPS: [&str; 3] = ["SendMessageBatch", "PutEvents", "PutRecordBatch"];

pub fn is_sink_batch(op: &str) -> bool {
    SINK_BATCH_OPS.contains(&op)
}

/// The field of a sink batch request that holds its entries: `Entries` (SQS, EventBridge) or
/// `Records` (Firehose).
pub(super) fn entries_field(op: &str) -> &'static str {
    match op {
        "PutRecordBatch" => "Records",
        _ => "Entries",
    }
}

pub(super) fn sink_entries(op: &str, json: &Value) -> Vec<Value> {
    json[entries_field(op)]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The event envelope or detail an entry carries, as JSON.
fn entry_event(op: &str, entry: &Value) -> Value {
    use base64::Engine as _;
    let text = match op {
        "SendMessageBatch" => entry["MessageBody"].as_str().map(str::to_owned),
        "PutEvents" => entry["Detail"].as_str().map(str::to_owned),
        _ => entry["Data"]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .and_then(|b| String::from_utf8(b).ok()),
    };
    text.and_then(|t| serde_json::from_str(t.trim_end()).ok())
        .unwrap_or(Value::Null)
}

/// The event ids a sink batch request carries, in order (`detail.id`; the detail itself for
/// EventBridge).
pub fn sink_event_ids(op: &str, json: &Value) -> Vec<String> {
    sink_entries(op, json)
        .iter()
        .map(|e| {
            let event = entry_event(op, e);
            let id = if op == "PutEvents" {
                &event["id"]
            } else {
                &event["detail"]["id"]
            };
            id.as_str().unwrap_or("?").to_owned()
        })
        .collect()
}
