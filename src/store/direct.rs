//! The sweep's hot path: `Query` pages and `BatchWriteItem` deletes written, signed and sent
//! without the SDK's request pipeline.
//!
//! A profile of a sweep (docs/BENCHMARKS.md, "Where the CPU goes") put about three fifths of the
//! sweeper's CPU inside the SDK's operation pipeline, a third in `BatchWriteItem` alone and a
//! fifth in `Query`: building the typed input, interceptors, endpoint and auth resolution, the
//! retry machinery (turned off for deletes anyway), serialization and deserialization of shapes.
//! The sweep's two hot calls need none of that per request: a batch delete is 25 keys and its
//! answer almost always `{"UnprocessedItems":{}}`; a query page is a fixed expression and items
//! of two or three attributes.
//!
//! So [`Direct`] keeps the SDK for everything it is good at and skips only the pipeline:
//!
//! - **transport:** the SDK client's own HTTP connector (same TLS, connection pool, proxy and
//!   connect timeout), taken from the client the first time it sends a request ([`Capture`]);
//! - **endpoint:** the one the SDK resolved for that request (region, FIPS, dual-stack,
//!   `AWS_ENDPOINT_URL`, account-based endpoints);
//! - **credentials:** the client's own credentials resolver, through its identity cache;
//! - **signing:** `aws-sigv4`, at DynamoDB's time as its `Date` headers tell it when the host
//!   clock is off by more than a minute (the SDK corrects skew the same way);
//! - **errors:** classified by the same rules as the SDK's ([`super::error`]); every `Date` header
//!   feeds the [`ServerClock`].
//!
//! Retries are as on the SDK path: deletes are one attempt, bounded by the batch attempt timeout,
//! and the sweep engine retries them; a query page gets the SDK's standard read budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::auth::AuthSchemeId;
use aws_smithy_runtime_api::client::connection::CaptureSmithyConnection;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::identity::{
    Identity, ResolveCachedIdentity, SharedIdentityResolver,
};
use aws_smithy_runtime_api::client::runtime_components::GetIdentityResolver;
use aws_smithy_runtime_api::http::Headers;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;

use super::clock::{parse_http_date, ServerClock};
use super::codec;
use super::error::classify_code;
use super::{ErrorKind, Key, Page, StoreError};

/// An operation of DynamoDB's JSON protocol: its name (for errors) and `X-Amz-Target`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Operation {
    name: &'static str,
    target: &'static str,
}

pub(super) const BATCH_WRITE: Operation = Operation {
    name: "BatchWriteItem",
    target: "DynamoDB_20120810.BatchWriteItem",
};
pub(super) const QUERY: Operation = Operation {
    name: "Query",
    target: "DynamoDB_20120810.Query",
};
/// The SigV4 auth scheme, whose identity resolver the client holds.
const SIGV4: AuthSchemeId = AuthSchemeId::new("sigv4");
/// A host clock further than this from DynamoDB's signs at DynamoDB's time.
const SKEW_CORRECTION: Duration = Duration::from_secs(60);
/// At most this much of an error body is kept in the error message.
const MAX_ERROR_BODY: usize = 512;

/// What [`Capture`] takes from the SDK client's first request.
#[derive(Debug)]
pub(crate) struct Transport {
    connector: SharedHttpConnector,
    /// The resolved endpoint, e.g. `https://dynamodb.eu-west-1.amazonaws.com/`.
    endpoint: String,
    /// The client's SigV4 credentials resolver, asked through the client's identity cache.
    identity: SharedIdentityResolver,
    components: RuntimeComponents,
}

/// The SDK interceptor that hands [`Direct`] the client's HTTP connector, resolved endpoint and
/// credentials, from the first request the client sends (the start-up `DescribeTable`).
#[derive(Debug, Clone)]
pub(crate) struct Capture {
    pub(crate) slot: Arc<OnceLock<Transport>>,
    pub(crate) connect_timeout: Option<Duration>,
}

impl Intercept for Capture {
    fn name(&self) -> &'static str {
        "DirectCapture"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.slot.get().is_some() {
            return Ok(());
        }
        let (Some(client), Some(identity), Ok(uri)) = (
            components.http_client(),
            components.identity_resolver(SIGV4),
            context.request().uri().parse::<http::Uri>(),
        ) else {
            return Ok(());
        };
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Ok(());
        };
        let mut settings = HttpConnectorSettings::builder();
        settings.set_connect_timeout(self.connect_timeout);
        let settings = settings.build();
        let _ = self.slot.set(Transport {
            connector: client.http_connector(&settings, components),
            endpoint: format!("{scheme}://{authority}{}", uri.path()),
            identity,
            components: components.clone(),
        });
        Ok(())
    }
}

