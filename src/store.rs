//! The store: the only code that talks to DynamoDB.
//!
//! [`Store`] is the one seam the sweep engine uses, written once: a single [`Store::call`] that
//! takes a [`Call`] (query one page of a partition, delete a batch, delete one item on condition,
//! read whole items for expiry events, read or advance the checkpoint) and answers a [`Reply`]. The typed methods of [`StoreExt`] are
//! what the engine calls; a test double or a decorator implements `call` alone and forwards what
//! it does not change.
//!
//! - [`error`]: SDK errors classified once into [`ErrorKind`].
//! - [`clock`]: DynamoDB's own clock, learned from response `Date` headers, which a sweep
//!   instant may never run ahead of.
//! - [`dynamo`]: [`DynamoStore`], the seam over the AWS SDK client: every request goes through
//!   the SDK's own pipeline (signing, retries, timeouts).
//! - [`describe`]: start-up checks — [`open`] reads the table once and checks the index, for
//!   every command.
//! - [`scan`]: the table-wide operations of the adoption tools (parallel Scan pages, conditional
//!   window updates).
//! - [`keys`]: keys and items as `serde_json::Value`s in DynamoDB JSON, through `serde_dynamo`,
//!   for reports, logs, the CLI, progress files and events.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::expiry::{Layout, Timestamp};

pub mod clock;
pub mod describe;
pub mod dynamo;
pub mod error;
pub mod keys;
pub mod scan;

pub use clock::{GuardedClock, ServerClock};
pub use describe::{open, IndexCheck, OpenedTable, TableTarget};
pub use dynamo::{DynamoStore, BATCH_ATTEMPT_TIMEOUT, SDK_MAX_ATTEMPTS};
pub use error::{ErrorKind, StoreError};
pub use keys::{key_from_json, key_to_json};

/// An item's primary key (or a whole item, as returned by a query).
pub type Key = HashMap<String, AttributeValue>;

/// What the sweeper knows about the table after start-up checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// The table's name (or ARN, as configured).
    pub table_name: String,
    /// The GSI to query.
    pub index_name: String,
    /// Primary key attribute names: the partition key, then the sort key if any.
    pub key_attributes: Vec<String>,
    /// Where items keep their ttl and window, the window width and the shard count.
    pub layout: Layout,
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

/// One page of a partition query.
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

/// One request through the seam.
#[derive(Debug)]
pub enum Call<'a> {
    /// One page of items in the index partition `partition` whose ttl is `< now`, starting
    /// after `start`, at most `limit` items.
    QueryExpired {
        /// The table.
        schema: &'a TableSchema,
        /// The window key, or `<window key>#<shard>`.
        partition: &'a str,
        /// The sweep instant.
        now: Timestamp,
        /// Where to continue.
        start: Option<Key>,
        /// Page size; `None` lets DynamoDB fill 1 MB pages.
        limit: Option<i32>,
    },
    /// Deletes up to 25 keys in one `BatchWriteItem`.
    BatchDelete {
        /// The table.
        schema: &'a TableSchema,
        /// The keys, borrowed: the caller keeps them for a retry.
        keys: Vec<&'a Key>,
    },
    /// Deletes `key` only if its ttl is still `ttl` (as read), `< now` and not more than five
    /// years before it.
    DeleteIfExpired {
        /// The table.
        schema: &'a TableSchema,
        /// The key.
        key: Key,
        /// The ttl as read (a Number): an item whose ttl changed since is kept.
        ttl: &'a str,
        /// The sweep instant.
        now: Timestamp,
    },
    /// [`Call::DeleteIfExpired`] that also returns the deleted item (`ReturnValues=ALL_OLD`, no
    /// extra capacity), for expiry events.
    DeleteIfExpiredReturning {
        /// The table.
        schema: &'a TableSchema,
        /// The key.
        key: Key,
        /// The ttl as read (a Number): an item whose ttl changed since is kept.
        ttl: &'a str,
        /// The sweep instant.
        now: Timestamp,
    },
    /// Reads items by key (up to 100), strongly consistent: `BatchGetItem`, for expiry events
    /// that carry the item, and for keys that batch mode must read again.
    GetItems {
        /// The table.
        schema: &'a TableSchema,
        /// The keys.
        keys: Vec<Key>,
        /// `true`: only the key attributes and the ttl (`ProjectionExpression`); `false`: whole
        /// items.
        ttl_only: bool,
    },
    /// Reads checkpoint `id` from `table`.
    ReadCheckpoint {
        /// The checkpoint table.
        table: &'a str,
        /// The checkpoint item's id.
        id: &'a str,
    },
    /// Moves checkpoint `id` forward to `to`, never backwards, stamped `at`.
    AdvanceCheckpoint {
        /// The checkpoint table.
        table: &'a str,
        /// The checkpoint item's id.
        id: &'a str,
        /// The new boundary: a window boundary, whole seconds.
        to: Timestamp,
        /// When (the sweep instant that moved it).
        at: Timestamp,
    },
}

