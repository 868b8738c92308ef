//! How [`DynamoStore`]'s clients are built: the caller's, with the interceptor that learns
//! DynamoDB's clock, and the delete clients without SDK retries; the timeouts of all of them.

use std::sync::Arc;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::DynamoStore;
use crate::store::clock::{DateRecorder, ServerClock};
use crate::store::entries;

/// TCP/TLS connect timeout of the client built by [`DynamoStore::from_env`].
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Timeout of one attempt of one request.
pub const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Timeout of one operation, all SDK retries included.
pub const OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Attempts the SDK makes for non-delete requests (1 + 2 retries) unless the configuration chain
/// says otherwise (`AWS_MAX_ATTEMPTS`): the SDK's default.
pub const SDK_MAX_ATTEMPTS: u32 = 3;

/// Timeout of one `BatchWriteItem` attempt (or the client's, if shorter). A batch delete cannot
/// check the ttl, and a request that times out may still be applied later; the shorter its
/// attempt timeout, the shorter the time in which a key read from the index can be deleted
/// unconditionally (see [`crate::engine::BATCH_MAX_READ_AGE`]). 25 deletes take milliseconds.
pub const BATCH_ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The clients the delete requests go through, (conditional, batch): the caller's client with the
/// SDK's own retry loop turned off, built once (a per-request config override would rebuild the
/// request's runtime components on every call). Deletes are retried by the sweep engine itself,
/// with backoff and jitter, so attempts do not multiply. Batch deletes also get
/// [`BATCH_ATTEMPT_TIMEOUT`]. Both share the caller's connection pool, credentials and
/// interceptors.
fn delete_clients(client: &Client) -> (Client, Client) {
    let base = client.config().timeout_config();
    let attempt = base
        .and_then(|t| t.operation_attempt_timeout())
        .map_or(BATCH_ATTEMPT_TIMEOUT, |t| t.min(BATCH_ATTEMPT_TIMEOUT));
    let mut timeouts = TimeoutConfig::builder()
        .operation_attempt_timeout(attempt)
        .operation_timeout(attempt);
    if let Some(connect) = base.and_then(|t| t.connect_timeout()) {
        timeouts = timeouts.connect_timeout(connect);
    }
    let no_retries = client
        .config()
        .to_builder()
        .retry_config(RetryConfig::disabled());
    let batch = Client::from_conf(no_retries.clone().timeout_config(timeouts.build()).build());
    (Client::from_conf(no_retries.build()), batch)
}

impl DynamoStore {
    /// Wraps a client built by the caller, adding the interceptor that learns DynamoDB's clock
    /// from its responses (see [`DynamoStore::server_clock`]).
    pub fn new(client: Client) -> Self {
        let server_clock = Arc::new(ServerClock::default());
        let config = client
            .config()
            .to_builder()
            .interceptor(DateRecorder(server_clock.clone()));
        let client = Client::from_conf(config.build());
        let (conditional_deletes, batch_deletes) = delete_clients(&client);
        DynamoStore {
            client,
            conditional_deletes,
            batch_deletes,
            server_clock,
            marks: Arc::default(),
        }
    }

    /// DynamoDB's clock as its responses tell it: entry points hold their clock readings to it.
    pub fn server_clock(&self) -> &Arc<ServerClock> {
        &self.server_clock
    }

    /// Builds a client from the standard AWS configuration chain (`AWS_REGION`, `AWS_ENDPOINT_URL`,
    /// credentials, `AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE`, the profile, ...) with the timeouts
    /// [`CONNECT_TIMEOUT`], [`ATTEMPT_TIMEOUT`] and [`OPERATION_TIMEOUT`], and the chain's retries
    /// ([`SDK_MAX_ATTEMPTS`] unless it sets others) for all but deletes, which the engine retries
    /// itself: `docs/design.md`, "Timeouts and retries".
    pub async fn from_env() -> Self {
        DynamoStore::new(Client::new(&Self::config_loader().load().await))
    }

    /// The AWS configuration chain with the timeouts of [`DynamoStore::from_env`], for a caller
    /// that adds to it (an endpoint, say) before loading.
    pub fn config_loader() -> aws_config::ConfigLoader {
        use aws_config::timeout::TimeoutConfig;
        aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A strongly consistent `Query` of the expiry index table `index_table`, with `#w` naming
    /// its partition key and `:w` the partition `partition` (a window, or one of the sweeper's
    /// own); the caller adds the key condition and what else it reads.
    pub(in crate::store) fn index_query(
        &self,
        index_table: &str,
        partition: &str,
    ) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(index_table)
            .consistent_read(true)
            .expression_attribute_names("#w", entries::WINDOW)
            .expression_attribute_values(":w", AttributeValue::S(partition.to_owned()))
    }
}