/// How the fast path retries a `Query` page: the client's own retry configuration (mode, max
/// attempts, initial and longest backoff, reconnect mode: `AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE`,
/// the profile's `max_attempts` and `retry_mode`, or what the code set), applied as the SDK's
/// standard mode applies it, with a retry quota of the SDK's size and costs, and the client's
/// operation timeout around all attempts. Deletes are one attempt each (as the SDK path sends
/// them): the sweep engine retries them.
#[derive(Debug)]
pub(crate) struct Retries {
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// Drop a connection after a transient error (the SDK's default reconnect mode).
    reconnect: bool,
    operation_timeout: Option<Duration>,
    quota: RetryQuota,
}

impl Retries {
    /// The retries `config` asks for; an error for what the fast path cannot honour.
    pub(crate) fn from_config(config: &aws_sdk_dynamodb::Config) -> Result<Self, String> {
        use aws_smithy_types::retry::{ReconnectMode, RetryMode};
        let standard = aws_smithy_types::retry::RetryConfig::standard();
        let retry = config.retry_config().unwrap_or(&standard);
        match retry.mode() {
            RetryMode::Standard => {}
            other => {
                return Err(format!(
                    "the client's retry mode is {other:?}: the fast path applies the standard \
                     mode only (set AWS_RETRY_MODE=standard, or FAST_PATH=off)"
                ))
            }
        }
        Ok(Retries {
            max_attempts: retry.max_attempts().max(1),
            initial_backoff: retry.initial_backoff(),
            max_backoff: retry.max_backoff(),
            reconnect: retry.reconnect_mode() == ReconnectMode::ReconnectOnTransientError,
            operation_timeout: config.timeout_config().and_then(|t| t.operation_timeout()),
            quota: RetryQuota::default(),
        })
    }

    /// The wait before retry number `retry` (1 for the first): exponential from the initial
    /// backoff, capped, with full jitter.
    fn backoff(&self, retry: u32) -> Duration {
        super::full_jitter(self.initial_backoff, self.max_backoff, retry)
    }
}

/// A client-side retry quota, as the SDK's standard retry mode keeps one per client: 500 tokens;
/// a retry after throttling costs 5, after a timeout or 5xx 10 (none left: the error is
/// returned); a retry that succeeds gives its cost back, a first attempt that succeeds adds 1.
#[derive(Debug)]
struct RetryQuota(std::sync::Mutex<u32>);

const QUOTA_CAPACITY: u32 = 500;
const QUOTA_THROTTLE_COST: u32 = 5;
const QUOTA_TRANSIENT_COST: u32 = 10;

impl Default for RetryQuota {
    fn default() -> Self {
        RetryQuota(std::sync::Mutex::new(QUOTA_CAPACITY))
    }
}

impl RetryQuota {
    fn tokens(&self) -> std::sync::MutexGuard<'_, u32> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the cost of retrying after `kind`, if the quota has it.
    fn acquire(&self, kind: ErrorKind) -> Option<u32> {
        let cost = match kind {
            ErrorKind::Throttled => QUOTA_THROTTLE_COST,
            _ => QUOTA_TRANSIENT_COST,
        };
        let mut tokens = self.tokens();
        let left = tokens.checked_sub(cost)?;
        *tokens = left;
        Some(cost)
    }

    /// A request succeeded; `held` is what its last retry took (0: no retry).
    fn succeeded(&self, held: u32) {
        let mut tokens = self.tokens();
        *tokens = (*tokens + held.max(1)).min(QUOTA_CAPACITY);
    }
}

/// `Query` and `BatchWriteItem` sent through the captured [`Transport`].
#[derive(Debug)]
pub(crate) struct Direct {
    transport: Arc<OnceLock<Transport>>,
    /// The signing region, or why there is none.
    region: Result<String, String>,
    /// The retries, or why the client's cannot be honoured.
    retries: Result<Retries, String>,
    attempt_timeout: Duration,
    /// The timeout of each attempt of a query page.
    query_attempt_timeout: Duration,
    server_clock: Arc<ServerClock>,
    /// Requests sent so far.
    sent: AtomicU64,
}

impl Direct {
    /// Ready once `transport` is filled and `config` has a region and retries the fast path can
    /// honour (see [`Direct::ready`]).
    pub(crate) fn new(
        transport: Arc<OnceLock<Transport>>,
        config: &aws_sdk_dynamodb::Config,
        attempt_timeout: Duration,
        query_attempt_timeout: Duration,
        server_clock: Arc<ServerClock>,
    ) -> Self {
        Direct {
            transport,
            region: config
                .region()
                .map(|r| r.to_string())
                .ok_or_else(|| "no AWS region is configured (AWS_REGION)".to_owned()),
            retries: Retries::from_config(config),
            attempt_timeout,
            query_attempt_timeout,
            server_clock,
            sent: AtomicU64::new(0),
        }
    }

