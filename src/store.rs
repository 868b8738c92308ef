//! The only module that talks to DynamoDB.
//!
//! [`Store`] is the narrow seam the sweep engine uses: query one page of a window, delete a batch,
//! delete one item on condition. [`DynamoStore`] implements it over the AWS SDK client (built once
//! by the entry point, pointed at AWS or at a local endpoint through `AWS_ENDPOINT_URL`), and
//! [`DynamoStore::describe`] checks at start-up that the table and index have the shape the
//! sweeper needs. SDK errors are classified once, here, into [`ErrorKind`].

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeyType, ReturnValuesOnConditionCheckFailure,
    ScalarAttributeType, TableDescription, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use tracing::instrument;

use crate::config::Config;

/// An item's primary key (or a whole item, as returned by a query).
pub type Key = HashMap<String, AttributeValue>;

/// What went wrong talking to DynamoDB, as far as the caller's decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Throttling (`ProvisionedThroughputExceededException`, `ThrottlingException`,
    /// `RequestLimitExceeded`): retry with backoff.
    Throttled,
    /// A 5xx, a timeout or a broken connection: retry with backoff.
    Transient,
    /// A condition expression did not hold: the item was kept.
    ConditionFailed,
    /// The table (or index) does not exist.
    NotFound,
    /// Credentials missing, rejected, or not allowed to do this.
    Auth,
    /// The request was rejected as invalid (wrong attribute types, missing index, ...).
    Validation,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Whether a later attempt of the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Throttled | ErrorKind::Transient)
    }
}

/// A failed DynamoDB call: its classification, the operation, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed ({kind:?}{code}): {message}", code = code.as_deref().map(|c| format!(", {c}")).unwrap_or_default())]
pub struct StoreError {
    /// Classification used for retry decisions.
    pub kind: ErrorKind,
    /// The DynamoDB operation, e.g. `BatchWriteItem`.
    pub operation: &'static str,
    /// The AWS error code, when the service sent one.
    pub code: Option<String>,
    /// Human-readable detail.
    pub message: String,
    /// The underlying SDK error.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// A store error with no underlying SDK error (e.g. a schema check that failed).
    pub fn new(kind: ErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            operation,
            code: None,
            message: message.into(),
            source: None,
        }
    }

    fn from_sdk<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = match &err {
            SdkError::ServiceError(e) => Some(e.raw().status().as_u16()),
            SdkError::ResponseError(e) => Some(e.raw().status().as_u16()),
            _ => None,
        };
        let code = err.code().map(str::to_owned);
        let kind = classify(&err, code.as_deref(), status);
        let message = err
            .message()
            .map(str::to_owned)
            .unwrap_or_else(|| describe_chain(&err));
        StoreError {
            kind,
            operation,
            code,
            message,
            source: Some(Box::new(err)),
        }
    }
}

fn describe_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

fn classify<E, R>(err: &SdkError<E, R>, code: Option<&str>, status: Option<u16>) -> ErrorKind {
    match code {
        Some(
            "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "Throttling",
        ) => return ErrorKind::Throttled,
        Some("ConditionalCheckFailedException") => return ErrorKind::ConditionFailed,
        Some("ResourceNotFoundException") => return ErrorKind::NotFound,
        Some(
            "UnrecognizedClientException"
            | "AccessDeniedException"
            | "InvalidSignatureException"
            | "MissingAuthenticationToken"
            | "ExpiredTokenException"
            | "IncompleteSignatureException",
        ) => return ErrorKind::Auth,
        Some("ValidationException" | "SerializationException") => return ErrorKind::Validation,
        Some("InternalServerError" | "ServiceUnavailable" | "InternalFailure") => {
            return ErrorKind::Transient
        }
        _ => {}
    }
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            ErrorKind::Transient
        }
        _ => match status {
            Some(s) if s >= 500 => ErrorKind::Transient,
            Some(403) => ErrorKind::Auth,
            _ => ErrorKind::Other,
        },
    }
}

/// What the sweeper knows about the table after start-up checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The table's name (or ARN, as configured).
    pub table_name: String,
    /// The GSI to query.
    pub index_name: String,
    /// Primary key attribute names: the partition key, then the sort key if any.
    pub key_attributes: Vec<String>,
    /// The window attribute (the GSI partition key).
    pub window_attribute: String,
    /// The ttl attribute (the GSI sort key).
    pub ttl_attribute: String,
}

impl TableSchema {
    /// Builds the primary key of `item` (which must come from this table or its index).
    pub fn key_of(&self, item: &Key) -> Option<Key> {
        self.key_attributes
            .iter()
            .map(|a| item.get(a).map(|v| (a.clone(), v.clone())))
            .collect()
    }
}

