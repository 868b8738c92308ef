//! [`DynamoStore`]: the [`Store`] seam over the AWS SDK DynamoDB client, built once by the entry
//! point (for AWS, or a local endpoint by `AWS_ENDPOINT_URL`) with explicit timeouts and retries
//! ([`client`]: how the clients are built).

mod checkpoint;
mod client;

use checkpoint::{conditionally_written, lease_from_item};
pub use checkpoint::{
    CHECKPOINT_ATTRIBUTE, LEASE_EXPIRES_ATTRIBUTE, LEASE_HOLDER_ATTRIBUTE, LEASE_LAYOUT_ATTRIBUTE,
    LEASE_RELEASED_ATTRIBUTE,
};

pub use client::{
    ATTEMPT_TIMEOUT, BATCH_ATTEMPT_TIMEOUT, CONNECT_TIMEOUT, OPERATION_TIMEOUT, SDK_MAX_ATTEMPTS,
};

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, PutRequest, ReturnValue, ReturnValuesOnConditionCheckFailure,
    WriteRequest,
};
use aws_sdk_dynamodb::Client;
use tracing::instrument;

use std::collections::HashMap;
use std::sync::Arc;

use super::clock::ServerClock;
use super::{
    entries, full_jitter, ConditionalOutcome, EntryWrite, ErrorKind, Key, LeaseItem, Page, Store,
    StoreError, TableSchema,
};
use crate::expiry::window::MAX_EXPIRED_AGE_SECONDS;
use crate::expiry::Timestamp;

/// [`Store`] over the AWS SDK DynamoDB client.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    server_clock: Arc<ServerClock>,
    /// The clients of conditional `DeleteItem`s and of `BatchWriteItem`s ([`delete_clients`]).
    conditional_deletes: Client,
    batch_deletes: Client,
}

/// The projection of the key attributes and the ttl by placeholder (`#k0, #k1, #ttl`), and the
/// names the placeholders stand for.
fn key_and_ttl(schema: &TableSchema) -> (String, HashMap<String, String>) {
    let keys = schema.key_attributes.iter().enumerate();
    let mut names: HashMap<String, String> =
        keys.map(|(i, a)| (format!("#k{i}"), a.clone())).collect();
    names.insert("#ttl".into(), schema.layout.ttl_attribute.clone());
    let mut expression: Vec<&str> = names.keys().map(String::as_str).collect();
    expression.sort_unstable();
    (expression.join(", "), names)
}

/// `BatchGetItem` requests for one read of keys by key, the first included: keys left
/// unprocessed are sent again, after a wait of [`full_jitter`] with these base and cap.
const GET_ATTEMPTS: u32 = 3;
/// The base and cap of that wait.
const UNPROCESSED_BACKOFF: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(500),
);

impl DynamoStore {
    /// [`Store::query_expired`] on the expiry index table `index_table`: the entries of window
    /// `window_key` whose ttl is before `now`, strongly consistent, read back as a GSI would
    /// list their items ([`entries::listed`]). An item of the index table that is no entry of
    /// this table is an error: the table is someone else's.
    async fn query_entries(
        &self,
        schema: &TableSchema,
        index_table: &str,
        window_key: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let out = self
            .client
            .query()
            .table_name(index_table)
            .consistent_read(true)
            .key_condition_expression("#w = :w AND #e < :bound")
            .projection_expression("#w, #e, #k, #t")
            .expression_attribute_names("#w", entries::WINDOW)
            .expression_attribute_names("#e", entries::ENTRY)
            .expression_attribute_names("#k", entries::KEY)
            .expression_attribute_names("#t", entries::TTL)
            .expression_attribute_values(":w", AttributeValue::S(window_key.to_owned()))
            .expression_attribute_values(":bound", AttributeValue::S(entries::sort_bound(now)))
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let mut page = Page {
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
            ..Page::default()
        };
        for entry in out.items.unwrap_or_default() {
            let Some((item, id)) = entries::listed(schema, entry) else {
                return Err(StoreError::new(
                    ErrorKind::Validation,
                    "Query",
                    format!(
                        "expiry index table {index_table:?} holds an item that is no entry of \
                         table {:?} (keyed on {:?}): give each swept table an index table of \
                         its own",
                        schema.table_name, schema.key_attributes
                    ),
                ));
            };
            page.items.push(item);
            page.entries.push(id);
        }
        Ok(page)
    }
}

impl Store for DynamoStore {
    #[instrument(level = "debug", skip_all, fields(window = window_key))]
    async fn query_expired(
        &self,
        schema: &TableSchema,
        window_key: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        if let Some(index_table) = &schema.index_table {
            return self
                .query_entries(schema, index_table, window_key, now, start, limit)
                .await;
        }
        let (projection, names) = key_and_ttl(schema);
        let out = self
            .client
            .query()
            .table_name(&schema.table_name)
            .index_name(&schema.index_name)
            .key_condition_expression("#win = :win AND #ttl < :now")
            .projection_expression(projection)
            .set_expression_attribute_names(Some(names))
            .expression_attribute_names("#win", &schema.layout.window_attribute)
            .expression_attribute_values(":win", AttributeValue::S(window_key.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_number()))
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        Ok(Page {
            items: out.items.unwrap_or_default(),
            entries: Vec::new(),
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
        })
    }