    /// Requests sent so far through this path.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Whether the fast path can send: the client has sent a request (so its connector, endpoint
    /// and credentials are known), and it has a region and retries the fast path honours. The
    /// error says what is missing.
    pub(crate) fn ready(&self) -> Result<(), String> {
        self.region.as_ref().map_err(String::clone)?;
        self.retries.as_ref().map_err(String::clone)?;
        if self.transport.get().is_none() {
            return Err(
                "the client has not sent a request yet, so its connector, endpoint and \
                        credentials are not known (the table is opened first)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Deletes `keys` from `table`; answers the keys DynamoDB left unprocessed. One attempt: the
    /// sweep engine retries deletes itself.
    pub(crate) async fn batch_delete(
        &self,
        table: &str,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        let body = batch_delete_body(table, keys)?.into();
        let answer = self
            .exchange(BATCH_WRITE, body, self.attempt_timeout)
            .await?;
        unprocessed_keys(&answer)
    }

    /// One page of a partition query, retried as the client's configuration says ([`Retries`]),
    /// all attempts within its operation timeout.
    pub(crate) async fn query(&self, query: &QueryRequest<'_>) -> Result<Page, StoreError> {
        let retries = self
            .retries
            .as_ref()
            .map_err(|why| StoreError::new(ErrorKind::Other, QUERY.name, why.clone()))?;
        // Shared, not copied, by every attempt.
        let body = bytes::Bytes::from(query_body(query)?);
        let attempts = async {
            let mut attempt = 1;
            let mut held = 0;
            loop {
                let err = match self
                    .exchange(QUERY, body.clone(), self.query_attempt_timeout)
                    .await
                {
                    Ok(answer) => {
                        retries.quota.succeeded(held);
                        return query_page(&answer);
                    }
                    Err(e) => e,
                };
                if !err.kind.is_retryable() || attempt >= retries.max_attempts {
                    return Err(err);
                }
                let Some(cost) = retries.quota.acquire(err.kind) else {
                    return Err(StoreError {
                        message: format!("{} (not retried: the retry quota is spent)", err.message),
                        ..err
                    });
                };
                held = cost;
                tokio::time::sleep(retries.backoff(attempt)).await;
                attempt += 1;
            }
        };
        match retries.operation_timeout {
            None => attempts.await,
            Some(limit) => tokio::time::timeout(limit, attempts)
                .await
                .unwrap_or_else(|_| {
                    Err(transport_error(
                        QUERY,
                        &format!("no answer within the operation timeout ({limit:?})"),
                        true,
                    ))
                }),
        }
    }

    /// Sends one signed request and answers the body of a 200, or the classified error. After a
    /// transient error the connection is dropped, not reused (as the SDK does by default).
    async fn exchange(
        &self,
        operation: Operation,
        body: bytes::Bytes,
        timeout: Duration,
    ) -> Result<bytes::Bytes, StoreError> {
        let not_ready = |why: String| StoreError::new(ErrorKind::Other, operation.name, why);
        self.ready().map_err(not_ready)?;
        let (Some(transport), Ok(region), Ok(retries)) =
            (self.transport.get(), &self.region, &self.retries)
        else {
            unreachable!("checked by ready()")
        };
        let identity = transport
            .components
            .identity_cache()
            .resolve_cached_identity(
                transport.identity.clone(),
                &transport.components,
                &ConfigBag::base(),
            )
            .await
            .map_err(|e| {
                StoreError::new(ErrorKind::Auth, operation.name, format!("credentials: {e}"))
            })?;
        let mut request = signed_request(
            &transport.endpoint,
            region,
            self.signing_time(),
            operation,
            body,
            &identity,
        )?;
        let connection = CaptureSmithyConnection::new();
        request.add_extension(connection.clone());
        self.sent.fetch_add(1, Ordering::Relaxed);
        let sent = Instant::now();
        let exchange = async {
            let response = transport
                .connector
                .call(request)
                .await
                .map_err(|e| transport_error(operation, &e.to_string(), e.is_timeout()))?;
            let status = response.status().as_u16();
            let date = response.headers().get("date").and_then(parse_http_date);
            // An error's type and request id come from its headers; a success needs none.
            let headers = (status != 200).then(|| response.headers().clone());
            let body = ByteStream::new(response.into_body())
                .collect()
                .await
                .map_err(|e| {
                    transport_error(operation, &format!("reading the response: {e}"), false)
                })?
                .into_bytes();
            Ok::<_, StoreError>((status, date, headers, body))
        };
        let answer = tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(transport_error(
                    operation,
                    &format!("no answer within {timeout:?}"),
                    true,
                ))
            });
        let result = answer.and_then(|(status, date, headers, body)| {
            if let Some(date) = date {
                self.server_clock.observe(date, sent);
            }
            match headers {
                None => Ok(body),
                Some(headers) => Err(error_from_response(operation.name, status, &headers, &body)),
            }
        });
        if let Err(e) = &result {
            if e.kind == ErrorKind::Transient && retries.reconnect {
                if let Some(metadata) = connection.get() {
                    metadata.poison();
                }
            }
        }
        result
    }

    /// The host's time, or DynamoDB's when the two are further apart than [`SKEW_CORRECTION`].
    fn signing_time(&self) -> SystemTime {
        let host = SystemTime::now();
        let Some(bound) = self.server_clock.upper_bound() else {
            return host;
        };
        // The bound is at most the Date header's second ahead of DynamoDB's time.
        let server_ms = bound.millis() - 500;
        let host_ms = host
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if host_ms.abs_diff(server_ms) > SKEW_CORRECTION.as_millis() as u64 {
            SystemTime::UNIX_EPOCH + Duration::from_millis(server_ms.max(0) as u64)
        } else {
            host
        }
    }
}

/// A `POST` of `body` to `endpoint` for `operation`, signed with SigV4 as of `time` (with the
/// session token, when the credentials have one).
pub(super) fn signed_request(
    endpoint: &str,
    region: &str,
    time: SystemTime,
    operation: Operation,
    body: bytes::Bytes,
    identity: &Identity,
) -> Result<aws_smithy_runtime_api::http::Request, StoreError> {
    let name = operation.name;
    let signing_error =
        |e: &dyn std::fmt::Display| StoreError::new(ErrorKind::Auth, name, e.to_string());
    let length = body.len().to_string();
    let headers = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", operation.target),
        ("content-length", length.as_str()),
    ];
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region(region)
        .name("dynamodb")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| signing_error(&e))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        endpoint,
        headers.iter().copied(),
        SignableBody::Bytes(&body),
    )
    .map_err(|e| signing_error(&e))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| signing_error(&e))?
        .into_parts();
    let mut builder = http::Request::builder()
        .method("POST")
        .uri(endpoint)
        .header(
            "user-agent",
            concat!("ttl-sweeper/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    let mut request = builder
        .body(SdkBody::from(body))
        .map_err(|e| StoreError::new(ErrorKind::Other, name, e.to_string()))?;
    instructions.apply_to_request_http1x(&mut request);
    aws_smithy_runtime_api::http::Request::try_from(request)
        .map_err(|e| StoreError::new(ErrorKind::Other, name, e.to_string()))
}

fn transport_error(operation: Operation, message: &str, timeout: bool) -> StoreError {
    let what = if timeout {
        "timed out"
    } else {
        "dispatch failed"
    };
    StoreError::new(
        ErrorKind::Transient,
        operation.name,
        format!("{what}: {message}"),
    )
}

/// `{"RequestItems":{"<table>":[{"DeleteRequest":{"Key":{...}}}, ...]}}`, written directly.
pub(crate) fn batch_delete_body(table: &str, keys: &[&Key]) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(64 + keys.len() * 96);
    out.extend_from_slice(b"{\"RequestItems\":{");
    json_string(&mut out, table);
    out.extend_from_slice(b":[");
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"DeleteRequest\":{\"Key\":");
        write_key(&mut out, key, BATCH_WRITE)?;
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"]}}");
    Ok(out)
}

