//! Start-up checks: one `DescribeTable` tells whether the table exists, what its key is, and
//! whether the index has the shape the sweeper needs. [`open`] is the one way every command
//! (sweep, run, the Lambda, backfill, audit) gets its [`TableSchema`].

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType, ScalarAttributeType, TableDescription};
use tracing::instrument;

use super::{entries, DynamoStore, ErrorKind, Index, StoreError, TableSchema};
use crate::expiry::Layout;

const OP: &str = "DescribeTable";

/// The table a command works on, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTarget {
    /// Table name or ARN (`TABLE_NAME`).
    pub table_name: String,
    /// The index the table is swept through.
    pub index: Index,
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
    /// Whether the table has a stream enabled.
    pub has_stream: bool,
}

/// Reads `target`'s table once and checks it (and the checkpoint table, when configured).
#[instrument(skip_all, fields(table = %target.table_name, index = %target.index.name()))]
pub async fn open(
    store: &DynamoStore,
    target: &TableTarget,
    index: IndexCheck,
) -> Result<OpenedTable, StoreError> {
    let name = &target.table_name;
    let missing = || {
        let check = "check TABLE_NAME, AWS_REGION and AWS_ENDPOINT_URL";
        format!("table {name:?} does not exist in this account and region ({check})")
    };
    let table = store.describe_table(name, missing).await?;
    let (schema, index_present) = match &target.index {
        Index::Table(index_table) => {
            store.check_index_table(index_table).await?;
            // A tool only checks the claims; a sweeper claims before its first sweep (not here:
            // the Lambda's stream indexer opens the table too, and reads nothing of the index).
            if index == IndexCheck::IfPresent {
                let name = table.table_name().unwrap_or(&target.table_name);
                store.claim_index(index_table, name, false).await?;
            }
            (schema_of(&table, target)?, true)
        }
        Index::Gsi(gsi) => check_table(&table, target, gsi, index)?,
    };
    if !index_present {
        tracing::warn!(
            index = %target.index.name(),
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
        has_stream: (table.stream_specification()).is_some_and(|s| s.stream_enabled()),
    })
}

impl DynamoStore {
    /// A table's ARN and its key attributes (the partition key first), from one `DescribeTable`:
    /// what a local test sweep ([`crate::tools::local`]) needs and checks.
    pub async fn table_arn_and_key(
        &self,
        table: &str,
    ) -> Result<(String, Vec<String>), StoreError> {
        let missing = || {
            format!("table {table:?} does not exist on this server (check TABLE_NAME and AWS_ENDPOINT_URL)")
        };
        let description = self.describe_table(table, missing).await?;
        let arn = description.table_arn().unwrap_or_default().to_owned();
        Ok((arn, key_attributes(&description)?))
    }

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

    /// Checks that the expiry index table `index` serves `table` alone ([`entries::OWNERS`]);
    /// with `claim` (a sweeper; the tools only check), records `table`'s claim when it has none
    /// yet, then reads the claims again: of two tables claiming at once, each sees the other,
    /// withdraws and is refused.
    pub(super) async fn claim_index(
        &self,
        index: &str,
        table: &str,
        claim: bool,
    ) -> Result<(), StoreError> {
        let owners = self.index_owners(index).await?;
        let refused = |owners: &[String]| {
            let others: Vec<&String> = owners.iter().filter(|o| *o != table).collect();
            (!others.is_empty()).then(|| shared_index(index, table, &others))
        };
        if let Some(e) = refused(&owners) {
            return Err(e);
        }
        if !claim || owners.iter().any(|o| o == table) {
            return Ok(());
        }
        tracing::info!(
            index,
            table,
            "claiming the expiry index table for this table"
        );
        self.write_claim(index, table, true).await?;
        let owners = self.index_owners(index).await?;
        let Some(e) = refused(&owners) else {
            return Ok(());
        };
        if let Err(withdraw) = self.write_claim(index, table, false).await {
            tracing::warn!(index, table, error = %withdraw, "could not withdraw this table's claim on a shared expiry index table");
        }
        Err(e)
    }