/// One page of a window query.
#[derive(Debug, Default, Clone)]
pub struct Page {
    /// Items as projected: key attributes and the ttl attribute.
    pub items: Vec<Key>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Key>,
}

/// Outcome of a conditional delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionalOutcome {
    /// The item was deleted.
    Deleted,
    /// The condition did not hold: the item's ttl was extended or removed. The item stays.
    Kept,
    /// The item no longer existed when the delete arrived: an earlier attempt whose answer was
    /// lost (a dropped connection, a timeout) already deleted it, or the application did.
    Gone,
}

/// The operations the sweep engine needs from DynamoDB.
pub trait Store: Send + Sync {
    /// One page of items in `window_key` whose ttl is `< now`, starting after `start`.
    fn query_expired(
        &self,
        schema: &TableSchema,
        window_key: &str,
        now: i64,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// Deletes up to 25 keys in one `BatchWriteItem`; returns the keys left unprocessed.
    fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send;

    /// Deletes `key` only if its ttl attribute exists and is `< now`.
    fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        now: i64,
    ) -> impl Future<Output = Result<ConditionalOutcome, StoreError>> + Send;

    /// Reads the checkpoint `id` from `table`: the window boundary (epoch seconds) up to which
    /// everything was swept, or `None` if there is none yet.
    fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// Moves the checkpoint `id` forward to `to`, never backwards: a no-op (returning `false`) if
    /// it already is at or past `to`.
    fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

impl<S: Store> Store for &S {
    fn query_expired(
        &self,
        schema: &TableSchema,
        window_key: &str,
        now: i64,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send {
        (**self).query_expired(schema, window_key, now, start, limit)
    }
    fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send {
        (**self).batch_delete(schema, keys)
    }
    fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        now: i64,
    ) -> impl Future<Output = Result<ConditionalOutcome, StoreError>> + Send {
        (**self).delete_if_expired(schema, key, now)
    }
    fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
        (**self).read_checkpoint(table, id)
    }
    fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).advance_checkpoint(table, id, to)
    }
}

/// TCP/TLS connect timeout of the client built by [`DynamoStore::from_env`].
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Timeout of one attempt of one request.
pub const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Timeout of one operation, all SDK retries included.
pub const OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Attempts the SDK makes for non-delete requests (1 + 2 retries).
pub const SDK_MAX_ATTEMPTS: u32 = 3;

/// [`Store`] over the AWS SDK DynamoDB client.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
}

impl DynamoStore {
    /// Wraps a client built by the caller.
    pub fn new(client: Client) -> Self {
        DynamoStore { client }
    }

