//! [`Scan`]: the adoption tools' part of the seam (`backfill`, `audit`): parallel Scan pages, the
//! conditional window update and delete, and the look-ups of an item's entry in an index table.

use std::future::Future;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure,
};
use tracing::instrument;

use super::dynamo::refused_delete;
use super::{ConditionalOutcome, DynamoStore, ErrorKind, Key, Store, StoreError, TableSchema};
use crate::expiry::Timestamp;

/// One page of a parallel scan.
#[derive(Debug, Default, Clone)]
pub struct ScanPage {
    /// Items as projected.
    pub items: Vec<Key>,
    /// Where the segment continues; `None` when it is finished.
    pub next: Option<Key>,
    /// Read capacity consumed, when the server reports it.
    pub consumed: f64,
}

/// The capacity units a response says it consumed; `default` when it says nothing.
fn units(consumed: Option<&ConsumedCapacity>, default: f64) -> f64 {
    consumed.and_then(|c| c.capacity_units()).unwrap_or(default)
}

/// Outcome of a conditional window update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The window attribute was written.
    Written,
    /// The item changed (ttl or window) or was deleted since it was read; nothing was written.
    Changed,
}

/// The adoption tools' requests, beside the sweeps' ([`Store`]): what `backfill` and `audit`
/// read and write, implemented by [`DynamoStore`] and by the tests' in-memory store.
pub trait Scan: Store {
    /// Reads one page of segment `segment` of `total` of a parallel scan of `table`, projecting
    /// `attributes` (all attributes when empty), at most `limit` items.
    fn scan_page(
        &self,
        table: &str,
        segment: u32,
        total: u32,
        start: Option<Key>,
        attributes: &[String],
        limit: Option<i32>,
    ) -> impl Future<Output = Result<ScanPage, StoreError>> + Send;

    /// Sets the window attribute (the schema's layout names it) of `key` to `window` only if the
    /// item still has the ttl and the window value (`None`: none) it was read with: a concurrent
    /// change is never overwritten and a deleted item never recreated. Returns the outcome and the
    /// write capacity consumed.
    fn set_window_if_unchanged(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: AttributeValue,
        old: Option<AttributeValue>,
        window: String,
    ) -> impl Future<Output = Result<(UpdateOutcome, f64), StoreError>> + Send;

    /// Expiry index table mode, for `audit`: whether `index_table` holds an entry in window
    /// `window` whose sort key begins with `prefix` ([`super::entries::sort_prefix`]: the item's
    /// key and ttl, whatever wrote it); also the read units consumed.
    fn has_entry(
        &self,
        index_table: &str,
        window: &str,
        prefix: &str,
    ) -> impl Future<Output = Result<(bool, f64), StoreError>> + Send;

    /// Whether a pack due at `due` in partition `window` of `schema`'s expiry index table
    /// `index_table` lists `key`; also the read units consumed.
    fn has_packed(
        &self,
        schema: &TableSchema,
        index_table: &str,
        window: &str,
        due: Timestamp,
        key: &Key,
    ) -> impl Future<Output = Result<(bool, f64), StoreError>> + Send;

    /// Deletes `key` only if its ttl attribute still equals `ttl`, the value it was read with
    /// (found expired): an item whose ttl was extended, removed or rewritten since is kept, and
    /// one already deleted stays deleted. Returns the outcome ([`ConditionalOutcome::Kept`] or
    /// [`ConditionalOutcome::Gone`] when the condition failed) and the write capacity consumed.
    fn delete_if_ttl_unchanged(
        &self,
        table: &str,
        key: Key,
        ttl_attribute: &str,
        ttl: AttributeValue,
    ) -> impl Future<Output = Result<(ConditionalOutcome, f64), StoreError>> + Send;
}

impl Scan for DynamoStore {
    #[instrument(level = "debug", skip(self, start, attributes))]
    async fn scan_page(
        &self,
        table: &str,
        segment: u32,
        total: u32,
        start: Option<Key>,
        attributes: &[String],
        limit: Option<i32>,
    ) -> Result<ScanPage, StoreError> {
        let mut req = self
            .client()
            .scan()
            .table_name(table)
            .segment(segment as i32)
            .total_segments(total as i32)
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        if !attributes.is_empty() {
            let names: Vec<String> = (0..attributes.len()).map(|i| format!("#a{i}")).collect();
            req = req.projection_expression(names.join(", "));
            for (n, a) in names.iter().zip(attributes) {
                req = req.expression_attribute_names(n, a);
            }
        }
        let out = req
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Scan", e))?;
        Ok(ScanPage {
            consumed: units(out.consumed_capacity(), 0.0),
            items: out.items.unwrap_or_default(),
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
        })
    }