/// What one page of a partition query asks (see [`super::Call::QueryExpired`]).
#[derive(Debug)]
pub(crate) struct QueryRequest<'a> {
    pub(crate) table: &'a str,
    pub(crate) index: &'a str,
    pub(crate) window_attribute: &'a str,
    pub(crate) ttl_attribute: &'a str,
    pub(crate) key_attributes: &'a [String],
    pub(crate) partition: &'a str,
    /// The sweep instant as a DynamoDB Number (`Timestamp::to_number`).
    pub(crate) now: &'a str,
    pub(crate) start: Option<&'a Key>,
    pub(crate) limit: Option<i32>,
}

/// The `Query` body: items of one index partition with `ttl < now`, projected to the key
/// attributes and the ttl; the same request the SDK path sends.
pub(crate) fn query_body(q: &QueryRequest<'_>) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"TableName\":");
    json_string(&mut out, q.table);
    out.extend_from_slice(b",\"IndexName\":");
    json_string(&mut out, q.index);
    out.extend_from_slice(
        b",\"KeyConditionExpression\":\"#win = :win AND #ttl < :now\",\"ExpressionAttributeNames\":{\"#win\":",
    );
    json_string(&mut out, q.window_attribute);
    out.extend_from_slice(b",\"#ttl\":");
    json_string(&mut out, q.ttl_attribute);
    for (i, name) in q.key_attributes.iter().enumerate() {
        out.extend_from_slice(format!(",\"#k{i}\":").as_bytes());
        json_string(&mut out, name);
    }
    out.extend_from_slice(b"},\"ExpressionAttributeValues\":{\":win\":{\"S\":");
    json_string(&mut out, q.partition);
    out.extend_from_slice(b"},\":now\":{\"N\":");
    json_string(&mut out, q.now);
    out.extend_from_slice(b"}},\"ProjectionExpression\":\"");
    for i in 0..q.key_attributes.len() {
        out.extend_from_slice(format!("#k{i}, ").as_bytes());
    }
    out.extend_from_slice(b"#ttl\"");
    if let Some(start) = q.start {
        out.extend_from_slice(b",\"ExclusiveStartKey\":");
        write_key(&mut out, start, QUERY)?;
    }
    if let Some(limit) = q.limit {
        out.extend_from_slice(format!(",\"Limit\":{limit}").as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// A key as DynamoDB JSON: `{"pk":{"S":"a"},"n":{"N":"1"},"b":{"B":"<base64>"}}`.
fn write_key(out: &mut Vec<u8>, key: &Key, operation: Operation) -> Result<(), StoreError> {
    if let Some((name, other)) = key.iter().find(|(_, v)| !codec::is_key_value(v)) {
        return Err(StoreError::new(
            ErrorKind::Validation,
            operation.name,
            format!("key attribute {name:?} is {other:?}: keys are S, N or B"),
        ));
    }
    // Writing to a Vec cannot fail, and the codec has no failing case.
    let _ = serde_json::to_writer(&mut *out, &codec::Write(key));
    Ok(())
}

/// A `Query` answer: its items and where the next page starts.
pub(crate) fn query_page(body: &[u8]) -> Result<Page, StoreError> {
    #[derive(serde::Deserialize)]
    struct Output {
        #[serde(rename = "Items", default)]
        items: Vec<codec::Read<Key>>,
        #[serde(rename = "LastEvaluatedKey")]
        last: Option<codec::Read<Key>>,
    }
    let output: Output = serde_json::from_slice(body).map_err(|e| {
        StoreError::new(
            ErrorKind::Other,
            QUERY.name,
            format!("unreadable answer ({e}): {}", excerpt(body)),
        )
    })?;
    Ok(Page {
        items: output.items.into_iter().map(|i| i.0).collect(),
        next: output.last.map(|k| k.0).filter(|k| !k.is_empty()),
    })
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    // Writing a &str to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The keys of a `BatchWriteItem` answer's `UnprocessedItems`. A key that cannot be read back is
/// an error, never dropped: the engine then treats the whole chunk as not deleted.
pub(crate) fn unprocessed_keys(body: &[u8]) -> Result<Vec<Key>, StoreError> {
    #[derive(serde::Deserialize)]
    struct Output {
        #[serde(rename = "UnprocessedItems", default)]
        unprocessed: std::collections::HashMap<String, Vec<WriteRequest>>,
    }
    #[derive(serde::Deserialize)]
    struct WriteRequest {
        #[serde(rename = "DeleteRequest")]
        delete: Option<DeleteRequest>,
    }
    #[derive(serde::Deserialize)]
    struct DeleteRequest {
        #[serde(rename = "Key")]
        key: codec::Read<Key>,
    }
    let unreadable = |what: String| {
        StoreError::new(
            ErrorKind::Other,
            BATCH_WRITE.name,
            format!("unreadable answer ({what}): {}", excerpt(body)),
        )
    };
    let output: Output = serde_json::from_slice(body).map_err(|e| unreadable(e.to_string()))?;
    let mut keys = Vec::new();
    for request in output.unprocessed.into_values().flatten() {
        let delete = request
            .delete
            .ok_or_else(|| unreadable("an unprocessed request that is not a delete".into()))?;
        keys.push(delete.key.0);
    }
    Ok(keys)
}

/// A non-200 answer, read as the awsJson1_0 protocol says: the error type from the
/// `x-amzn-errortype` header, else the body's `code`, else its `__type`
/// (`com.amazonaws.dynamodb.v20120810#ResourceNotFoundException`), without the namespace before
/// `#` and anything after `:`; the message from `message` or `Message`; the request id from
/// `x-amzn-requestid`.
pub(crate) fn error_from_response(
    operation: &'static str,
    status: u16,
    headers: &Headers,
    body: &[u8],
) -> StoreError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let code = headers
        .get("x-amzn-errortype")
        .map(str::to_owned)
        .or_else(|| field("code"))
        .or_else(|| field("__type"))
        .map(|t| sanitize_error_type(&t).to_owned())
        .filter(|t| !t.is_empty());
    let message = field("message")
        .or_else(|| field("Message"))
        .unwrap_or_else(|| format!("HTTP {status}: {}", excerpt(body)));
    let kind = classify_code(code.as_deref()).unwrap_or(match status {
        500.. => ErrorKind::Transient,
        403 => ErrorKind::Auth,
        _ => ErrorKind::Other,
    });
    StoreError {
        kind,
        operation,
        code,
        request_id: request_id(headers),
        message,
        source: None,
    }
}

/// `aws.protocoltests#FooError:http://internal.amazon.com/...` -> `FooError`.
fn sanitize_error_type(raw: &str) -> &str {
    let raw = raw.split(':').next().unwrap_or(raw);
    raw.rsplit('#').next().unwrap_or(raw).trim()
}

/// The request id an answer carries.
fn request_id(headers: &Headers) -> Option<String> {
    headers
        .get("x-amzn-requestid")
        .or_else(|| headers.get("x-amz-request-id"))
        .map(str::to_owned)
}

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]);
    text.into_owned()
}