impl Call<'_> {
    /// The DynamoDB operation this call is sent as.
    pub fn operation(&self) -> &'static str {
        match self {
            Call::QueryExpired { .. } => "Query",
            Call::BatchDelete { .. } => "BatchWriteItem",
            Call::DeleteIfExpired { .. } => "DeleteItem",
            Call::DeleteIfExpiredReturning { .. } => "DeleteItem",
            Call::GetItems { .. } => "BatchGetItem",
            Call::ReadCheckpoint { .. } => "GetItem",
            Call::AdvanceCheckpoint { .. } => "UpdateItem",
        }
    }
}

/// The answer to a [`Call`], variant for variant.
#[derive(Debug)]
pub enum Reply {
    /// To [`Call::QueryExpired`].
    Page(Page),
    /// To [`Call::BatchDelete`]: the keys left unprocessed.
    Unprocessed(Vec<Key>),
    /// To [`Call::DeleteIfExpired`].
    Conditional(ConditionalOutcome),
    /// To [`Call::DeleteIfExpiredReturning`]: the outcome and, when deleted, the item as it was.
    ConditionalItem(ConditionalOutcome, Option<Key>),
    /// To [`Call::GetItems`]: the items found, in any order.
    Items(Vec<Key>),
    /// To [`Call::ReadCheckpoint`]: the boundary up to which everything was swept, if any.
    Checkpoint(Option<Timestamp>),
    /// To [`Call::AdvanceCheckpoint`]: `false` if it already was at or past the boundary.
    Advanced(bool),
}

/// The operations the sweep engine needs from DynamoDB. A store lives as long as the tasks a
/// sweep spawns may (`'static`): share one through an `Arc`, or lend a `&'static` one.
pub trait Store: Send + Sync + 'static {
    /// Sends one call and returns its reply (the variant matching the call).
    fn call(&self, call: Call<'_>) -> impl Future<Output = Result<Reply, StoreError>> + Send;

    /// Ends every call sent from now on by `deadline` (a monotonic instant), retries included:
    /// a call still unanswered then answers a retryable timeout. `None` lifts the bound. A store
    /// without time bounds of its own (a test double) may ignore it, as the default does.
    fn end_calls_by(&self, deadline: Option<tokio::time::Instant>) {
        let _ = deadline;
    }
}

impl<S: Store> Store for &'static S {
    fn call(&self, call: Call<'_>) -> impl Future<Output = Result<Reply, StoreError>> + Send {
        (**self).call(call)
    }

    fn end_calls_by(&self, deadline: Option<tokio::time::Instant>) {
        (**self).end_calls_by(deadline);
    }
}

impl<S: Store> Store for std::sync::Arc<S> {
    fn call(&self, call: Call<'_>) -> impl Future<Output = Result<Reply, StoreError>> + Send {
        (**self).call(call)
    }

    fn end_calls_by(&self, deadline: Option<tokio::time::Instant>) {
        (**self).end_calls_by(deadline);
    }
}

