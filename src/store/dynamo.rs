//! [`DynamoStore`]: the [`Store`] seam over the AWS SDK DynamoDB client, built once by the entry
//! point (for AWS, or a local endpoint by `AWS_ENDPOINT_URL`) with explicit timeouts and retries
//! (`client`: how the clients are built).

mod checkpoint;
mod client;
mod index;
mod request;

use index::foreign_item;
pub(super) use index::refused_delete;
use request::{batch_write, built, delete_request, key_and_ttl, OP};

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
    AttributeValue, PutRequest, ReturnValue, ReturnValuesOnConditionCheckFailure, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use tracing::instrument;

use std::collections::HashMap;
use std::sync::Arc;

use super::clock::ServerClock;
use super::{
    entries, packs, Backoff, ConditionalOutcome, EntryWrite, ErrorKind, Index, IndexerReport, Key,
    LeaseItem, Page, Retry, Store, StoreError, TableSchema,
};
use crate::expiry::window::MAX_EXPIRED_AGE_SECONDS;
use crate::expiry::Timestamp;

/// [`Store`] over the AWS SDK DynamoDB client.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    server_clock: Arc<ServerClock>,
    /// The clients of conditional `DeleteItem`s (the adoption tools' too) and of
    /// `BatchWriteItem`s, without SDK retries: the caller, which retries them itself, sees every
    /// attempt that may have been applied (a timeout, a dropped connection, a 5xx) and can settle
    /// it (`client::delete_clients`).
    pub(in crate::store) conditional_deletes: Client,
    batch_deletes: Client,
    /// The index tables (with the swept table) whose writers' mark this store saw stored, and
    /// when: [`Store::mark_packs`] asks again only after [`MARK_KNOWN_FOR`].
    marks: Arc<std::sync::Mutex<HashMap<(String, String), tokio::time::Instant>>>,
}

/// How long a writers' mark seen stored is taken to be there without asking again (one
/// conditional `PutItem`, a write unit, per index table and process this often, not per batch).
pub const MARK_KNOWN_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// How the store's own short requests are tried: a read of keys by key (the keys a `BatchGetItem`
/// left unprocessed sent again), and a claim on an expiry index table.
pub(super) const FEW_ATTEMPTS: Retry = Retry {
    attempts: 3,
    base: std::time::Duration::from_millis(50),
    cap: std::time::Duration::from_millis(500),
};

impl Store for DynamoStore {
    /// A GSI's page as it is; an expiry index table's entries, or with `packs_since` its packs
    /// due from then to `now` ([`packs`]), queried strongly consistent, read back as a GSI would
    /// list their items ([`entries::listed`], [`packs::listed`]). An item of the index table that
    /// is no entry or pack of this table is an error: the table is someone else's.
    #[instrument(level = "debug", skip_all, fields(window = window_key))]
    async fn query_expired(
        &self,
        schema: &TableSchema,
        window_key: &str,
        now: Timestamp,
        packs_since: Option<Timestamp>,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let packs_since = packs_since.filter(|_| schema.index.table().is_some());
        let query = match (&schema.index, packs_since) {
            (Index::Table(_), Some(since)) if since >= now => {
                return Ok(Page {
                    packed: true,
                    ..Page::default()
                })
            }
            (Index::Table(index_table), Some(since)) => {
                let (lo, hi) = packs::bounds(since, now);
                self.index_query(index_table, window_key)
                    .key_condition_expression("#w = :w AND #e BETWEEN :lo AND :hi")
                    .projection_expression("#w, #e, #k, #t")
                    .expression_attribute_names("#e", entries::ENTRY)
                    .expression_attribute_names("#k", packs::KEYS)
                    .expression_attribute_names("#t", packs::TTLS)
                    .expression_attribute_values(":lo", AttributeValue::S(lo))
                    .expression_attribute_values(":hi", AttributeValue::S(hi))
            }
            (Index::Table(index_table), None) => self
                .index_query(index_table, window_key)
                .key_condition_expression("#w = :w AND #e < :bound")
                .projection_expression("#w, #e, #k, #t")
                .expression_attribute_names("#e", entries::ENTRY)
                .expression_attribute_names("#k", entries::KEY)
                .expression_attribute_names("#t", entries::TTL)
                .expression_attribute_values(":bound", AttributeValue::S(entries::sort_bound(now))),
            (Index::Gsi(gsi), _) => {
                let (projection, names) = key_and_ttl(schema);
                self.client
                    .query()
                    .table_name(&schema.table_name)
                    .index_name(gsi)
                    .key_condition_expression("#w = :w AND #ttl < :now")
                    .projection_expression(projection)
                    .set_expression_attribute_names(Some(names))
                    .expression_attribute_names("#w", &schema.layout.window_attribute)
                    .expression_attribute_values(":w", AttributeValue::S(window_key.to_owned()))
                    .expression_attribute_values(":now", AttributeValue::N(now.to_number()))
            }
        };
        let out = query
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let mut page = Page {
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
            packed: packs_since.is_some(),
            ..Page::default()
        };
        let Some(index_table) = schema.index.table() else {
            page.items = out.items.unwrap_or_default();
            return Ok(page);
        };
        let foreign = |what| foreign_item(schema, index_table, what);
        for item in out.items.unwrap_or_default() {
            if page.packed {
                let listed = packs::Pack::from_item(&item).and_then(|p| packs::listed(schema, p));
                page.items.extend(listed.ok_or_else(|| foreign("pack"))?);
            } else {
                let (item, id) = entries::listed(schema, item).ok_or_else(|| foreign("entry"))?;
                page.items.push(item);
                page.entries.push(id);
            }
        }
        Ok(page)
    }

