//! The capacity meter (tests/support/capacity.rs): item sizes and units by DynamoDB's published
//! rules, then a scripted sequence against DynamoDB Local through the meter, each step's units
//! exact.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{KeysAndAttributes, WriteRequest};
use serde_json::{json, Map, Value};

use crate::support::capacity::*;
use crate::support::*;

fn item(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn item_sizes_follow_the_published_rules() {
    // Names count: "id" 2 + "abc" 3.
    assert_eq!(item_size(&item(json!({"id": {"S": "abc"}}))), 5);
    // UTF-8 bytes, not characters.
    assert_eq!(value_size(&json!({"S": "é"})), 2);
    // Numbers: one byte per two significant digits, rounded up, plus one.
    assert_eq!(number_size("1793400123"), 6);
    assert_eq!(number_size("1793400000"), 4); // trailing zeros are not significant
    assert_eq!(number_size("0.00125"), 3); // nor leading ones
    assert_eq!(number_size("-7"), 2);
    assert_eq!(number_size("1.5e3"), 2);
    assert_eq!(number_size("0"), 1);
    // Binary: the decoded bytes.
    assert_eq!(value_size(&json!({"B": "AAEC"})), 3);
    assert_eq!(value_size(&json!({"BOOL": true})), 1);
    assert_eq!(value_size(&json!({"NULL": true})), 1);
    // A Map: 3 + (name + value + 1) per element.
    let map = json!({"M": {"id": {"S": "ab"}}});
    assert_eq!(value_size(&map), 3 + 2 + 2 + 1);
    // A List: 3 + (value + 1) per element; an empty one 3.
    let list = json!({"L": [{"S": "ab"}, {"BOOL": false}]});
    assert_eq!(value_size(&list), 3 + (2 + 1) + (1 + 1));
    assert_eq!(value_size(&json!({"L": []})), 3);
    // Sets: their elements.
    assert_eq!(value_size(&json!({"SS": ["ab", "c"]})), 3);
    assert_eq!(value_size(&json!({"NS": ["12", "3"]})), 4);
    // The SDK's values read the same.
    let sdk = HashMap::from([
        ("id".to_owned(), AV::S("abc".into())),
        ("n".to_owned(), AV::N("12".into())),
        ("l".to_owned(), AV::L(vec![AV::Bool(true)])),
    ]);
    assert_eq!(item_size(&wire_item(&sdk)), 5 + 3 + (1 + 3 + 2));
}

#[test]
fn units_round_up_and_never_fall_below_one() {
    assert_eq!(write_units(0), 1.0);
    assert_eq!(write_units(1024), 1.0);
    assert_eq!(write_units(1025), 2.0);
    assert_eq!(read_units(0, true), 1.0);
    assert_eq!(read_units(4096, true), 1.0);
    assert_eq!(read_units(4097, true), 2.0);
    assert_eq!(read_units(100, false), 0.5);
}

#[test]
fn a_padded_item_is_exactly_its_size() {
    let base = HashMap::from([
        ("id".to_owned(), AV::S("u-17".into())),
        ("ttl".to_owned(), AV::N("1793400123".into())),
    ]);
    let item = padded(base, "payload", 1024);
    assert_eq!(item_size(&wire_item(&item)), 1024);
}

fn ledger() -> Ledger {
    Ledger::new(&[
        ("t", Role::Table, &["id"]),
        ("ix", Role::Index, &["window", "entry"]),
        ("cp", Role::Checkpoint, &["id"]),
    ])
}

fn one_kb(id: &str) -> Value {
    let base = HashMap::from([("id".to_owned(), AV::S(id.into()))]);
    Value::Object(wire_item(&padded(base, "payload", 1024)))
}

const CONDITION_FAILED: &str = "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException";

#[test]
fn the_ledger_bills_what_each_request_touched() {
    let mut l = ledger();
    let put = json!({"TableName": "t", "Item": one_kb("a")});
    l.observe(true, "PutItem", 200, &put, &json!({}));
    // Replacing a 1 KB item with a small one bills the larger.
    let small = json!({"TableName": "t", "Item": {"id": {"S": "b"}}});
    l.observe(true, "PutItem", 200, &small, &json!({}));
    assert_eq!(l.counts.of(Kind::App).write_units, 2.0);
    // A consistent batch read of one present and one missing item: 1 + 1.
    let keys = json!([{"id": {"S": "a"}}, {"id": {"S": "zz"}}]);
    let get = json!({"RequestItems": {"t": {"ConsistentRead": true, "Keys": keys}}});
    let got = json!({"Responses": {"t": [one_kb("a")]}});
    l.observe(false, "BatchGetItem", 200, &get, &got);
    assert_eq!(l.counts.of(Kind::ConfirmRead).read_units, 2.0);
    // A failed conditional delete bills the item it left.
    let del = json!({"TableName": "t", "Key": {"id": {"S": "a"}}});
    let failed = json!({ "__type": CONDITION_FAILED });
    l.observe(false, "DeleteItem", 400, &del, &failed);
    assert_eq!(l.counts.of(Kind::FailedConditionalDelete).write_units, 1.0);
    // A batch delete of it and of a missing item: one unit each.
    let delete = |id: &str| json!({"DeleteRequest": {"Key": {"id": {"S": id}}}});
    let batch = json!({"RequestItems": {"t": [delete("a"), delete("zz")]}});
    l.observe(false, "BatchWriteItem", 200, &batch, &json!({}));
    let t = l.counts.of(Kind::TableDelete);
    assert_eq!((t.requests, t.items, t.write_units), (1, 2, 2.0));
    // What was left unprocessed is not billed; a throttled request not at all.
    let left = json!({"UnprocessedItems": {"t": [delete("zz")]}});
    l.observe(false, "BatchWriteItem", 200, &batch, &left);
    let throttled = json!({"__type": "x#ProvisionedThroughputExceededException"});
    l.observe(false, "BatchWriteItem", 400, &batch, &throttled);
    assert_eq!(l.counts.of(Kind::TableDelete).items, 3);
    assert!(l.counts.unknown.is_empty(), "{:?}", l.counts.unknown);
}

#[test]
fn index_queries_read_whole_entries_and_the_own_partitions_are_apart() {
    let mut l = ledger();
    let entry = |w: &str, e: &str| json!({"window": {"S": w}, "entry": {"S": e}, "key": {"M": {"id": {"S": "a"}}}, "ttl": {"N": "1793400123"}});
    let put = |e: Value| json!({ "PutRequest": { "Item": e } });
    let puts =
        json!({"RequestItems": {"ix": [put(entry("w1", "e1")), put(entry("#owners", "t"))]}});
    l.observe(false, "BatchWriteItem", 200, &puts, &json!({}));
    assert_eq!(l.counts.of(Kind::EntryPut).items, 1);
    assert_eq!(l.counts.of(Kind::IndexFixed).items, 1);
    assert_eq!(l.counts.entry_bytes, item_size(&item(entry("w1", "e1"))));
    // An entry of one item lists one key; a pack lists its `keys`, and only one-key index items
    // are counted as such.
    let pack = |e: &str, keys: usize| {
        let ks: Vec<Value> = (0..keys)
            .map(|k| json!({"M": {"id": {"S": format!("k{k}")}}}))
            .collect();
        let ts: Vec<Value> = (0..keys).map(|_| json!({"N": "1793400123"})).collect();
        json!({"window": {"S": "w1"}, "entry": {"S": e}, "keys": {"L": ks}, "ttls": {"L": ts}})
    };
    let packs = json!({"RequestItems": {"ix": [put(pack("p1", 3)), put(pack("p2", 1))]}});
    l.observe(false, "BatchWriteItem", 200, &packs, &json!({}));
    assert_eq!((l.counts.entries, l.counts.keys_listed), (3, 5));
    assert_eq!(l.counts.one_key_packs, 2);
    assert_eq!(l.counts.one_key_pack_units, 2.0);
    let one = item_size(&item(entry("w1", "e1"))) + item_size(&item(pack("p2", 1)));
    assert_eq!(l.counts.one_key_pack_bytes, one);
    // A projected page is billed for the whole entries it read; an empty page one unit.
    let q = |w: &str| {
        json!({"TableName": "ix", "ConsistentRead": true,
            "KeyConditionExpression": "#w = :w AND #e < :bound",
            "ExpressionAttributeNames": {"#w": "window", "#e": "entry"},
            "ExpressionAttributeValues": {":w": {"S": w}, ":bound": {"S": "z"}},
            "ProjectionExpression": "#w, #e"})
    };
    let found = json!({"Items": [{"window": {"S": "w1"}, "entry": {"S": "e1"}}]});
    l.observe(false, "Query", 200, &q("w1"), &found);
    l.observe(false, "Query", 200, &q("w2"), &json!({"Items": []}));
    let t = l.counts.of(Kind::IndexQuery);
    assert_eq!((t.requests, t.items, t.read_units), (2, 1, 2.0));
    l.observe(false, "Query", 200, &q("#owners"), &json!({"Items": []}));
    assert_eq!(l.counts.of(Kind::IndexFixed).read_units, 1.0);
    assert!(l.counts.unknown.is_empty(), "{:?}", l.counts.unknown);
    // An entry read that was never written through the meter cannot be sized.
    let stranger = json!({"Items": [{"window": {"S": "w2"}, "entry": {"S": "e9"}}]});
    l.observe(false, "Query", 200, &q("w2"), &stranger);
    assert_eq!(l.counts.unknown.len(), 1);
}

#[test]
fn updates_are_evaluated_or_reported_unknown() {
    let mut l = ledger();
    let set = json!({"TableName": "cp", "Key": {"id": {"S": "lease"}},
        "UpdateExpression": "SET #h = :me, #e = :x REMOVE #r",
        "ExpressionAttributeNames": {"#h": "holder", "#e": "expiresAt", "#r": "released"},
        "ExpressionAttributeValues": {":me": {"S": "me"}, ":x": {"N": "12"}}});
    l.observe(false, "UpdateItem", 200, &set, &json!({}));
    // id 2 + 5, holder 6 + 2, expiresAt 9 + 2.
    let key = item(json!({"id": {"S": "lease"}}));
    assert_eq!(l.size_of("cp", &key), Some(26));
    assert_eq!(l.counts.of(Kind::Checkpoint).write_units, 1.0);
    let add = json!({"TableName": "cp", "Key": {"id": {"S": "n"}}, "UpdateExpression": "ADD #c :one",
        "ExpressionAttributeNames": {"#c": "c"}, "ExpressionAttributeValues": {":one": {"N": "1"}}});
    l.observe(false, "UpdateItem", 200, &add, &json!({}));
    assert_eq!(l.counts.unknown.len(), 1);
    // A table it was not told of.
    let elsewhere = json!({"TableName": "elsewhere", "Key": {"id": {"S": "a"}}});
    l.observe(false, "DeleteItem", 200, &elsewhere, &json!({}));
    assert_eq!(l.counts.unknown.len(), 2);
}

/// Through the meter in front of DynamoDB Local, each step's units by the rules: a 1 KB put is one
/// write unit; a consistent batch read of one present and one missing item two read units; a
/// failed conditional delete one write unit; a batch delete one; an empty query one read unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_sequence_through_the_meter_costs_exactly_its_units() {
    let direct = client().await;
    let table = new_table(&direct, "capacity", |t| t.index = false).await;
    let index = index_table(&direct, "capacityix").await;
    let tables: [(&str, Role, &[&str]); 2] = [
        (&table, Role::Table, &["id"]),
        (&index, Role::Index, &["window", "entry"]),
    ];
    let meter = Meter::start(&endpoint(), &tables).await;
    let app = client_of(&meter.app_endpoint).await;
    let sweeper = client_of(&meter.endpoint).await;

    let one_kb = padded(unwindowed("a", now() + 3600), "payload", 1024);
    put_one(&app, &table, one_kb).await;
    let app_units = meter.counts().of(Kind::App);
    assert_eq!((app_units.requests, app_units.write_units), (1, 1.0));

    let keys = KeysAndAttributes::builder()
        .keys(id_key("a"))
        .keys(id_key("missing"))
        .consistent_read(true)
        .build()
        .unwrap();
    let got = sweeper.batch_get_item().request_items(&table, keys).send();
    let got = got.await.expect("batch get");
    assert_eq!(got.responses.unwrap()[&table].len(), 1);
    let read = meter.counts().of(Kind::ConfirmRead);
    assert_eq!((read.requests, read.items, read.read_units), (1, 2, 2.0));

    let delete = sweeper
        .delete_item()
        .table_name(&table)
        .set_key(Some(id_key("a")));
    let refused = delete
        .condition_expression("attribute_not_exists(id)")
        .send();
    assert!(refused.await.is_err(), "the condition holds not");
    let failed = meter.counts().of(Kind::FailedConditionalDelete);
    assert_eq!((failed.requests, failed.write_units), (1, 1.0));

    let delete = aws_sdk_dynamodb::types::DeleteRequest::builder().set_key(Some(id_key("a")));
    let delete = WriteRequest::builder()
        .delete_request(delete.build().unwrap())
        .build();
    let batch = sweeper
        .batch_write_item()
        .request_items(&table, vec![delete]);
    batch.send().await.expect("batch delete");
    let t = meter.counts().of(Kind::TableDelete);
    assert_eq!((t.requests, t.items, t.write_units), (1, 1, 1.0));
    assert!(!exists(&direct, &table, "a").await);

    let query = sweeper
        .query()
        .table_name(&index)
        .consistent_read(true)
        .key_condition_expression("#w = :w")
        .expression_attribute_names("#w", "window")
        .expression_attribute_values(":w", AV::S("1793400000#0".into()));
    let page = query.send().await.expect("query");
    assert_eq!(page.count, 0);
    let t = meter.counts().of(Kind::IndexQuery);
    assert_eq!((t.requests, t.items, t.read_units), (1, 0, 1.0));

    assert!(meter.unknown().is_empty(), "{:?}", meter.unknown());
}

