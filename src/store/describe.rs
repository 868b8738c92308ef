//! Start-up checks: one `DescribeTable` tells whether the table exists, what its key is, and
//! whether the index has the shape the sweeper needs. [`open`] is the one way every command
//! (sweep, run, the Lambda, backfill, audit) gets its [`TableSchema`].

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType, ScalarAttributeType, TableDescription};
use tracing::instrument;

use super::{DynamoStore, ErrorKind, StoreError, TableSchema};
use crate::expiry::Layout;

const OP: &str = "DescribeTable";

/// The table a command works on, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTarget {
    /// Table name or ARN (`TABLE_NAME`).
    pub table_name: String,
    /// The GSI keyed on (window, ttl) (`INDEX_NAME`), when the table is swept through one.
    pub index_name: String,
    /// The sweeper's own expiry index table (`EXPIRY_INDEX_TABLE`), swept instead of a GSI.
    pub index_table: Option<String>,
    /// Attributes, window width and shards.
    pub layout: Layout,
    /// The checkpoint table, checked too when set (`CHECKPOINT_TABLE`).
    pub checkpoint_table: Option<String>,
}

/// How strictly [`open`] treats the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexCheck {
    /// The index must exist with keys (window: S, ttl: N): sweeping needs it.
    Required,
    /// The index must have that shape if it exists; a missing one is only a warning. For the
    /// adoption tools, which scan the table and may run before the index is created.
    IfPresent,
}

/// What [`open`] found out about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedTable {
    /// The checked schema.
    pub schema: TableSchema,
    /// Approximate size in bytes (DynamoDB refreshes it about every six hours).
    pub size_bytes: i64,
    /// Approximate item count.
    pub item_count: i64,
    /// False when the index does not exist yet (only with [`IndexCheck::IfPresent`]).
    pub index_present: bool,
}

/// Reads `target`'s table once and checks it (and the checkpoint table, when configured).
#[instrument(skip_all, fields(table = %target.table_name, index = %target.index_name))]
pub async fn open(
    store: &DynamoStore,
    target: &TableTarget,
    index: IndexCheck,
) -> Result<OpenedTable, StoreError> {
    let table = store
        .describe_table(&target.table_name, || {
            format!(
                "table {:?} does not exist in this account and region (check TABLE_NAME, \
                 AWS_REGION and AWS_ENDPOINT_URL)",
                target.table_name
            )
        })
        .await?;
    let (schema, index_present) = match &target.index_table {
        Some(index_table) => {
            store.check_index_table(index_table).await?;
            (schema_of(&table, target)?, true)
        }
        None => check_table(&table, target, index)?,
    };
    if !index_present {
        tracing::warn!(
            index = %target.index_name,
            "the index does not exist yet: the sweeper will refuse to start until it does"
        );
    }
    if let Some(checkpoint) = &target.checkpoint_table {
        store.check_checkpoint_table(checkpoint).await?;
    }
    Ok(OpenedTable {
        schema,
        size_bytes: table.table_size_bytes().unwrap_or(0),
        item_count: table.item_count().unwrap_or(0),
        index_present,
    })
}

impl DynamoStore {
    /// `DescribeTable`; a missing table's error says `missing()`, not the generic message.
    pub(super) async fn describe_table(
        &self,
        table: &str,
        missing: impl FnOnce() -> String,
    ) -> Result<TableDescription, StoreError> {
        let out = self
            .client()
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| {
                let mut e = StoreError::from_sdk(OP, e);
                if e.kind == ErrorKind::NotFound {
                    e.message = missing();
                }
                e
            })?;
        out.table
            .ok_or_else(|| StoreError::new(ErrorKind::Other, OP, "response has no table"))
    }

    /// Checks that the expiry index table exists and is keyed on `window` (String) and `entry`
    /// (String).
    pub async fn check_index_table(&self, table: &str) -> Result<(), StoreError> {
        use super::entries::{ENTRY, EXPIRES, WINDOW};
        let shape = format!(
            "partition key `{WINDOW}` (String) and sort key `{ENTRY}` (String), with native TTL \
             on `{EXPIRES}`"
        );
        let create = format!("{shape} (the construct and the SAM template do, with followStream)");
        let what = format!("expiry index table {table:?} (EXPIRY_INDEX_TABLE)");
        self.check_keyed(table, &what, &[WINDOW, ENTRY], &shape, &create)
            .await
    }

    /// Checks that the checkpoint table exists and is keyed on `id` (String).
    pub async fn check_checkpoint_table(&self, table: &str) -> Result<(), StoreError> {
        let what = format!("checkpoint table {table:?} (CHECKPOINT_TABLE)");
        let shape = "partition key `id` (String) and no sort key";
        self.check_keyed(table, &what, &["id"], shape, "partition key `id` (String)")
            .await
    }

    /// Checks that `table` (`what`) exists and is keyed on `key`, String attributes (`shape`);
    /// a missing one is to be created with `create`.
    async fn check_keyed(
        &self,
        table: &str,
        what: &str,
        key: &[&str],
        shape: &str,
        create: &str,
    ) -> Result<(), StoreError> {
        let missing = || format!("{what} does not exist; create it with {create}");
        let t = self.describe_table(table, missing).await?;
        let actual = ordered_key(t.key_schema());
        let strings = t.attribute_definitions().iter().all(|d| {
            !key.contains(&d.attribute_name()) || *d.attribute_type() == ScalarAttributeType::S
        });
        if actual != key || !strings {
            let message = format!("{what} is keyed on {actual:?}; it needs {shape}");
            return Err(StoreError::new(ErrorKind::Validation, OP, message));
        }
        Ok(())
    }
}

