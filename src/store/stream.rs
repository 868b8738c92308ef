//! The table's DynamoDB stream, read by the daemon's stream follower (`ttl-sweeper run
//! --follow-stream`): which stream the table has and with what view, its shards, iterators and
//! records. Records come back as the Lambda event's [`EventRecord`], so the stream indexer
//! ([`crate::index`]) handles the daemon's records and an event source mapping's alike.

use aws_lambda_events::dynamodb::{EventRecord, StreamRecord};
use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use aws_sdk_dynamodbstreams::config::http::HttpResponse;
use aws_sdk_dynamodbstreams::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use aws_sdk_dynamodbstreams::Client;

use std::future::Future;

use super::{DynamoStore, ErrorKind, Store, StoreError};

/// The table's stream, as `DescribeTable` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStream {
    /// `LatestStreamArn`.
    pub arn: String,
    /// `NEW_IMAGE`, `NEW_AND_OLD_IMAGES`, `KEYS_ONLY` or `OLD_IMAGE`.
    pub view: String,
}

impl TableStream {
    /// True when the records carry the item as written (`NEW_IMAGE`, `NEW_AND_OLD_IMAGES`).
    pub fn has_new_image(&self) -> bool {
        self.view == StreamViewType::NewImage.as_str()
            || self.view == StreamViewType::NewAndOldImages.as_str()
    }
}

/// One shard of a stream, as `DescribeStream` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// `ShardId`.
    pub id: String,
    /// The shard it was split from (read first), if any.
    pub parent: Option<String>,
}

/// Where to start reading a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// Its oldest record still kept (streams keep 24 hours).
    Oldest,
    /// Just after this sequence number.
    After(String),
}

/// One `GetRecords` answer.
#[derive(Debug, Default)]
pub struct Records {
    /// The records, in the shard's order, as a Lambda event's records.
    pub records: Vec<EventRecord>,
    /// The iterator for the next call; `None` once a closed shard is read to its end.
    pub next: Option<String>,
}

/// Why a read of a shard failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The shard's records from the requested position were trimmed (older than 24 hours), or the
    /// shard is gone.
    #[error("the records asked for were trimmed from the stream (older than 24 hours)")]
    Trimmed,
    /// The iterator is older than 15 minutes: ask for a new one.
    #[error("the shard iterator expired")]
    ExpiredIterator,
    /// Anything else, classified as a table call's would be.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReadError {
    fn from_sdk<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let e = StoreError::from_sdk(operation, err);
        match e.code.as_deref() {
            Some("TrimmedDataAccessException") => ReadError::Trimmed,
            Some("ExpiredIteratorException") => ReadError::ExpiredIterator,
            _ => ReadError::Store(e),
        }
    }
}

impl StreamPositions for DynamoStore {
    /// The stream of table `table`, if one is enabled (one `DescribeTable`).
    async fn table_stream(&self, table: &str) -> Result<Option<TableStream>, StoreError> {
        let missing = || format!("table {table:?} does not exist in this account and region");
        let description = self.describe_table(table, missing).await?;
        let enabled = description
            .stream_specification()
            .filter(|s| s.stream_enabled());
        let stream = enabled.zip(description.latest_stream_arn());
        Ok(stream.map(|(spec, arn)| TableStream {
            arn: arn.to_owned(),
            view: spec
                .stream_view_type()
                .map_or("", |v| v.as_str())
                .to_owned(),
        }))
    }

    async fn read_stream_position(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        let item = self.checkpoint_item(table, id).await?;
        Ok(item.and_then(|i| i.get(POSITION_ATTRIBUTE)?.as_s().ok().cloned()))
    }

    async fn save_stream_position(
        &self,
        table: &str,
        id: &str,
        position: String,
        at: String,
    ) -> Result<(), StoreError> {
        self.client()
            .put_item()
            .table_name(table)
            .item("id", AttributeValue::S(id.to_owned()))
            .item(POSITION_ATTRIBUTE, AttributeValue::S(position))
            .item("updatedAt", AttributeValue::S(at))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("PutItem", e))?;
        Ok(())
    }
}

/// The reads of a table's stream the follower makes: its shards, an iterator on one, and the
/// records from an iterator. [`StreamClient`] reads DynamoDB Streams; the tests read a stream of
/// their own.
pub trait StreamRead: Send + Sync {
    /// Every shard of stream `arn` still listed.
    fn shards(&self, arn: &str) -> impl Future<Output = Result<Vec<Shard>, StoreError>> + Send;

    /// An iterator on shard `shard` of stream `arn`, from `from`.
    fn iterator(
        &self,
        arn: &str,
        shard: &str,
        from: &From,
    ) -> impl Future<Output = Result<String, ReadError>> + Send;

