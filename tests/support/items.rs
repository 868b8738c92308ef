//! Items and keys as the tests build them: an `id`, a ttl, a window attribute as the library
//! computes it.

use std::collections::HashMap;

use ttl_sweeper::expiry::window::window_attribute;
use ttl_sweeper::store::Key;

pub use aws_sdk_dynamodb::types::AttributeValue as AV;

pub fn num(n: i64) -> AV {
    AV::N(n.to_string())
}

/// An item with `id` and, if given, a `ttl`: no window.
pub fn bare(id: &str, ttl: Option<AV>) -> Key {
    let mut item = id_key(id);
    item.extend(ttl.map(|t| ("ttl".to_string(), t)));
    item
}

/// An item with `id` and the Number `ttl`: no window.
pub fn unwindowed(id: &str, ttl: i64) -> Key {
    bare(id, Some(num(ttl)))
}

/// `item` with the window attribute `window`.
pub fn with_window(mut item: Key, window: &str) -> Key {
    item.insert("expirationWindow".into(), AV::S(window.into()));
    item
}

/// An item with `id`, the Number `ttl` and the window attribute `window`.
pub fn windowed(id: &str, ttl: i64, window: &str) -> Key {
    with_window(unwindowed(id, ttl), window)
}

/// An item with `id` and `ttl` in its window of `width` s, sharded as the library shards `id`.
pub fn sharded(id: &str, ttl: i64, width: u32, shards: u32) -> Key {
    let window = window_attribute(ttl as f64, width, shards, id.as_bytes()).unwrap();
    windowed(id, ttl, &window)
}

/// An item with `id`, a ttl (Number) and the window key computed by the library.
pub fn session(id: &str, ttl: i64) -> Key {
    sharded(id, ttl, 60, 1)
}

/// An item of each of `ids`, with the Number ttl `ttl` and no window.
pub fn unwindowed_each(ids: &[impl AsRef<str>], ttl: i64) -> Vec<Key> {
    ids.iter().map(|id| unwindowed(id.as_ref(), ttl)).collect()
}

/// `n` sessions `{prefix}-0` … `{prefix}-{n-1}`, the `i`th with the ttl `ttl(i)`.
pub fn sessions(prefix: &str, n: i64, ttl: impl Fn(i64) -> i64) -> Vec<Key> {
    (0..n)
        .map(|i| session(&format!("{prefix}-{i}"), ttl(i)))
        .collect()
}

pub fn id_key(id: &str) -> Key {
    HashMap::from([("id".into(), AV::S(id.into()))])
}

/// `{prefix}-0` … `{prefix}-{n-1}`.
pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The `ttl` of an item (or entry) as whole epoch seconds, if it has a Number one.
pub fn ttl_of(item: &Key) -> Option<i64> {
    item.get("ttl")?.as_n().ok()?.parse().ok()
}

/// The item `id`s of the expiry index entries a `BatchWriteItem` request body puts.
pub fn entry_ids(body: &serde_json::Value) -> Vec<String> {
    let tables = body["RequestItems"].as_object().into_iter().flatten();
    let requests = tables.flat_map(|(_, r)| r.as_array().into_iter().flatten());
    let ids = requests.filter_map(|r| r["PutRequest"]["Item"]["key"]["M"]["id"]["S"].as_str());
    ids.map(str::to_owned).collect()
}