/// Checks a table description against `target`; returns the schema and whether the index exists.
fn check_table(
    table: &TableDescription,
    target: &TableTarget,
    check: IndexCheck,
) -> Result<(TableSchema, bool), StoreError> {
    let (table_name, index_name) = (&target.table_name, &target.index_name);
    let window = target.layout.window_attribute.as_str();
    let ttl = target.layout.ttl_attribute.as_str();
    let schema = schema_of(table, target)?;
    let attr_type = |name: &str| {
        table
            .attribute_definitions()
            .iter()
            .find(|d| d.attribute_name() == name)
            .map(|d| d.attribute_type().clone())
    };
    let indexes = table.global_secondary_indexes();
    let Some(index) = indexes
        .iter()
        .find(|i| i.index_name() == Some(index_name.as_str()))
    else {
        if check == IndexCheck::IfPresent {
            return Ok((schema, false));
        }
        let names: Vec<&str> = indexes.iter().filter_map(|i| i.index_name()).collect();
        let message = format!(
            "table {table_name:?} has no global secondary index {index_name:?} (INDEX_NAME); \
             it has {names:?}. Create a GSI with partition key {window:?} (S) and sort key \
             {ttl:?} (N)"
        );
        return Err(StoreError::new(ErrorKind::NotFound, OP, message));
    };
    let index_key = ordered_key(index.key_schema());
    let types_ok = attr_type(window) == Some(ScalarAttributeType::S)
        && attr_type(ttl) == Some(ScalarAttributeType::N);
    if index_key != [window, ttl] || !types_ok {
        let actual: Vec<String> = index_key
            .iter()
            .map(|name| match attr_type(name) {
                Some(t) => format!("{name} ({})", t.as_str()),
                None => name.clone(),
            })
            .collect();
        let actual = actual.join(", ");
        let message = format!(
            "index {index_name:?} is keyed on {actual}; the sweeper needs partition key \
             {window:?} (S, WINDOW_ATTRIBUTE) and sort key {ttl:?} (N, TTL_ATTRIBUTE)"
        );
        return Err(StoreError::new(ErrorKind::Validation, OP, message));
    }
    // Every projection (KEYS_ONLY, INCLUDE, ALL) has the table and index keys: all a sweep reads.
    Ok((schema, true))
}

/// The schema of `table` as `target` configures it: its key attributes and layout.
fn schema_of(table: &TableDescription, target: &TableTarget) -> Result<TableSchema, StoreError> {
    let key_attributes = ordered_key(table.key_schema());
    if key_attributes.is_empty() {
        let e = StoreError::new(ErrorKind::Other, OP, "table has no key schema");
        return Err(e);
    }
    Ok(TableSchema {
        table_name: target.table_name.clone(),
        index_name: target.index_name.clone(),
        index_table: target.index_table.clone(),
        key_attributes,
        layout: target.layout.clone(),
    })
}

/// Key attribute names, the partition (hash) key first.
fn ordered_key(schema: &[KeySchemaElement]) -> Vec<String> {
    let (hash, range): (Vec<_>, Vec<_>) =
        schema.iter().partition(|k| *k.key_type() == KeyType::Hash);
    let names = hash.into_iter().chain(range);
    names.map(|k| k.attribute_name().to_owned()).collect()
}