    /// Builds a client from the standard AWS configuration chain (`AWS_REGION`,
    /// `AWS_ENDPOINT_URL`, credentials, ...), with explicit timeouts and retry budget:
    ///
    /// - connect timeout [`CONNECT_TIMEOUT`], each attempt [`ATTEMPT_TIMEOUT`], each operation
    ///   including retries [`OPERATION_TIMEOUT`], so a stalled connection cannot eat the
    ///   invocation;
    /// - the SDK's standard retry mode, [`SDK_MAX_ATTEMPTS`] attempts, for `DescribeTable`,
    ///   `Query`, `Scan` and the checkpoint. Deletes turn SDK retries off (see
    ///   [`Store::batch_delete`]): the sweep engine retries them itself, so a key is sent at most
    ///   `MAX_RETRIES + 1` times per sweep and attempts never multiply.
    pub async fn from_env() -> Self {
        use aws_config::retry::RetryConfig;
        use aws_config::timeout::TimeoutConfig;
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .operation_timeout(OPERATION_TIMEOUT)
                    .build(),
            )
            .retry_config(RetryConfig::standard().with_max_attempts(SDK_MAX_ATTEMPTS))
            .load()
            .await;
        DynamoStore::new(Client::new(&shared))
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Reads the table with `DescribeTable` and checks that the index exists and is keyed on
    /// (window attribute: String, ttl attribute: Number).
    #[instrument(skip_all, fields(table = %config.table_name, index = %config.index_name))]
    pub async fn describe(&self, config: &Config) -> Result<TableSchema, StoreError> {
        const OP: &str = "DescribeTable";
        let table = self
            .describe_table(&config.table_name, || {
                format!(
                    "table {:?} does not exist in this account and region (check TABLE_NAME, \
                     AWS_REGION and AWS_ENDPOINT_URL)",
                    config.table_name
                )
            })
            .await?;
        let key_attributes = ordered_key(table.key_schema());
        if key_attributes.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Other,
                OP,
                "table has no key schema",
            ));
        }
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
            .find(|i| i.index_name() == Some(config.index_name.as_str()))
        else {
            let names: Vec<&str> = indexes.iter().filter_map(|i| i.index_name()).collect();
            return Err(StoreError::new(
                ErrorKind::NotFound,
                OP,
                format!(
                    "table {:?} has no global secondary index {:?} (INDEX_NAME); it has {:?}. \
                     Create a GSI with partition key {:?} (S) and sort key {:?} (N)",
                    config.table_name,
                    config.index_name,
                    names,
                    config.window_attribute,
                    config.ttl_attribute
                ),
            ));
        };
        let index_key = ordered_key(index.key_schema());
        let expected = [
            config.window_attribute.clone(),
            config.ttl_attribute.clone(),
        ];
        let types_ok = attr_type(&config.window_attribute) == Some(ScalarAttributeType::S)
            && attr_type(&config.ttl_attribute) == Some(ScalarAttributeType::N);
        if index_key != expected || !types_ok {
            let actual: Vec<String> = index_key
                .iter()
                .map(|name| match attr_type(name) {
                    Some(t) => format!("{name} ({})", t.as_str()),
                    None => name.clone(),
                })
                .collect();
            return Err(StoreError::new(
                ErrorKind::Validation,
                OP,
                format!(
                    "index {:?} is keyed on {}; the sweeper needs partition key {:?} (S, \
                     WINDOW_ATTRIBUTE) and sort key {:?} (N, TTL_ATTRIBUTE)",
                    config.index_name,
                    actual.join(", "),
                    config.window_attribute,
                    config.ttl_attribute
                ),
            ));
        }
        // Every projection type (KEYS_ONLY, INCLUDE, ALL) carries the table key and the index
        // key, which is all a sweep reads.
        Ok(TableSchema {
            table_name: config.table_name.clone(),
            index_name: config.index_name.clone(),
            key_attributes,
            window_attribute: config.window_attribute.clone(),
            ttl_attribute: config.ttl_attribute.clone(),
        })
    }
}

fn ordered_key(schema: &[aws_sdk_dynamodb::types::KeySchemaElement]) -> Vec<String> {
    let mut hash: Vec<String> = Vec::new();
    let mut range: Vec<String> = Vec::new();
    for k in schema {
        match k.key_type() {
            KeyType::Hash => hash.push(k.attribute_name().to_owned()),
            _ => range.push(k.attribute_name().to_owned()),
        }
    }
    hash.extend(range);
    hash
}

/// Placeholder names for the key attributes in expressions: `#k0`, `#k1`.
fn key_placeholders(schema: &TableSchema) -> impl Iterator<Item = (String, String)> + '_ {
    schema
        .key_attributes
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("#k{i}"), a.clone()))
}

/// Requests to delete are retried by the sweep engine itself, with backoff and jitter, so the
/// SDK's own retry loop is turned off for them: attempts do not multiply.
fn no_sdk_retries() -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::default().retry_config(RetryConfig::disabled())
}