    #[instrument(level = "debug", skip_all, fields(writes = writes.len()))]
    async fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        const OP: &str = "BatchWriteItem";
        let Some(index_table) = &schema.index_table else {
            return Err(StoreError::new(
                ErrorKind::Validation,
                OP,
                "no expiry index table (EXPIRY_INDEX_TABLE) to write entries to",
            ));
        };
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let requests = writes
            .iter()
            .map(|write| {
                let request = match write {
                    EntryWrite::Put(item) => WriteRequest::builder().put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .map_err(|e| StoreError::new(ErrorKind::Other, OP, e.to_string()))?,
                    ),
                    EntryWrite::Remove(id) => WriteRequest::builder().delete_request(
                        DeleteRequest::builder()
                            .set_key(Some(id.clone()))
                            .build()
                            .map_err(|e| StoreError::new(ErrorKind::Other, OP, e.to_string()))?,
                    ),
                };
                Ok(request.build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let out = self
            .client
            .batch_write_item()
            .request_items(index_table, requests)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk(OP, e))?;
        Ok(out
            .unprocessed_items
            .unwrap_or_default()
            .into_values()
            .flatten()
            .filter_map(|request| {
                if let Some(put) = request.put_request {
                    return Some(EntryWrite::Put(put.item));
                }
                request.delete_request.map(|d| EntryWrite::Remove(d.key))
            })
            .collect())
    }