/// A query answered before the meter sees the answer to the write of what it read (the indexer's
/// put and the sweep's query in flight at once) is sized by what that write sent.
#[test]
fn a_read_that_races_a_write_is_sized_by_what_the_write_sent() {
    let mut l = ledger();
    let entry =
        json!({"window": {"S": "w1"}, "entry": {"S": "e1"}, "pad": {"S": "x".repeat(5000)}});
    let puts = json!({"RequestItems": {"ix": [{ "PutRequest": { "Item": entry } }]}});
    l.sending("BatchWriteItem", &puts);
    let q = json!({"TableName": "ix", "ConsistentRead": true,
        "KeyConditionExpression": "#w = :w", "ExpressionAttributeNames": {"#w": "window"},
        "ExpressionAttributeValues": {":w": {"S": "w1"}}, "ProjectionExpression": "#w, #e"});
    let found = json!({"Items": [{"window": {"S": "w1"}, "entry": {"S": "e1"}}]});
    l.observe(false, "Query", 200, &q, &found);
    // More than 4 KB: two read units.
    assert_eq!(l.counts.of(Kind::IndexQuery).read_units, 2.0);
    l.observe(false, "BatchWriteItem", 200, &puts, &json!({}));
    assert!(l.counts.unknown.is_empty(), "{:?}", l.counts.unknown);
}

/// A query whose projection leaves out the partition key (`#owners`, read for its sort keys) is
/// sized by the entries its key condition names.
#[test]
fn a_projection_without_the_partition_key_is_sized_by_the_key_condition() {
    let mut l = ledger();
    let claim = json!({"window": {"S": "#owners"}, "entry": {"S": "t"}});
    let puts = json!({"RequestItems": {"ix": [{ "PutRequest": { "Item": claim } }]}});
    l.observe(false, "BatchWriteItem", 200, &puts, &json!({}));
    let q = json!({"TableName": "ix", "ConsistentRead": true,
        "KeyConditionExpression": "#w = :w", "ProjectionExpression": "#e",
        "ExpressionAttributeNames": {"#w": "window", "#e": "entry"},
        "ExpressionAttributeValues": {":w": {"S": "#owners"}}});
    let found = json!({"Items": [{"entry": {"S": "t"}}]});
    l.observe(false, "Query", 200, &q, &found);
    let fixed = l.counts.of(Kind::IndexFixed);
    assert_eq!((fixed.requests, fixed.read_units), (2, 1.0));
    assert!(l.counts.unknown.is_empty(), "{:?}", l.counts.unknown);
}
