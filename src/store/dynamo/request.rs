//! The pieces of [`DynamoStore`](super::DynamoStore)'s requests: the projection of a table's key
//! and ttl, a `BatchWriteItem` of deletes or entries sent once, and a builder's error as the
//! store's.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::BuildError;
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use aws_sdk_dynamodb::Client;

use crate::store::{ErrorKind, Key, StoreError, TableSchema};

/// The projection of the key attributes and the ttl by placeholder (`#k0, #k1, #ttl`), and the
/// names the placeholders stand for.
pub(super) fn key_and_ttl(schema: &TableSchema) -> (String, HashMap<String, String>) {
    let keys = schema.key_attributes.iter().enumerate();
    let mut names: HashMap<String, String> =
        keys.map(|(i, a)| (format!("#k{i}"), a.clone())).collect();
    names.insert("#ttl".into(), schema.layout.ttl_attribute.clone());
    let mut expression: Vec<&str> = names.keys().map(String::as_str).collect();
    expression.sort_unstable();
    (expression.join(", "), names)
}

/// `BatchWriteItem`, of deletes and of expiry index entries.
pub(super) const OP: &str = "BatchWriteItem";

/// A request builder's answer, its error (a required field left unset) as one of `operation`.
pub(super) fn built<T>(
    operation: &'static str,
    built: Result<T, BuildError>,
) -> Result<T, StoreError> {
    built.map_err(|e| StoreError::new(ErrorKind::Other, operation, e.to_string()))
}

/// The `BatchWriteItem` request that deletes `key`.
pub(super) fn delete_request(key: Key) -> Result<WriteRequest, StoreError> {
    let delete = built(OP, DeleteRequest::builder().set_key(Some(key)).build())?;
    Ok(WriteRequest::builder().delete_request(delete).build())
}

/// One `BatchWriteItem` of `requests` on `table` through `client`, one attempt: the requests left
/// unprocessed.
pub(super) async fn batch_write(
    client: &Client,
    table: &str,
    requests: Vec<WriteRequest>,
) -> Result<Vec<WriteRequest>, StoreError> {
    let out = client
        .batch_write_item()
        .request_items(table, requests)
        .send()
        .await
        .map_err(|e| StoreError::from_sdk(OP, e))?;
    let unprocessed = out.unprocessed_items.unwrap_or_default();
    Ok(unprocessed.into_values().flatten().collect())
}
