//! A test table's items read and written through an SDK client: seeding, single writes, the
//! application's ttl extensions, consistent reads and full scans.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use ttl_sweeper::store::Key;

use super::{id_key, num, ttl_of, wall_clock, AV};

/// The `id` of every item in the table, sorted.
pub async fn ids(client: &Client, table: &str) -> Vec<String> {
    let mut ids: Vec<String> = scan_all(client, table)
        .await
        .iter()
        .map(|i| i["id"].as_s().expect("string id").clone())
        .collect();
    ids.sort();
    ids
}

/// The `id` of every item in the table, as a set.
pub async fn id_set(client: &Client, table: &str) -> HashSet<String> {
    ids(client, table).await.into_iter().collect()
}

/// Writes items with BatchWriteItem, 25 at a time, resubmitting anything unprocessed.
pub async fn put_items(client: &Client, table: &str, items: Vec<Key>) {
    let put = |item: &Key| {
        let put = PutRequest::builder().set_item(Some(item.clone())).build();
        WriteRequest::builder().put_request(put.unwrap()).build()
    };
    for chunk in items.chunks(25) {
        let mut requests: Vec<WriteRequest> = chunk.iter().map(put).collect();
        while !requests.is_empty() {
            let batch = client.batch_write_item().request_items(table, requests);
            let out = batch.send().await.expect("batch put");
            let left = out.unprocessed_items.and_then(|mut m| m.remove(table));
            requests = left.unwrap_or_default();
        }
    }
}

pub async fn put_one(client: &Client, table: &str, item: Key) {
    let put = client.put_item().table_name(table).set_item(Some(item));
    put.send().await.expect("put item");
}

pub async fn delete_one(client: &Client, table: &str, id: &str) {
    let key = Some(id_key(id));
    let delete = client.delete_item().table_name(table).set_key(key);
    delete.send().await.expect("delete item");
}