    #[instrument(level = "debug", skip_all, fields(keys = keys.len()))]
    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        let requests = keys
            .iter()
            .map(|&key| {
                let delete = DeleteRequest::builder()
                    .set_key(Some(key.clone()))
                    .build()
                    .map_err(|e| {
                        StoreError::new(ErrorKind::Other, "BatchWriteItem", e.to_string())
                    })?;
                Ok(WriteRequest::builder().delete_request(delete).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let out = self
            .batch_deletes
            .batch_write_item()
            .request_items(&schema.table_name, requests)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("BatchWriteItem", e))?;
        let unprocessed = out
            .unprocessed_items
            .unwrap_or_default()
            .into_values()
            .flatten()
            .filter_map(|w| w.delete_request.map(|d| d.key))
            .collect();
        Ok(unprocessed)
    }

    /// `BatchGetItem`, strongly consistent; unprocessed keys are asked again a few times, then the
    /// call fails (throttled): a key missing from the answer always means the item does not exist.
    #[instrument(level = "debug", skip_all, fields(keys = keys.len()))]
    async fn get_items(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> Result<Vec<Key>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let projection = ttl_only.then(|| key_and_ttl(schema));
        let mut found = Vec::with_capacity(keys.len());
        let mut pending = keys;
        for attempt in 0..GET_ATTEMPTS {
            if pending.is_empty() {
                break;
            }
            if attempt > 0 {
                // Keys DynamoDB left unprocessed (throttling, or the 16 MB answer limit) are sent
                // again after a backoff, as AWS advises for BatchGetItem.
                let (base, cap) = UNPROCESSED_BACKOFF;
                tokio::time::sleep(full_jitter(base, cap, attempt)).await;
            }
            let mut request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true);
            if let Some((expression, names)) = &projection {
                request = request
                    .projection_expression(expression)
                    .set_expression_attribute_names(Some(names.clone()));
            }
            let request = request
                .build()
                .map_err(|e| StoreError::new(ErrorKind::Other, "BatchGetItem", e.to_string()))?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&schema.table_name, request)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("BatchGetItem", e))?;
            found.extend(out.responses.unwrap_or_default().into_values().flatten());
            pending = out
                .unprocessed_keys
                .unwrap_or_default()
                .into_values()
                .flat_map(|k| k.keys)
                .collect();
        }
        if !pending.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Throttled,
                "BatchGetItem",
                format!(
                    "{} keys still unprocessed after {GET_ATTEMPTS} attempts",
                    pending.len()
                ),
            ));
        }
        Ok(found)
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        let item = self.checkpoint_item(table, id).await?;
        let Some(value) = item.as_ref().and_then(|i| i.get(CHECKPOINT_ATTRIBUTE)) else {
            return Ok(None);
        };
        let secs = match value {
            AttributeValue::N(n) => n
                .parse::<i64>()
                .map_err(|_| format!("checkpoint {id:?} holds {n:?}, not epoch seconds")),
            other => Err(format!("checkpoint {id:?} holds {other:?}, not a Number")),
        };
        let invalid = |message| StoreError::new(ErrorKind::Validation, "GetItem", message);
        secs.map(|s| Some(Timestamp::from_secs(s))).map_err(invalid)
    }

    #[instrument(level = "debug", skip(self))]
    async fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: Timestamp,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .update_expression("SET #s = :to, #u = :now")
            .condition_expression("attribute_not_exists(#s) OR #s < :to")
            .expression_attribute_names("#s", CHECKPOINT_ATTRIBUTE)
            .expression_attribute_names("#u", "updatedAt")
            .expression_attribute_values(":to", AttributeValue::N(to.secs().to_string()))
            .expression_attribute_values(":now", AttributeValue::S(at.iso()))
            .send()
            .await;
        conditionally_written(result.map_err(|e| StoreError::from_sdk("UpdateItem", e)))
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_lease(&self, table: &str, id: &str) -> Result<Option<LeaseItem>, StoreError> {
        let Some(item) = self.checkpoint_item(table, id).await? else {
            return Ok(None);
        };
        lease_from_item(&item, table, id).map(Some)
    }

    #[instrument(level = "debug", skip(self))]
    async fn write_lease(
        &self,
        table: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> Result<bool, StoreError> {
        // UpdateItem rather than PutItem: the checkpoint's own grants (GetItem, UpdateItem) cover
        // the lease, and the item holds nothing else. A lease without a layout removes the one
        // recorded.
        // One given up is not renewed by its holder: only taken again once it lapsed.
        let (update, layout) = match &lease.layout {
            Some(layout) => (
                "SET #h = :me, #e = :expires, #l = :layout REMOVE #r",
                Some(layout),
            ),
            None => ("SET #h = :me, #e = :expires REMOVE #l, #r", None),
        };
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .update_expression(update)
            .condition_expression(
                "attribute_not_exists(id) OR (#h = :me AND attribute_not_exists(#r)) OR #e < :lapsed",
            )
            .expression_attribute_names("#h", LEASE_HOLDER_ATTRIBUTE)
            .expression_attribute_names("#e", LEASE_EXPIRES_ATTRIBUTE)
            .expression_attribute_names("#l", LEASE_LAYOUT_ATTRIBUTE)
            .expression_attribute_names("#r", LEASE_RELEASED_ATTRIBUTE)
            .set_expression_attribute_values(
                layout.map(|l| [(":layout".to_owned(), AttributeValue::S(l.clone()))].into()),
            )
            .expression_attribute_values(":me", AttributeValue::S(lease.holder.clone()))
            .expression_attribute_values(
                ":expires",
                AttributeValue::N(lease.expires_at.millis().to_string()),
            )
            .expression_attribute_values(
                ":lapsed",
                AttributeValue::N(lapsed_before.millis().to_string()),
            )
            .send()
            .await;
        conditionally_written(result.map_err(|e| StoreError::from_sdk("UpdateItem", e)))
    }

    #[instrument(level = "debug", skip(self))]
    async fn release_lease(&self, table: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .update_expression("SET #r = :true")
            .condition_expression("#h = :me")
            .expression_attribute_names("#h", LEASE_HOLDER_ATTRIBUTE)
            .expression_attribute_names("#r", LEASE_RELEASED_ATTRIBUTE)
            .expression_attribute_values(":me", AttributeValue::S(holder.to_owned()))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .send()
            .await;
        conditionally_written(result.map_err(|e| StoreError::from_sdk("UpdateItem", e)))
    }

    #[instrument(level = "debug", skip_all)]
    async fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        let result = self
            .conditional_deletes
            .delete_item()
            .table_name(&schema.table_name)
            .set_key(Some(key))
            // The ttl read, unchanged, and expired at `now` by native TTL's rule, as the item
            // stands in the table now: a ttl changed in any way since the read (extended,
            // removed, rewritten to another past value) keeps the item.
            .condition_expression("#ttl = :read AND #ttl < :now AND #ttl >= :oldest")
            .expression_attribute_names("#ttl", &schema.layout.ttl_attribute)
            .expression_attribute_values(":read", AttributeValue::N(ttl.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_number()))
            .expression_attribute_values(
                ":oldest",
                AttributeValue::N((now.secs() - MAX_EXPIRED_AGE_SECONDS).to_string()),
            )
            // Tells a kept item (returned) from one that is already gone (nothing returned).
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .set_return_values(return_item.then_some(ReturnValue::AllOld))
            .send()
            .await;
        match result {
            Ok(out) => Ok((
                ConditionalOutcome::Deleted,
                out.attributes.filter(|a| !a.is_empty()),
            )),
            Err(e) => Ok((refused_delete(e)?, None)),
        }
    }
}

/// A conditional `DeleteItem` that failed: [`ConditionalOutcome::Kept`] when its condition did
/// not hold on an item that exists (returned with `ReturnValuesOnConditionCheckFailure=ALL_OLD`),
/// [`ConditionalOutcome::Gone`] when there was no item; any other error as it is.
pub(super) fn refused_delete(
    e: SdkError<DeleteItemError, HttpResponse>,
) -> Result<ConditionalOutcome, StoreError> {
    match e.as_service_error() {
        Some(DeleteItemError::ConditionalCheckFailedException(c)) => Ok(match &c.item {
            Some(item) if !item.is_empty() => ConditionalOutcome::Kept,
            _ => ConditionalOutcome::Gone,
        }),
        _ => Err(StoreError::from_sdk("DeleteItem", e)),
    }
}