    #[instrument(level = "debug", skip_all, fields(writes = writes.len()))]
    async fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        let Some(index_table) = schema.index.table() else {
            let message = "no expiry index table (EXPIRY_INDEX_TABLE) to write entries to";
            return Err(StoreError::new(ErrorKind::Validation, OP, message));
        };
        self.write_index(index_table, writes).await
    }

    #[instrument(level = "debug", skip_all)]
    async fn write_indexer_report(
        &self,
        index_table: &str,
        report: &IndexerReport,
    ) -> Result<(), StoreError> {
        let put = vec![EntryWrite::Put(report.to_item())];
        if self.write_index(index_table, put).await?.is_empty() {
            return Ok(());
        }
        let message = "the stream indexer's report was left unprocessed";
        Err(StoreError::new(ErrorKind::Throttled, OP, message))
    }

    #[instrument(level = "debug", skip_all, fields(keys = keys.len()))]
    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        let requests = keys.iter().map(|&key| delete_request(key.clone()));
        let requests = requests.collect::<Result<_, _>>()?;
        let unprocessed = batch_write(&self.batch_deletes, &schema.table_name, requests).await?;
        let key = |w: WriteRequest| w.delete_request.map(|d| d.key);
        Ok(unprocessed.into_iter().filter_map(key).collect())
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
        const GET: &str = "BatchGetItem";
        let projection = ttl_only.then(|| key_and_ttl(schema));
        let mut found = Vec::with_capacity(keys.len());
        let mut pending = keys;
        let mut backoff = Backoff::new(FEW_ATTEMPTS);
        while !pending.is_empty() {
            let (expression, names) = projection.clone().unzip();
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .set_projection_expression(expression)
                .set_expression_attribute_names(names);
            let request = built(GET, request.build())?;
            let out = self
                .client
                .batch_get_item()
                .request_items(&schema.table_name, request)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk(GET, e))?;
            found.extend(out.responses.unwrap_or_default().into_values().flatten());
            pending = out
                .unprocessed_keys
                .unwrap_or_default()
                .into_values()
                .flat_map(|k| k.keys)
                .collect();
            if pending.is_empty() {
                break;
            }
            // Keys DynamoDB left unprocessed (throttling, or the 16 MB answer limit) are sent
            // again after a backoff, as AWS advises for BatchGetItem.
            let Some(wait) = backoff.next_wait() else {
                let (left, made) = (pending.len(), backoff.made());
                let message = format!("{left} keys still unprocessed after {made} attempts");
                return Err(StoreError::new(ErrorKind::Throttled, GET, message));
            };
            tokio::time::sleep(wait).await;
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
        let update = self
            .checkpoint_update(table, id)
            .update_expression("SET #s = :to, #u = :now")
            .condition_expression("attribute_not_exists(#s) OR #s < :to")
            .expression_attribute_names("#s", CHECKPOINT_ATTRIBUTE)
            .expression_attribute_names("#u", "updatedAt")
            .expression_attribute_values(":to", AttributeValue::N(to.secs().to_string()))
            .expression_attribute_values(":now", AttributeValue::S(at.iso()));
        conditionally_written(update.send().await)
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
        // recorded; one given up is not renewed by its holder, only taken again once it lapsed.
        let update = match lease.layout {
            Some(_) => "SET #h = :me, #e = :expires, #l = :layout REMOVE #r",
            None => "SET #h = :me, #e = :expires REMOVE #l, #r",
        };
        let layout = lease.layout.as_ref().map(|l| AttributeValue::S(l.clone()));
        let millis = |t: Timestamp| AttributeValue::N(t.millis().to_string());
        let update = self
            .checkpoint_update(table, id)
            .update_expression(update)
            .condition_expression(
                "attribute_not_exists(id) OR (#h = :me AND attribute_not_exists(#r)) OR #e < :lapsed",
            )
            .expression_attribute_names("#h", LEASE_HOLDER_ATTRIBUTE)
            .expression_attribute_names("#e", LEASE_EXPIRES_ATTRIBUTE)
            .expression_attribute_names("#l", LEASE_LAYOUT_ATTRIBUTE)
            .expression_attribute_names("#r", LEASE_RELEASED_ATTRIBUTE)
            .set_expression_attribute_values(layout.map(|l| [(":layout".to_owned(), l)].into()))
            .expression_attribute_values(":me", AttributeValue::S(lease.holder.clone()))
            .expression_attribute_values(":expires", millis(lease.expires_at))
            .expression_attribute_values(":lapsed", millis(lapsed_before));
        conditionally_written(update.send().await)
    }

    #[instrument(level = "debug", skip(self))]
    async fn release_lease(&self, table: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        let update = self
            .checkpoint_update(table, id)
            .update_expression("SET #r = :true")
            .condition_expression("#h = :me")
            .expression_attribute_names("#h", LEASE_HOLDER_ATTRIBUTE)
            .expression_attribute_names("#r", LEASE_RELEASED_ATTRIBUTE)
            .expression_attribute_values(":me", AttributeValue::S(holder.to_owned()))
            .expression_attribute_values(":true", AttributeValue::Bool(true));
        conditionally_written(update.send().await)
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

    #[instrument(level = "debug", skip(self))]
    async fn read_indexer_reports(
        &self,
        index_table: &str,
    ) -> Result<Vec<IndexerReport>, StoreError> {
        let out = self
            .index_query(index_table, entries::INDEXER)
            .key_condition_expression("#w = :w")
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let items = out.items.unwrap_or_default();
        Ok(items.iter().filter_map(IndexerReport::from_item).collect())
    }

    #[instrument(level = "debug", skip(self, schema))]
    async fn read_pending(
        &self,
        schema: &TableSchema,
        due: Timestamp,
        limit: i32,
    ) -> Result<Vec<Key>, StoreError> {
        let Some(index_table) = schema.index.table() else {
            return Ok(Vec::new());
        };
        let out = self
            .index_query(index_table, entries::PENDING)
            .key_condition_expression("#w = :w AND #e < :due")
            .expression_attribute_names("#e", entries::ENTRY)
            .expression_attribute_values(":due", AttributeValue::S(entries::sort_bound(due)))
            .limit(limit.max(1))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        Ok(out.items.unwrap_or_default())
    }

    #[instrument(level = "debug", skip(self, schema))]
    async fn read_cursor(
        &self,
        schema: &TableSchema,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        let Some(index_table) = schema.index.table() else {
            return Ok(None);
        };
        // A `Query` of one key, which the sweeper's role may send to its index table.
        let out = self
            .index_query(index_table, packs::CURSOR)
            .key_condition_expression("#w = :w AND #e = :id")
            .expression_attribute_names("#e", entries::ENTRY)
            .expression_attribute_values(":id", AttributeValue::S(id.into()))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        match out.items().first() {
            None => Ok(None),
            Some(item) => packs::cursor_of(item).map(Some).ok_or_else(|| {
                let message = format!("sweeper cursor {id:?} of {index_table:?} is unreadable");
                StoreError::new(ErrorKind::Validation, "Query", message)
            }),
        }
    }

    #[instrument(level = "debug", skip(self, schema))]
    async fn mark_packs(&self, schema: &TableSchema, at: Timestamp) -> Result<(), StoreError> {
        let Some(index_table) = schema.index.table() else {
            return Ok(());
        };
        let id = (index_table.to_owned(), schema.table_name.clone());
        let now = tokio::time::Instant::now();
        let known = |at: &tokio::time::Instant| now.saturating_duration_since(*at) < MARK_KNOWN_FOR;
        if super::lock(&self.marks).get(&id).is_some_and(known) {
            return Ok(());
        }
        let put = self
            .client
            .put_item()
            .table_name(index_table)
            .set_item(Some(packs::cursor_item(&schema.table_name, at, at)))
            .condition_expression("attribute_not_exists(#w)")
            .expression_attribute_names("#w", entries::WINDOW)
            .send()
            .await;
        match put {
            Ok(_) => {}
            // A mark is there already: it stays.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
            Err(e) => return Err(StoreError::from_sdk("PutItem", e)),
        }
        super::lock(&self.marks).insert(id, now);
        Ok(())
    }

    async fn claim_index_table(&self, schema: &TableSchema) -> Result<(), StoreError> {
        let Some(index_table) = schema.index.table() else {
            return Ok(());
        };
        let name = schema.table_name.as_str();
        let name = name.rsplit_once(":table/").map_or(name, |(_, n)| n);
        self.claim_index(index_table, name, true).await
    }
}