    /// The tables that claim the expiry index table `index` (one strongly consistent `Query`).
    async fn index_owners(&self, index: &str) -> Result<Vec<String>, StoreError> {
        let out = self
            .index_query(index, entries::OWNERS)
            .key_condition_expression("#w = :w")
            .projection_expression("#e")
            .expression_attribute_names("#e", entries::ENTRY)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let owner = |item: &super::Key| item.get(entries::ENTRY)?.as_s().ok().cloned();
        Ok(out.items().iter().filter_map(owner).collect())
    }

    /// Puts (`put`) or withdraws `table`'s claim on the expiry index table `index`.
    async fn write_claim(&self, index: &str, table: &str, put: bool) -> Result<(), StoreError> {
        use super::EntryWrite::{Put, Remove};
        let id = entries::id(entries::OWNERS, table);
        let write = if put { Put(id) } else { Remove(id) };
        let send = |writes| self.write_index(index, writes);
        let (_, written) = super::write_all(send, vec![write], super::dynamo::FEW_ATTEMPTS).await;
        written.map_err(|(mut e, _)| {
            e.message = format!("the claim on expiry index table {index:?}: {}", e.message);
            e
        })
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
    index_name: &str,
    check: IndexCheck,
) -> Result<(TableSchema, bool), StoreError> {
    let table_name = &target.table_name;
    let window = target.layout.window_attribute.as_str();
    let ttl = target.layout.ttl_attribute.as_str();
    let schema = schema_of(table, target)?;
    let definitions = table.attribute_definitions();
    let attr_type = |name: &str| {
        let definition = definitions.iter().find(|d| d.attribute_name() == name);
        definition.map(|d| d.attribute_type().clone())
    };
    let indexes = table.global_secondary_indexes();
    let Some(index) = indexes.iter().find(|i| i.index_name() == Some(index_name)) else {
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
        let typed = |name: &String| match attr_type(name) {
            Some(t) => format!("{name} ({})", t.as_str()),
            None => name.clone(),
        };
        let actual: Vec<String> = index_key.iter().map(typed).collect();
        let message = format!(
            "index {index_name:?} is keyed on {}; the sweeper needs partition key \
             {window:?} (S, WINDOW_ATTRIBUTE) and sort key {ttl:?} (N, TTL_ATTRIBUTE)",
            actual.join(", ")
        );
        return Err(StoreError::new(ErrorKind::Validation, OP, message));
    }
    // Every projection (KEYS_ONLY, INCLUDE, ALL) has the table and index keys: all a sweep reads.
    Ok((schema, true))
}

/// The schema of `table` as `target` configures it: its key attributes and layout.
fn schema_of(table: &TableDescription, target: &TableTarget) -> Result<TableSchema, StoreError> {
    Ok(TableSchema {
        table_name: target.table_name.clone(),
        index: target.index.clone(),
        key_attributes: key_attributes(table)?,
        layout: target.layout.clone(),
    })
}

/// `table`'s key attributes, the partition key first; an error if it has none.
fn key_attributes(table: &TableDescription) -> Result<Vec<String>, StoreError> {
    let key = ordered_key(table.key_schema());
    if key.is_empty() {
        let message = "table has no key schema";
        return Err(StoreError::new(ErrorKind::Other, OP, message));
    }
    Ok(key)
}

/// Key attribute names, the partition (hash) key first.
fn ordered_key(schema: &[KeySchemaElement]) -> Vec<String> {
    let (hash, range): (Vec<_>, Vec<_>) =
        schema.iter().partition(|k| *k.key_type() == KeyType::Hash);
    let names = hash.into_iter().chain(range);
    names.map(|k| k.attribute_name().to_owned()).collect()
}

/// The error of an expiry index table that other tables claim.
fn shared_index(index: &str, table: &str, others: &[&String]) -> StoreError {
    let message = format!(
        "expiry index table {index:?} (EXPIRY_INDEX_TABLE) already serves table(s) {others:?}: \
         each table needs an expiry index table of its own (a sweep of {table:?} would read their \
         entries, find their items absent from {table:?} and remove them). Give {table:?} an \
         index table of its own; if {others:?} no longer use this one, delete their claims (items \
         with `window` = {:?} and `entry` = the table's name)",
        entries::OWNERS
    );
    StoreError::new(ErrorKind::Validation, OP, message)
}