impl Store for DynamoStore {
    #[instrument(level = "debug", skip_all, fields(window = window_key))]
    async fn query_expired(
        &self,
        schema: &TableSchema,
        window_key: &str,
        now: i64,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let mut projection: Vec<String> = key_placeholders(schema).map(|(p, _)| p).collect();
        projection.push("#ttl".into());
        let mut req = self
            .client
            .query()
            .table_name(&schema.table_name)
            .index_name(&schema.index_name)
            .key_condition_expression("#win = :win AND #ttl < :now")
            .expression_attribute_names("#win", &schema.window_attribute)
            .expression_attribute_names("#ttl", &schema.ttl_attribute)
            .expression_attribute_values(":win", AttributeValue::S(window_key.to_owned()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .projection_expression(projection.join(", "))
            .set_exclusive_start_key(start)
            .set_limit(limit);
        for (placeholder, name) in key_placeholders(schema) {
            req = req.expression_attribute_names(placeholder, name);
        }
        let out = req
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        Ok(Page {
            items: out.items.unwrap_or_default(),
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
        })
    }

    #[instrument(level = "debug", skip_all, fields(keys = keys.len()))]
    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
    ) -> Result<Vec<Key>, StoreError> {
        let requests = keys
            .into_iter()
            .map(|key| {
                let delete = DeleteRequest::builder()
                    .set_key(Some(key))
                    .build()
                    .map_err(|e| {
                        StoreError::new(ErrorKind::Other, "BatchWriteItem", e.to_string())
                    })?;
                Ok(WriteRequest::builder().delete_request(delete).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let out = self
            .client
            .batch_write_item()
            .request_items(&schema.table_name, requests)
            .customize()
            .config_override(no_sdk_retries())
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

    #[instrument(level = "debug", skip(self))]
    async fn read_checkpoint(&self, table: &str, id: &str) -> Result<Option<i64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        let Some(value) = out.item.as_ref().and_then(|i| i.get(CHECKPOINT_ATTRIBUTE)) else {
            return Ok(None);
        };
        match value {
            AttributeValue::N(n) => n.parse::<i64>().map(Some).map_err(|_| {
                StoreError::new(
                    ErrorKind::Validation,
                    "GetItem",
                    format!("checkpoint {id:?} holds {n:?}, not epoch seconds"),
                )
            }),
            other => Err(StoreError::new(
                ErrorKind::Validation,
                "GetItem",
                format!("checkpoint {id:?} holds {other:?}, not a Number"),
            )),
        }
    }

    #[instrument(level = "debug", skip(self))]
    async fn advance_checkpoint(&self, table: &str, id: &str, to: i64) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .update_expression("SET #s = :to, #u = :now")
            .condition_expression("attribute_not_exists(#s) OR #s < :to")
            .expression_attribute_names("#s", CHECKPOINT_ATTRIBUTE)
            .expression_attribute_names("#u", "updatedAt")
            .expression_attribute_values(":to", AttributeValue::N(to.to_string()))
            .expression_attribute_values(
                ":now",
                AttributeValue::S(
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => {
                let e = StoreError::from_sdk("UpdateItem", e);
                if e.kind == ErrorKind::ConditionFailed {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    #[instrument(level = "debug", skip_all)]
    async fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        now: i64,
    ) -> Result<ConditionalOutcome, StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&schema.table_name)
            .set_key(Some(key))
            .condition_expression("attribute_exists(#ttl) AND #ttl < :now")
            .expression_attribute_names("#ttl", &schema.ttl_attribute)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            // Tells a kept item (returned) from one that is already gone (nothing returned).
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .customize()
            .config_override(no_sdk_retries())
            .send()
            .await;
        match result {
            Ok(_) => Ok(ConditionalOutcome::Deleted),
            Err(e) => match e.as_service_error() {
                Some(DeleteItemError::ConditionalCheckFailedException(c)) => Ok(match &c.item {
                    Some(item) if !item.is_empty() => ConditionalOutcome::Kept,
                    _ => ConditionalOutcome::Gone,
                }),
                _ => Err(StoreError::from_sdk("DeleteItem", e)),
            },
        }
    }
}

/// Attribute of the checkpoint item holding the boundary, epoch seconds.
pub const CHECKPOINT_ATTRIBUTE: &str = "sweptUntil";

impl DynamoStore {
    /// `DescribeTable`, with the error for a missing table saying `missing()` instead of the
    /// service's generic message.
    async fn describe_table(
        &self,
        table: &str,
        missing: impl FnOnce() -> String,
    ) -> Result<TableDescription, StoreError> {
        const OP: &str = "DescribeTable";
        let out = self
            .client
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

    /// The table's primary key (partition key first) and its approximate size, for tools that
    /// do not need the sweeper's index (backfill, audit). DynamoDB refreshes the size about
    /// every six hours.
    pub async fn table_info(&self, table: &str) -> Result<TableInfo, StoreError> {
        let t = self
            .describe_table(table, || {
                format!("table {table:?} does not exist in this account and region")
            })
            .await?;
        Ok(TableInfo {
            key_attributes: ordered_key(t.key_schema()),
            size_bytes: t.table_size_bytes().unwrap_or(0),
            item_count: t.item_count().unwrap_or(0),
        })
    }

    /// Checks that the checkpoint table exists and is keyed on `id` (String).
    pub async fn check_checkpoint_table(&self, table: &str) -> Result<(), StoreError> {
        let t = self
            .describe_table(table, || {
                format!(
                    "checkpoint table {table:?} (CHECKPOINT_TABLE) does not exist; create it \
                     with partition key `id` (String)"
                )
            })
            .await?;
        let key = ordered_key(t.key_schema());
        if key != ["id"] {
            return Err(StoreError::new(
                ErrorKind::Validation,
                "DescribeTable",
                format!(
                    "checkpoint table {table:?} (CHECKPOINT_TABLE) is keyed on {key:?}; it needs \
                     partition key `id` (String) and no sort key"
                ),
            ));
        }
        Ok(())
    }
}

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

/// What the scanning tools need to know about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Primary key attribute names, the partition key first.
    pub key_attributes: Vec<String>,
    /// Approximate size in bytes.
    pub size_bytes: i64,
    /// Approximate item count.
    pub item_count: i64,
}

/// Outcome of a conditional window update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// The window attribute was written.
    Written,
    /// The item changed (ttl or window) or was deleted since it was read; nothing was written.
    Changed,
}

impl DynamoStore {
    /// Reads one page of segment `segment` of `total` of a parallel scan, projecting `attributes`
    /// (all attributes when empty).
    #[instrument(level = "debug", skip(self, start, attributes))]
    pub async fn scan_page(
        &self,
        table: &str,
        segment: u32,
        total: u32,
        start: Option<Key>,
        attributes: &[String],
        limit: Option<i32>,
    ) -> Result<ScanPage, StoreError> {
        let mut req = self
            .client
            .scan()
            .table_name(table)
            .segment(segment as i32)
            .total_segments(total as i32)
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total);
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
            consumed: out
                .consumed_capacity()
                .and_then(|c| c.capacity_units())
                .unwrap_or(0.0),
            items: out.items.unwrap_or_default(),
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
        })
    }

    /// Sets the window attribute of `key` to `window` only if the item still has the ttl it was
    /// read with and the window value it was read with (`None`: no window attribute), so a
    /// concurrent change is never overwritten and a deleted item is never recreated. Returns the
    /// outcome and the write capacity consumed.
    #[instrument(level = "debug", skip(self, key, ttl, old))]
    #[allow(clippy::too_many_arguments)]
    pub async fn set_window_if_unchanged(
        &self,
        table: &str,
        key: Key,
        ttl_attribute: &str,
        ttl: AttributeValue,
        window_attribute: &str,
        old: Option<AttributeValue>,
        window: String,
    ) -> Result<(UpdateOutcome, f64), StoreError> {
        let mut req = self
            .client
            .update_item()
            .table_name(table)
            .set_key(Some(key))
            .update_expression("SET #w = :w")
            .expression_attribute_names("#w", window_attribute)
            .expression_attribute_names("#t", ttl_attribute)
            .expression_attribute_values(":w", AttributeValue::S(window))
            .expression_attribute_values(":t", ttl)
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total);
        req = match old {
            None => req.condition_expression("#t = :t AND attribute_not_exists(#w)"),
            Some(old) => req
                .condition_expression("#t = :t AND #w = :old")
                .expression_attribute_values(":old", old),
        };
        match req.send().await {
            Ok(out) => Ok((
                UpdateOutcome::Written,
                out.consumed_capacity()
                    .and_then(|c| c.capacity_units())
                    .unwrap_or(1.0),
            )),
            Err(e) => {
                let e = StoreError::from_sdk("UpdateItem", e);
                if e.kind == ErrorKind::ConditionFailed {
                    Ok((UpdateOutcome::Changed, 1.0))
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// Renders a key as DynamoDB JSON (`{"id": {"S": "a"}}`) for reports and logs.
pub fn key_to_json(key: &Key) -> serde_json::Value {
    let mut names: Vec<&String> = key.keys().collect();
    names.sort();
    let map = names
        .into_iter()
        .map(|n| (n.clone(), attribute_to_json(&key[n])))
        .collect();
    serde_json::Value::Object(map)
}

/// Parses a key rendered by [`key_to_json`] (String, Number and Binary attributes).
pub fn key_from_json(value: &serde_json::Value) -> Option<Key> {
    value
        .as_object()?
        .iter()
        .map(|(name, v)| {
            let (kind, text) = v.as_object()?.iter().next()?;
            let text = text.as_str()?;
            let attr = match kind.as_str() {
                "S" => AttributeValue::S(text.to_owned()),
                "N" => AttributeValue::N(text.to_owned()),
                "B_hex" => AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(unhex(text)?)),
                _ => return None,
            };
            Some((name.clone(), attr))
        })
        .collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn attribute_to_json(value: &AttributeValue) -> serde_json::Value {
    use serde_json::json;
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B_hex": hex(b.as_ref()) }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        other => json!({ "other": format!("{other:?}") }),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_json() {
        let key: Key = HashMap::from([
            (
                "pk".to_string(),
                AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(vec![
                    0, 1, 254, 255,
                ])),
            ),
            ("sk".to_string(), AttributeValue::N("42.5".into())),
            ("s".to_string(), AttributeValue::S("user#1".into())),
        ]);
        assert_eq!(key_from_json(&key_to_json(&key)), Some(key));
        assert_eq!(
            key_from_json(&serde_json::json!({"a": {"BOOL": true}})),
            None
        );
        assert_eq!(
            key_from_json(&serde_json::json!({"a": {"B_hex": "zz"}})),
            None
        );
    }
}