#[cfg(test)]
mod tests {
    use super::super::codec::tests::{any_value, key_value};
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;
    use aws_sdk_dynamodb::types::AttributeValue;
    use proptest::prelude::*;

    fn key(pairs: &[(&str, AttributeValue)]) -> Key {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn the_body_is_the_batch_write_item_request() {
        let keys = [
            key(&[
                ("pk", AttributeValue::S("user#\"1\"\n".into())),
                ("sk", AttributeValue::N("-1.5e3".into())),
            ]),
            key(&[("pk", AttributeValue::B(Blob::new(vec![0, 1, 254, 255])))]),
        ];
        let body = batch_delete_body("my \"table\"", &keys.iter().collect::<Vec<_>>()).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"RequestItems": {"my \"table\"": [
                {"DeleteRequest": {"Key": {"pk": {"S": "user#\"1\"\n"}, "sk": {"N": "-1.5e3"}}}},
                {"DeleteRequest": {"Key": {"pk": {"B": "AAH+/w=="}}}},
            ]}})
        );
    }

    #[test]
    fn a_key_that_is_not_s_n_or_b_is_refused() {
        let keys = [key(&[("pk", AttributeValue::Bool(true))])];
        let err = batch_delete_body("t", &keys.iter().collect::<Vec<_>>()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Validation);
    }

    #[test]
    fn unprocessed_keys_are_read_back() {
        let none = unprocessed_keys(br#"{"UnprocessedItems":{}}"#).unwrap();
        assert!(none.is_empty());
        let body = br#"{"UnprocessedItems":{"t":[{"DeleteRequest":{"Key":{"pk":{"S":"a"},"n":{"N":"1"}}}}]}}"#;
        assert_eq!(
            unprocessed_keys(body).unwrap(),
            vec![key(&[
                ("pk", AttributeValue::S("a".into())),
                ("n", AttributeValue::N("1".into()))
            ])]
        );
    }

    #[test]
    fn an_unreadable_answer_is_an_error_not_an_empty_list() {
        for body in [
            &b"not json"[..],
            br#"{"UnprocessedItems":{"t":[{"PutRequest":{"Item":{}}}]}}"#,
            br#"{"UnprocessedItems":{"t":[{"DeleteRequest":{"Key":{"pk":"a"}}}]}}"#,
        ] {
            let err = unprocessed_keys(body).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Other, "{err}");
        }
    }

    #[test]
    fn error_answers_are_classified_like_the_sdks() {
        let cases: [(u16, &[u8], ErrorKind, Option<&str>); 6] = [
            (
                400,
                br#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#,
                ErrorKind::Throttled,
                Some("ProvisionedThroughputExceededException"),
            ),
            (
                400,
                br#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}"#,
                ErrorKind::NotFound,
                Some("ResourceNotFoundException"),
            ),
            (
                400,
                br#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad key"}"#,
                ErrorKind::Validation,
                Some("ValidationException"),
            ),
            (
                400,
                br#"{"__type":"com.amazon.coral.service#ExpiredTokenException","Message":"old"}"#,
                ErrorKind::Auth,
                Some("ExpiredTokenException"),
            ),
            (503, b"<html>busy</html>", ErrorKind::Transient, None),
            (418, b"", ErrorKind::Other, None),
        ];
        let none = Headers::new();
        for (status, body, kind, code) in cases {
            let err = error_from_response("BatchWriteItem", status, &none, body);
            assert_eq!(err.kind, kind, "{err}");
            assert_eq!(err.code.as_deref(), code, "{err}");
        }
        let err = error_from_response(
            "Query",
            400,
            &none,
            br#"{"__type":"x#ThrottlingException","message":"m"}"#,
        );
        assert_eq!(err.message, "m");
        // The header's type wins over the body's; the request id comes along.
        let mut headers = Headers::new();
        headers.insert("x-amzn-errortype", "ProvisionedThroughputExceededException:http://internal.amazon.com/coral/com.amazon.coral.service/");
        headers.insert("x-amzn-requestid", "REQ123");
        let err = error_from_response("Query", 400, &headers, br#"{"__type":"x#Other"}"#);
        assert_eq!(err.kind, ErrorKind::Throttled, "{err}");
        assert_eq!(
            err.code.as_deref(),
            Some("ProvisionedThroughputExceededException")
        );
        assert_eq!(err.request_id.as_deref(), Some("REQ123"));
        assert!(err.to_string().contains("request id REQ123"), "{err}");
    }

    #[test]
    fn the_retry_quota_runs_out_and_successes_refill_it() {
        let quota = RetryQuota::default();
        // 500 tokens: 100 retries after throttling, then none.
        for _ in 0..100 {
            assert_eq!(
                quota.acquire(ErrorKind::Throttled),
                Some(QUOTA_THROTTLE_COST)
            );
        }
        assert_eq!(quota.acquire(ErrorKind::Throttled), None);
        // A retry that succeeds gives its cost back; a first attempt that succeeds adds one.
        quota.succeeded(QUOTA_TRANSIENT_COST);
        assert_eq!(
            quota.acquire(ErrorKind::Transient),
            Some(QUOTA_TRANSIENT_COST)
        );
        assert_eq!(quota.acquire(ErrorKind::Throttled), None);
        for _ in 0..5 {
            quota.succeeded(0);
        }
        assert_eq!(
            quota.acquire(ErrorKind::Throttled),
            Some(QUOTA_THROTTLE_COST)
        );
        // Never past the capacity.
        for _ in 0..1_000 {
            quota.succeeded(QUOTA_TRANSIENT_COST);
        }
        assert_eq!(*quota.tokens(), QUOTA_CAPACITY);
    }

    #[test]
    fn the_backoff_grows_from_the_initial_one_to_the_longest_with_full_jitter() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .retry_config(
                aws_smithy_types::retry::RetryConfig::standard()
                    .with_initial_backoff(Duration::from_millis(100))
                    .with_max_backoff(Duration::from_secs(1)),
            )
            .build();
        let retries = Retries::from_config(&config).unwrap();
        for retry in 1..40 {
            let ceiling =
                Duration::from_millis(100 << (retry - 1).min(10)).min(Duration::from_secs(1));
            for _ in 0..20 {
                assert!(retries.backoff(retry) <= ceiling, "retry {retry}");
            }
        }
        let adaptive = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .retry_config(aws_smithy_types::retry::RetryConfig::adaptive())
            .build();
        assert!(Retries::from_config(&adaptive)
            .unwrap_err()
            .contains("FAST_PATH=off"));
    }

    #[test]
    fn the_query_body_is_the_sdk_paths_request() {
        let start = key(&[
            ("id", AttributeValue::S("a".into())),
            ("expirationWindow", AttributeValue::S("w#3".into())),
            ("ttl", AttributeValue::N("100".into())),
        ]);
        let keys = ["id".to_string(), "sk".to_string()];
        let q = QueryRequest {
            table: "sessions",
            index: "byWindow",
            window_attribute: "expirationWindow",
            ttl_attribute: "ttl",
            key_attributes: &keys,
            partition: "2026-11-22T15:00#3",
            now: "1795000000.123",
            start: Some(&start),
            limit: Some(100),
        };
        let body: serde_json::Value = serde_json::from_slice(&query_body(&q).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "TableName": "sessions",
                "IndexName": "byWindow",
                "KeyConditionExpression": "#win = :win AND #ttl < :now",
                "ExpressionAttributeNames": {
                    "#win": "expirationWindow", "#ttl": "ttl", "#k0": "id", "#k1": "sk"
                },
                "ExpressionAttributeValues": {
                    ":win": {"S": "2026-11-22T15:00#3"}, ":now": {"N": "1795000000.123"}
                },
                "ProjectionExpression": "#k0, #k1, #ttl",
                "ExclusiveStartKey": {
                    "id": {"S": "a"}, "expirationWindow": {"S": "w#3"}, "ttl": {"N": "100"}
                },
                "Limit": 100,
            })
        );
        let first = QueryRequest {
            start: None,
            limit: None,
            ..q
        };
        let body: serde_json::Value = serde_json::from_slice(&query_body(&first).unwrap()).unwrap();
        assert!(body.get("ExclusiveStartKey").is_none() && body.get("Limit").is_none());
    }

    #[test]
    fn query_pages_read_every_attribute_type_and_the_next_start() {
        let body = br#"{"Count":3,"ScannedCount":3,"Items":[
            {"id":{"S":"a"},"ttl":{"N":"1"}},
            {"id":{"B":"AAH+/w=="},"ttl":{"S":"1700000000"}},
            {"id":{"S":"c"},"ttl":{"L":[{"NULL":true},{"BOOL":false},{"M":{"x":{"NS":["1","2"]}}}]}}
        ],"LastEvaluatedKey":{"id":{"S":"c"}}}"#;
        let page = query_page(body).unwrap();
        assert_eq!(page.items.len(), 3);
        assert_eq!(page.items[0]["ttl"], AttributeValue::N("1".into()));
        assert_eq!(
            page.items[1]["id"],
            AttributeValue::B(Blob::new(vec![0, 1, 254, 255]))
        );
        assert_eq!(page.items[1]["ttl"], AttributeValue::S("1700000000".into()));
        assert!(matches!(&page.items[2]["ttl"], AttributeValue::L(l) if l.len() == 3));
        assert_eq!(
            page.next,
            Some(key(&[("id", AttributeValue::S("c".into()))]))
        );
        let last = query_page(br#"{"Count":0,"Items":[],"LastEvaluatedKey":{}}"#).unwrap();
        assert!(last.items.is_empty() && last.next.is_none());
        for bad in [
            &b"<html>"[..],
            br#"{"Items":[{"id":{"S":"a","N":"1"}}]}"#,
            br#"{"Items":[{"id":{"X":"a"}}]}"#,
            br#"{"Items":[{"id":{}}]}"#,
            br#"{"Items":[{"id":{"B":"not base64!"}}]}"#,
            br#"{"Items":[{"id":{"NULL":false}}]}"#,
            br#"{"Items":[{"id":{"S":"a"},"id":{"S":"b"}}]}"#,
        ] {
            let err = query_page(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Other, "{err}");
        }
    }

    #[test]
    fn requests_are_signed_for_dynamodb_with_the_session_token() {
        let credentials = aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            Some("session-token".into()),
            None,
            "test",
        );
        let identity: Identity = credentials.into();
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let body = bytes::Bytes::from_static(br#"{"RequestItems":{}}"#);
        let request = signed_request(
            "https://dynamodb.eu-west-1.amazonaws.com/",
            "eu-west-1",
            time,
            BATCH_WRITE,
            body.clone(),
            &identity,
        )
        .unwrap();
        let header = |name: &str| request.headers().get(name).unwrap_or_default().to_owned();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.uri(), "https://dynamodb.eu-west-1.amazonaws.com/");
        assert_eq!(header("x-amz-target"), "DynamoDB_20120810.BatchWriteItem");
        assert_eq!(header("content-type"), "application/x-amz-json-1.0");
        assert_eq!(header("x-amz-security-token"), "session-token");
        assert_eq!(header("x-amz-date"), "20261118T110640Z");
        let authorization = header("authorization");
        assert!(
            authorization.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261118/eu-west-1/dynamodb/aws4_request, \
                 SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-security-token;\
                 x-amz-target, \
                 Signature="
            ),
            "{authorization}"
        );
        assert_eq!(request.body().bytes(), Some(&body[..]));
    }

    proptest! {
        /// Any key survives the trip: written into the request body, read by a JSON parser and the
        /// key dialect.
        #[test]
        fn any_key_round_trips(
            table in "[a-zA-Z0-9_.-]{3,20}",
            keys in proptest::collection::vec(
                proptest::collection::hash_map("[a-z\"\\\\é]{1,8}", key_value(), 1..3), 1..25),
        ) {
            let body = batch_delete_body(&table, &keys.iter().collect::<Vec<_>>()).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let sent: Vec<Key> = value["RequestItems"][&table]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| super::super::keys::key_from_json(&r["DeleteRequest"]["Key"]).unwrap())
                .collect();
            prop_assert_eq!(sent, keys);
        }

        /// Items read from a query answer equal what the key dialect reads from the same JSON.
        #[test]
        fn query_items_read_like_the_key_dialect(
            items in proptest::collection::vec(
                proptest::collection::hash_map("[a-z\"é]{1,6}", any_value(), 1..4), 0..5),
        ) {
            let json = serde_json::json!({
                "Items": items.iter().map(super::super::keys::item_to_json).collect::<Vec<_>>(),
            });
            let page = query_page(json.to_string().as_bytes()).unwrap();
            let expected: Vec<Key> = json["Items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| super::super::keys::item_from_json(i).unwrap())
                .collect();
            prop_assert_eq!(&page.items, &expected);
            prop_assert_eq!(page.items, items);
        }
    }
}