    #[instrument(level = "debug", skip_all)]
    async fn set_window_if_unchanged(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: AttributeValue,
        old: Option<AttributeValue>,
        window: String,
    ) -> Result<(UpdateOutcome, f64), StoreError> {
        let mut req = self
            .client()
            .update_item()
            .table_name(&schema.table_name)
            .set_key(Some(key))
            .update_expression("SET #w = :w")
            .expression_attribute_names("#w", &schema.layout.window_attribute)
            .expression_attribute_names("#t", &schema.layout.ttl_attribute)
            .expression_attribute_values(":w", AttributeValue::S(window))
            .expression_attribute_values(":t", ttl)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        req = match old {
            None => req.condition_expression("#t = :t AND attribute_not_exists(#w)"),
            Some(old) => req
                .condition_expression("#t = :t AND #w = :old")
                .expression_attribute_values(":old", old),
        };
        match req
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))
        {
            Ok(out) => Ok((UpdateOutcome::Written, units(out.consumed_capacity(), 1.0))),
            Err(e) if e.kind == ErrorKind::ConditionFailed => Ok((UpdateOutcome::Changed, 1.0)),
            Err(e) => Err(e),
        }
    }

    #[instrument(level = "debug", skip(self))]
    async fn has_entry(
        &self,
        index_table: &str,
        window: &str,
        prefix: &str,
    ) -> Result<(bool, f64), StoreError> {
        let out = self
            .entries_from(index_table, window, prefix.to_owned())
            .limit(1)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        Ok((out.count() > 0, units(out.consumed_capacity(), 1.0)))
    }

    async fn has_packed(
        &self,
        schema: &TableSchema,
        index_table: &str,
        window: &str,
        due: Timestamp,
        key: &Key,
    ) -> Result<(bool, f64), StoreError> {
        let pages = self
            .entries_from(index_table, window, super::packs::due_prefix(due))
            .projection_expression("#k")
            .expression_attribute_names("#k", super::packs::KEYS)
            .into_paginator()
            .send();
        let mut pages = std::pin::pin!(pages);
        let mut consumed = 0.0;
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| StoreError::from_sdk("Query", e))?;
            consumed += units(page.consumed_capacity(), 1.0);
            let listed =
                |k: &AttributeValue| matches!(k, AttributeValue::M(k) if schema.same_key(k, key));
            for item in page.items() {
                let Some(AttributeValue::L(keys)) = item.get(super::packs::KEYS) else {
                    continue;
                };
                if keys.iter().any(listed) {
                    return Ok((true, consumed));
                }
            }
        }
        Ok((false, consumed))
    }

    #[instrument(level = "debug", skip(self, key, ttl))]
    async fn delete_if_ttl_unchanged(
        &self,
        table: &str,
        key: Key,
        ttl_attribute: &str,
        ttl: AttributeValue,
    ) -> Result<(ConditionalOutcome, f64), StoreError> {
        // Retried by the caller, attempt by attempt (`tools::backfill`'s `with_retries`).
        let result = self
            .conditional_deletes
            .delete_item()
            .table_name(table)
            .set_key(Some(key))
            .condition_expression("#ttl = :read_ttl")
            .expression_attribute_names("#ttl", ttl_attribute)
            .expression_attribute_values(":read_ttl", ttl)
            // Tells a kept item (returned) from one that is already gone (nothing returned).
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(out) => Ok((
                ConditionalOutcome::Deleted,
                units(out.consumed_capacity(), 1.0),
            )),
            Err(e) => Ok((refused_delete(e)?, 1.0)),
        }
    }
}

impl DynamoStore {
    /// A strongly consistent `Query` of the entries and packs of `index_table` in `window` whose
    /// sort key starts with `prefix`, its consumed capacity returned.
    fn entries_from(&self, index_table: &str, window: &str, prefix: String) -> QueryFluentBuilder {
        self.index_query(index_table, window)
            .key_condition_expression("#w = :w AND begins_with(#e, :p)")
            .expression_attribute_names("#e", super::entries::ENTRY)
            .expression_attribute_values(":p", AttributeValue::S(prefix))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
    }
}