    /// Up to 1,000 records (1 MB) from `iterator`.
    fn records(&self, iterator: &str) -> impl Future<Output = Result<Records, ReadError>> + Send;
}

/// What the follower reads and writes of the tables: the table's stream, and its position saved
/// in the checkpoint table.
pub trait StreamPositions: Store {
    /// The stream of `table`, if it has one enabled.
    fn table_stream(
        &self,
        table: &str,
    ) -> impl Future<Output = Result<Option<TableStream>, StoreError>> + Send;

    /// Reads the stream position saved as item `id` of checkpoint table `table`, if any.
    fn read_stream_position(
        &self,
        table: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Saves `position` as item `id` of checkpoint table `table`, stamped `at` (RFC 3339).
    fn save_stream_position(
        &self,
        table: &str,
        id: &str,
        position: String,
        at: String,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A DynamoDB Streams client, built from the same AWS configuration chain as the table's.
#[derive(Debug, Clone)]
pub struct StreamClient {
    client: Client,
}

impl StreamClient {
    /// A client from the standard AWS configuration chain, with the timeouts of
    /// [`DynamoStore::config_loader`].
    pub async fn from_env() -> Self {
        StreamClient {
            client: Client::new(&DynamoStore::config_loader().load().await),
        }
    }
}

impl StreamRead for StreamClient {
    /// Every shard of stream `arn` still listed (`DescribeStream`, all pages).
    async fn shards(&self, arn: &str) -> Result<Vec<Shard>, StoreError> {
        const OP: &str = "DescribeStream";
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .client
                .describe_stream()
                .stream_arn(arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .await
                .map_err(|e| StoreError::from_sdk(OP, e))?;
            let no_stream = || StoreError::new(ErrorKind::Other, OP, "response has no stream");
            let description = out.stream_description.ok_or_else(no_stream)?;
            shards.extend(description.shards().iter().filter_map(|s| {
                Some(Shard {
                    id: s.shard_id()?.to_owned(),
                    parent: s.parent_shard_id().map(str::to_owned),
                })
            }));
            match description.last_evaluated_shard_id {
                Some(last) if !last.is_empty() => start = Some(last),
                _ => return Ok(shards),
            }
        }
    }

    async fn iterator(&self, arn: &str, shard: &str, from: &From) -> Result<String, ReadError> {
        const OP: &str = "GetShardIterator";
        let request = self
            .client
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(shard);
        let request = match from {
            From::Oldest => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            From::After(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(sequence),
        };
        let out = request.send().await.map_err(|e| {
            match ReadError::from_sdk(OP, e) {
                // A shard no longer in the stream (trimmed away whole).
                ReadError::Store(s) if s.kind == ErrorKind::NotFound => ReadError::Trimmed,
                other => other,
            }
        })?;
        let no_iterator = || StoreError::new(ErrorKind::Other, OP, "response has no iterator");
        Ok(out.shard_iterator.ok_or_else(no_iterator)?)
    }

    async fn records(&self, iterator: &str) -> Result<Records, ReadError> {
        let out = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(1000)
            .send()
            .await
            .map_err(|e| ReadError::from_sdk("GetRecords", e))?;
        let records = out.records.unwrap_or_default();
        Ok(Records {
            records: records.into_iter().map(event_record).collect(),
            next: out.next_shard_iterator,
        })
    }
}

/// A stream record as the Lambda event carries it.
fn event_record(record: Record) -> EventRecord {
    let mut out = EventRecord::default();
    out.event_id = record.event_id.unwrap_or_default();
    out.event_name = record
        .event_name
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    out.event_source = record.event_source;
    out.event_version = record.event_version;
    out.aws_region = record.aws_region.unwrap_or_default();
    if let Some(change) = record.dynamodb {
        let mut c = StreamRecord::default();
        c.keys = change.keys.unwrap_or_default().into();
        c.new_image = change.new_image.unwrap_or_default().into();
        c.old_image = change.old_image.unwrap_or_default().into();
        c.sequence_number = change.sequence_number;
        if let Some(at) = change.approximate_creation_date_time {
            let at = chrono::DateTime::from_timestamp(at.secs(), at.subsec_nanos());
            c.approximate_creation_date_time = at.unwrap_or_default();
        }
        c.size_bytes = change.size_bytes.unwrap_or(0);
        out.change = c;
    }
    out
}

/// Attribute of the checkpoint table's position item that holds the follower's position (JSON).
pub const POSITION_ATTRIBUTE: &str = "streamPosition";
