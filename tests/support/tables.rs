//! Test tables: named uniquely within a run, shaped like the sweeper's (its GSI, or none), and
//! the checkpoint and expiry index tables beside them.

use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use aws_sdk_dynamodb::Client;

use super::client;

/// A table name unique within this test run.
pub fn table_name(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Shape of a test table.
pub struct TableSpec<'a> {
    pub name: &'a str,
    pub partition: (&'a str, ScalarAttributeType),
    pub sort: Option<(&'a str, ScalarAttributeType)>,
    pub projection: ProjectionType,
    /// Whether to create the sweeper's GSI (an existing table before adoption has none).
    pub index: bool,
    /// The type of the GSI's sort key, `ttl`.
    pub ttl_type: ScalarAttributeType,
    /// The table's stream, with this view, if any.
    pub stream: Option<StreamViewType>,
}

impl<'a> TableSpec<'a> {
    pub fn simple(name: &'a str) -> Self {
        TableSpec {
            name,
            partition: ("id", ScalarAttributeType::S),
            sort: None,
            projection: ProjectionType::KeysOnly,
            index: true,
            ttl_type: ScalarAttributeType::N,
            stream: None,
        }
    }
}

/// Drops `table`, as a test suite does between tests or an operator by mistake.
pub async fn drop_table(client: &Client, table: &str) {
    let dropped = client.delete_table().table_name(table).send().await;
    dropped.unwrap_or_else(|e| panic!("delete {table}: {e:?}"));
}

/// Creates the table with the sweeper's GSI (`expirationWindowIndex` on `expirationWindow` S,
/// `ttl` N). TTL stays off, so the server's own TTL process cannot delete anything.
pub async fn create_table(client: &Client, spec: &TableSpec<'_>) {
    let mut defs = vec![attr(spec.partition.0, spec.partition.1.clone())];
    if spec.index {
        defs.push(attr("expirationWindow", ScalarAttributeType::S));
        defs.push(attr("ttl", spec.ttl_type.clone()));
    }
    let mut keys = vec![key_el(spec.partition.0, KeyType::Hash)];
    if let Some((name, ty)) = &spec.sort {
        defs.push(attr(name, ty.clone()));
        keys.push(key_el(name, KeyType::Range));
    }
    let gsi = GlobalSecondaryIndex::builder()
        .index_name("expirationWindowIndex")
        .key_schema(key_el("expirationWindow", KeyType::Hash))
        .key_schema(key_el("ttl", KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(spec.projection.clone())
                .build(),
        )
        .build()
        .unwrap();
    client
        .create_table()
        .table_name(spec.name)
        .set_attribute_definitions(Some(defs))
        .set_key_schema(Some(keys))
        .set_global_secondary_indexes(spec.index.then(|| vec![gsi]))
        .billing_mode(BillingMode::PayPerRequest)
        .set_stream_specification(spec.stream.clone().map(|view| {
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .unwrap()
        }))
        .send()
        .await
        .expect("create table");
}

/// Creates a table named from `prefix` with `client`, shaped like [`TableSpec::simple`] and then
/// by `shape` (e.g. `|t| t.index = false`); returns its name.
pub async fn new_table(
    client: &Client,
    prefix: &str,
    shape: impl FnOnce(&mut TableSpec<'_>),
) -> String {
    let table = table_name(prefix);
    let mut spec = TableSpec::simple(&table);
    shape(&mut spec);
    create_table(client, &spec).await;
    table
}

/// A client for the test server and a new table named from `prefix`, shaped like
/// [`TableSpec::simple`].
pub async fn simple_table(prefix: &str) -> (Client, String) {
    let client = client().await;
    let table = new_table(&client, prefix, |_| {}).await;
    (client, table)
}

pub fn attr(name: &str, ty: ScalarAttributeType) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ty)
        .build()
        .unwrap()
}

pub fn key_el(name: &str, ty: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(ty)
        .build()
        .unwrap()
}

/// Creates a checkpoint table (partition key `id`, String) named from `prefix`; returns its name.
pub async fn checkpoint_table(client: &Client, prefix: &str) -> String {
    new_table(client, prefix, |t| t.index = false).await
}

/// Creates an expiry index table (`EXPIRY_INDEX_TABLE`: `window` S, `entry` S) named from
/// `prefix`; returns its name.
pub async fn index_table(client: &Client, prefix: &str) -> String {
    let shape = |t: &mut TableSpec| {
        t.partition = ("window", ScalarAttributeType::S);
        t.sort = Some(("entry", ScalarAttributeType::S));
        t.index = false;
    };
    new_table(client, prefix, shape).await
}

/// An application's table as a writer that knows nothing of the sweeper has it (no GSI; a stream
/// with `view`), and the sweeper's expiry index table: (client, table, index table).
pub async fn indexed_table(prefix: &str, view: StreamViewType) -> (Client, String, String) {
    let client = client().await;
    let table = new_table(&client, prefix, |t| {
        t.index = false;
        t.stream = Some(view);
    })
    .await;
    let index = index_table(&client, &format!("{prefix}_idx")).await;
    (client, table, index)
}