/// Writes items with four concurrent writers (DynamoDB Local is faster that way).
pub async fn put_many(client: &Client, table: &str, items: Vec<Key>) {
    let per = items.len().div_ceil(4).max(1);
    let tasks: Vec<_> = items
        .chunks(per)
        .map(|chunk| {
            let (client, table, chunk) = (client.clone(), table.to_string(), chunk.to_vec());
            tokio::spawn(async move { put_items(&client, &table, chunk).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer task");
    }
}

/// The update that sets the ttl of the item at `key` to `ttl` and its window to match.
fn extension(client: &Client, table: &str, key: Key, ttl: i64) -> UpdateItemFluentBuilder {
    let window = ttl_sweeper::expiry::window::window_key(ttl as f64, 60).unwrap();
    client
        .update_item()
        .table_name(table)
        .set_key(Some(key))
        .update_expression("SET #t = :t, #w = :w")
        .expression_attribute_names("#t", "ttl")
        .expression_attribute_names("#w", "expirationWindow")
        .expression_attribute_values(":t", num(ttl))
        .expression_attribute_values(":w", AV::S(window))
}

/// Sets the ttl of the item at `key` to `ttl` and its window to match, as the application does
/// when it extends an item.
pub async fn extend_ttl(client: &Client, table: &str, key: Key, ttl: i64) {
    let update = extension(client, table, key, ttl);
    update.send().await.expect("extend ttl");
}

/// [`extend_ttl`] if the item is still there: whether it was (and the update succeeded).
pub async fn extend_ttl_if_there(client: &Client, table: &str, key: Key, ttl: i64) -> bool {
    let update = extension(client, table, key, ttl).condition_expression("attribute_exists(id)");
    update.send().await.is_ok()
}

/// The item `id` (a consistent read), if there.
pub async fn get(client: &Client, table: &str, id: &str) -> Option<Key> {
    let key = Some(id_key(id));
    let read = client.get_item().table_name(table).set_key(key);
    let answer = read.consistent_read(true).send().await;
    answer.expect("get item").item
}

pub async fn exists(client: &Client, table: &str, id: &str) -> bool {
    get(client, table, id).await.is_some()
}

/// Polls the table every 50 ms until none of `ids` is left or `limit` passed: when each was
/// first seen gone (epoch seconds, fractional).
pub async fn watch_gone(
    client: &Client,
    table: &str,
    ids: &[String],
    limit: Duration,
) -> BTreeMap<String, f64> {
    let mut gone = BTreeMap::new();
    let started = Instant::now();
    while gone.len() < ids.len() && started.elapsed() < limit {
        let present = id_set(client, table).await;
        let at = wall_clock();
        for id in ids {
            if !present.contains(id) {
                gone.entry(id.clone()).or_insert(at);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gone
}

/// The ids of `ids` still in `table` when [`watch_gone`] stopped.
pub async fn left_after(
    client: &Client,
    table: &str,
    ids: &[String],
    limit: Duration,
) -> Vec<String> {
    let gone = watch_gone(client, table, ids, limit).await;
    ids.iter()
        .filter(|id| !gone.contains_key(*id))
        .cloned()
        .collect()
}

/// Every item in the table (a full scan).
pub async fn scan_all(client: &Client, table: &str) -> Vec<Key> {
    let mut out = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        out.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            return out;
        }
    }
}

/// Every entry of an expiry index table (a full scan), its claims, the stream indexer's reports,
/// archive mode's journal and the sweepers' cursors of packs left out.
pub async fn scan_entries(client: &Client, index: &str) -> Vec<Key> {
    use ttl_sweeper::store::entries::{INDEXER, OWNERS, PENDING};
    use ttl_sweeper::store::packs::CURSOR;
    let ours = [OWNERS, INDEXER, PENDING, CURSOR].map(|p| AV::S(p.to_owned()));
    let mut entries = scan_all(client, index).await;
    entries.retain(|e| e.get("window").is_none_or(|w| !ours.contains(w)));
    entries
}

/// What an expiry index table lists as (item `id`, ttl), sorted: each entry of one item, and
/// each entry of every pack.
pub async fn index_entries(client: &Client, index: &str) -> Vec<(String, i64)> {
    contents_of(scan_all(client, index).await).listing()
}

/// [`index_entries`], each entry once: a pack acknowledged too late for its due (a slow machine)
/// is written again, due later, and lists its entries twice.
pub async fn listed_once(client: &Client, index: &str) -> Vec<(String, i64)> {
    let mut listed = index_entries(client, index).await;
    listed.dedup();
    listed
}

/// What an expiry index table lists that no sweep has judged, as (item `id`, ttl), sorted
/// ([`IndexContents::unjudged`]).
pub async fn unjudged_entries(client: &Client, index: &str) -> Vec<(String, i64)> {
    contents_of(scan_all(client, index).await).unjudged()
}

/// An expiry index table's contents, read back.
#[derive(Debug, Default)]
pub struct IndexContents {
    /// Entries of one item each, as (item `id`, ttl).
    pub entries: Vec<(String, i64)>,
    /// The entries of packs so, each with its pack's due (epoch ms).
    pub packed: Vec<((String, i64), i64)>,
    /// The earliest sweeper cursor (epoch ms; the writers' marks left out).
    pub cursor: Option<i64>,
}

impl IndexContents {
    /// Every entry, of one item or in a pack, sorted.
    pub fn listing(self) -> Vec<(String, i64)> {
        self.select(|_| true)
    }

    /// What no sweep has judged, sorted: each entry of one item (a sweep removes those it
    /// judged), and each entry of a pack due at or after the earliest sweeper cursor (every
    /// pack when no sweeper stored one).
    pub fn unjudged(self) -> Vec<(String, i64)> {
        let cursor = self.cursor;
        self.select(|due| cursor.is_none_or(|c| due >= c))
    }

    fn select(self, due: impl Fn(i64) -> bool) -> Vec<(String, i64)> {
        let mut out = self.entries;
        out.extend(
            self.packed
                .into_iter()
                .filter(|(_, d)| due(*d))
                .map(|(e, _)| e),
        );
        out.sort();
        out
    }
}

/// [`IndexContents`] of the items of an expiry index table.
pub fn contents_of(items: Vec<Key>) -> IndexContents {
    use ttl_sweeper::store::packs::{cursor_of, Pack, CURSOR};
    let id_of = |key: &Key, e: &Key| {
        let id = key.get("id").and_then(|id| id.as_s().ok());
        id.unwrap_or_else(|| panic!("an entry without an item id: {e:?}"))
            .clone()
    };
    let mut out = IndexContents::default();
    for e in items {
        let window = e.get("window").and_then(|w| w.as_s().ok()).cloned();
        let sort = e.get("entry").and_then(|w| w.as_s().ok()).cloned();
        if window.as_deref() == Some(CURSOR) {
            // A sweeper's cursor is `<table>#<shard range>`; a writers' mark, the table's name.
            if sort.is_some_and(|s| s.contains('#')) {
                let through = cursor_of(&e).expect("a cursor").millis();
                out.cursor = Some(out.cursor.map_or(through, |c| c.min(through)));
            }
            continue;
        }
        if window.as_deref().is_some_and(|w| w.starts_with('#')) {
            continue;
        }
        if let Some(pack) = Pack::from_item(&e) {
            let due = pack.due().expect("a pack's due").millis();
            for entry in &pack.entries {
                let ttl: f64 = entry.ttl.parse().expect("a Number ttl");
                out.packed.push(((id_of(&entry.key, &e), ttl as i64), due));
            }
            continue;
        }
        let key = e["key"].as_m().unwrap_or_else(|_| panic!("{e:?}"));
        let ttl = ttl_of(&e).unwrap_or_else(|| panic!("{e:?}"));
        out.entries.push((id_of(key, &e), ttl));
    }
    out
}

/// The item `id`s a `BatchWriteItem` request body (DynamoDB JSON) carries entries of: each
/// entry of one item ([`super::entry_ids`]) and each entry in a pack it puts, in order.
pub fn written_ids(body: &serde_json::Value) -> Vec<String> {
    let mut ids = super::entry_ids(body);
    let tables = body["RequestItems"].as_object().into_iter().flatten();
    let requests = tables.flat_map(|(_, r)| r.as_array().into_iter().flatten());
    for request in requests {
        let keys = request["PutRequest"]["Item"]["keys"]["L"].as_array();
        let packed = keys.into_iter().flatten();
        ids.extend(packed.filter_map(|k| k["M"]["id"]["S"].as_str().map(str::to_owned)));
    }
    ids
}

/// Every item of the table by its `id` (a full scan).
pub async fn items_by_id(client: &Client, table: &str) -> BTreeMap<String, Key> {
    let items = scan_all(client, table).await.into_iter();
    items
        .map(|i| (i["id"].as_s().expect("string id").clone(), i))
        .collect()
}