/// The typed calls, for every [`Store`].
pub trait StoreExt: Store {
    /// See [`Call::QueryExpired`].
    fn query_expired<'a>(
        &'a self,
        schema: &'a TableSchema,
        partition: &'a str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send + 'a {
        let call = Call::QueryExpired {
            schema,
            partition,
            now,
            start,
            limit,
        };
        async move {
            match self.call(call).await? {
                Reply::Page(page) => Ok(page),
                other => Err(mismatch("Query", other)),
            }
        }
    }

    /// See [`Call::BatchDelete`]; returns the keys left unprocessed.
    fn batch_delete<'a>(
        &'a self,
        schema: &'a TableSchema,
        keys: Vec<&'a Key>,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send + 'a {
        let call = Call::BatchDelete { schema, keys };
        async move {
            match self.call(call).await? {
                Reply::Unprocessed(keys) => Ok(keys),
                other => Err(mismatch("BatchWriteItem", other)),
            }
        }
    }

    /// See [`Call::DeleteIfExpired`].
    fn delete_if_expired<'a>(
        &'a self,
        schema: &'a TableSchema,
        key: Key,
        ttl: &'a str,
        now: Timestamp,
    ) -> impl Future<Output = Result<ConditionalOutcome, StoreError>> + Send + 'a {
        let call = Call::DeleteIfExpired {
            schema,
            key,
            ttl,
            now,
        };
        async move {
            match self.call(call).await? {
                Reply::Conditional(outcome) => Ok(outcome),
                other => Err(mismatch("DeleteItem", other)),
            }
        }
    }

    /// See [`Call::DeleteIfExpiredReturning`].
    fn delete_if_expired_returning<'a>(
        &'a self,
        schema: &'a TableSchema,
        key: Key,
        ttl: &'a str,
        now: Timestamp,
    ) -> impl Future<Output = Result<(ConditionalOutcome, Option<Key>), StoreError>> + Send + 'a
    {
        let call = Call::DeleteIfExpiredReturning {
            schema,
            key,
            ttl,
            now,
        };
        async move {
            match self.call(call).await? {
                Reply::ConditionalItem(outcome, item) => Ok((outcome, item)),
                other => Err(mismatch("DeleteItem", other)),
            }
        }
    }

    /// See [`Call::GetItems`]: whole items, or (`ttl_only`) their keys and ttls.
    fn get_items<'a>(
        &'a self,
        schema: &'a TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> impl Future<Output = Result<Vec<Key>, StoreError>> + Send + 'a {
        let call = Call::GetItems {
            schema,
            keys,
            ttl_only,
        };
        async move {
            match self.call(call).await? {
                Reply::Items(items) => Ok(items),
                other => Err(mismatch("BatchGetItem", other)),
            }
        }
    }

    /// See [`Call::ReadCheckpoint`].
    fn read_checkpoint<'a>(
        &'a self,
        table: &'a str,
        id: &'a str,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send + 'a {
        let call = Call::ReadCheckpoint { table, id };
        async move {
            match self.call(call).await? {
                Reply::Checkpoint(at) => Ok(at),
                other => Err(mismatch("GetItem", other)),
            }
        }
    }

    /// See [`Call::AdvanceCheckpoint`].
    fn advance_checkpoint<'a>(
        &'a self,
        table: &'a str,
        id: &'a str,
        to: Timestamp,
        at: Timestamp,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send + 'a {
        let call = Call::AdvanceCheckpoint { table, id, to, at };
        async move {
            match self.call(call).await? {
                Reply::Advanced(moved) => Ok(moved),
                other => Err(mismatch("UpdateItem", other)),
            }
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// A store answered a call with the wrong kind of reply: a bug in that store.
fn mismatch(operation: &'static str, reply: Reply) -> StoreError {
    StoreError::new(
        ErrorKind::Other,
        operation,
        format!("the store answered {reply:?} to {operation}"),
    )
}
