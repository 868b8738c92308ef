//! An event source mapping emulated over DynamoDB Local's real stream, feeding the Lambda binary
//! under the local Runtime API ([`RuntimeApi`]): the tests of `tests/stream_esm.rs`, and the
//! Lambda path of the benchmark's stream part (`benches/sweeper/stream/lambda.rs`).
//!
//! [`Esm`] emulates one mapping on one shard as the AWS Lambda Developer Guide documents it for
//! `ReportBatchItemFailures`, `BisectBatchOnFunctionError` and `MaximumRetryAttempts` with an
//! on-failure destination:
//! - batches of at most `batch_size` records, in the shard's order, from the checkpoint;
//! - an answer with an empty or null `batchItemFailures` (or no answer body): the whole batch
//!   succeeded, the checkpoint moves past it;
//! - an answer naming records: the checkpoint moves to just before the one with the lowest sequence
//!   number and, with bisection on, the batch is split there and only the records from it on are
//!   delivered again; an identifier that is empty, null, under another key or not a record of the
//!   batch fails the batch as a whole;
//! - a function error (or a timeout): the batch is split in two and each half delivered (splitting
//!   does not count as a retry); a single record is retried, and once it has failed
//!   [`MAX_RETRIES`] retries it goes to the on-failure destination (here a `Vec`) and the
//!   checkpoint moves past it.
//!
//! [`Stream`] reads the table's stream with `aws-sdk-dynamodbstreams` (`DescribeStream`,
//! `GetShardIterator` `TRIM_HORIZON`, `GetRecords`) and turns each record into the Lambda event's
//! JSON. Neither polls on its own: the caller reads the stream and hands the records to
//! [`Esm::drain`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodbstreams as streams;
use serde_json::{json, Value};

use super::endpoint;
use super::runtime_api::{Invocation, Outcome, RuntimeApi};

/// `MaximumRetryAttempts` of the emulated mapping.
pub const MAX_RETRIES: u32 = 2;

// ------------------------------------------------------------------------------------- the stream

/// A DynamoDB Streams client for the server at `endpoint`.
fn streams_client(endpoint: &str) -> streams::Client {
    use streams::config::{BehaviorVersion, Credentials, Region};
    let config = streams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
        .build();
    streams::Client::from_conf(config)
}

/// The table's stream, read from its oldest record: every record read so far, as the Lambda
/// event carries it.
pub struct Stream {
    client: streams::Client,
    arn: String,
    iterator: Option<String>,
    /// Every record read so far, in the shard's order.
    pub records: Vec<Value>,
}

impl Stream {
    /// The stream of `table` on the test server ([`endpoint`]).
    pub async fn of(client: &Client, table: &str) -> Stream {
        Stream::at(&endpoint(), client, table).await
    }

    /// The stream of `table` on the server at `endpoint`, which `client` reaches too.
    pub async fn at(endpoint: &str, client: &Client, table: &str) -> Stream {
        let described = client.describe_table().table_name(table).send().await;
        let table = described.unwrap().table.unwrap();
        let arn = table.latest_stream_arn.expect("the table has a stream");
        Stream {
            client: streams_client(endpoint),
            arn,
            iterator: None,
            records: Vec::new(),
        }
    }

    /// Reads on until the shard has given at least `n` records (fails after 15 s): the records.
    pub async fn read_until(&mut self, n: usize) -> Vec<Value> {
        let started = Instant::now();
        while self.records.len() < n {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "the stream gave {} records, not {n}:\n{:#?}",
                self.records.len(),
                self.records
            );
            if self.read().await == 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        self.records.clone()
    }

    /// One `GetRecords` (once the stream lists its shard): how many records it gave.
    pub async fn read(&mut self) -> usize {
        if self.iterator.is_none() {
            self.iterator = self.open().await;
        }
        let Some(iterator) = self.iterator.clone() else {
            return 0;
        };
        let out = self.client.get_records().shard_iterator(iterator);
        let out = out.send().await.expect("GetRecords");
        self.iterator = out.next_shard_iterator;
        let page = out.records.unwrap_or_default();
        let arn = &self.arn;
        self.records
            .extend(page.iter().map(|r| lambda_record(r, arn)));
        page.len()
    }

    /// An iterator at the oldest record of the stream's shard, once the stream lists one.
    async fn open(&self) -> Option<String> {
        let described = self.client.describe_stream().stream_arn(&self.arn).send();
        let description = described
            .await
            .expect("DescribeStream")
            .stream_description?;
        let shards = description.shards();
        assert!(
            shards.len() <= 1,
            "one shard expected of DynamoDB Local: {shards:#?}"
        );
        let shard = shards.first()?.shard_id()?;
        let out = self
            .client
            .get_shard_iterator()
            .stream_arn(&self.arn)
            .shard_id(shard)
            .shard_iterator_type(streams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("GetShardIterator");
        out.shard_iterator
    }
}

/// `record` of stream `arn` as the Lambda event carries it (DynamoDB JSON images).
fn lambda_record(record: &streams::types::Record, arn: &str) -> Value {
    let change = record.dynamodb().expect("a stream record");
    let image = |i: &HashMap<String, streams::types::AttributeValue>| {
        serde_json::to_value(serde_dynamo::Item::from(i.clone())).unwrap()
    };
    let mut dynamodb = json!({
        "Keys": image(change.keys().expect("the record's keys")),
        "SequenceNumber": change.sequence_number().expect("a sequence number"),
        "SizeBytes": change.size_bytes(),
        "StreamViewType": change.stream_view_type().map(|v| v.as_str()),
    });
    if let Some(at) = change.approximate_creation_date_time() {
        dynamodb["ApproximateCreationDateTime"] = json!(at.secs());
    }
    for (field, i) in [
        ("NewImage", change.new_image()),
        ("OldImage", change.old_image()),
    ] {
        if let Some(i) = i {
            dynamodb[field] = image(i);
        }
    }
    json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(|n| n.as_str()),
        "eventVersion": record.event_version(),
        "eventSource": record.event_source().unwrap_or("aws:dynamodb"),
        "awsRegion": record.aws_region().unwrap_or("us-east-1"),
        "eventSourceARN": arn,
        "dynamodb": dynamodb,
    })
}

/// The record's sequence number.
pub fn sequence(record: &Value) -> &str {
    record["dynamodb"]["SequenceNumber"].as_str().unwrap()
}

/// The `id` of the record's item.
pub fn item(record: &Value) -> &str {
    record["dynamodb"]["Keys"]["id"]["S"].as_str().unwrap()
}

/// A sequence number as a number (up to 40 digits: compared as decimal strings).
fn numeric(sequence: &str) -> (usize, &str) {
    let digits = sequence.trim_start_matches('0');
    (digits.len(), digits)
}

// ------------------------------------------------------------------------------ the event source

/// What the mapping made of one invocation's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A partial batch response naming these records (none: the batch succeeded).
    Failures(Vec<String>),
    /// The function failed (an error, a timeout): the batch failed as a whole.
    Error(String),
    /// A response the mapping cannot read as a partial batch response: the batch failed as a whole.
    Invalid(String),
}

/// One invocation by the mapping.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The sequence numbers of the batch's records.
    pub sequences: Vec<String>,
    pub invocation: Invocation,
    pub answer: Answer,
}

impl Delivery {
    pub fn failed(&self) -> bool {
        matches!(self.answer, Answer::Error(_) | Answer::Invalid(_))
    }
}

/// An event source mapping on one shard: see the [module](self) description.
pub struct Esm<'a> {
    api: &'a RuntimeApi,
    /// Records per batch, at most (`BatchSize`).
    batch_size: usize,
    /// Records of the shard delivered or discarded: the next batch starts here.
    pub checkpoint: usize,
    /// Records discarded after their retries: the on-failure destination.
    pub destination: Vec<Value>,
    pub deliveries: Vec<Delivery>,
}

impl<'a> Esm<'a> {
    /// A mapping invoking `api` with batches of at most `batch_size` records, from the shard's
    /// first record.
    pub fn new(api: &'a RuntimeApi, batch_size: usize) -> Self {
        assert!(batch_size > 0, "a batch holds at least one record");
        Esm {
            api,
            batch_size,
            checkpoint: 0,
            destination: Vec::new(),
            deliveries: Vec::new(),
        }
    }

    /// Delivers `shard`'s records from the checkpoint to its end.
    pub async fn drain(&mut self, shard: &[Value]) {
        while self.checkpoint < shard.len() {
            let end = shard.len().min(self.checkpoint + self.batch_size);
            self.deliver(shard[self.checkpoint..end].to_vec()).await;
        }
    }

    /// Delivers one batch until each of its records has been checkpointed or discarded.
    async fn deliver(&mut self, batch: Vec<Value>) {
        let mut pending = VecDeque::from([(batch, 0u32)]);
        while let Some((batch, retries)) = pending.pop_front() {
            let answer = self.invoke(&batch).await;
            let failed_at = match &answer {
                Answer::Failures(named) if named.is_empty() => None,
                Answer::Failures(named) => {
                    let lowest = named.iter().min_by_key(|s| numeric(s)).unwrap();
                    Some(batch.iter().position(|r| sequence(r) == lowest).unwrap())
                }
                Answer::Error(_) | Answer::Invalid(_) => Some(0),
            };
            let Some(at) = failed_at else {
                self.checkpoint += batch.len();
                continue;
            };
            // Checkpointed up to the lowest failed record.
            self.checkpoint += at;
            let rest = batch[at..].to_vec();
            let whole = matches!(answer, Answer::Error(_) | Answer::Invalid(_));
            if whole && rest.len() > 1 {
                // Bisected: each half on its own, the retry count as it was.
                let half = rest.len() / 2;
                pending.push_front((rest[half..].to_vec(), retries));
                pending.push_front((rest[..half].to_vec(), retries));
            } else if retries < MAX_RETRIES {
                pending.push_front((rest, retries + 1));
            } else {
                self.checkpoint += rest.len();
                self.destination.extend(rest);
            }
        }
    }

    /// Invokes the function with `batch` and reads its answer.
    async fn invoke(&mut self, batch: &[Value]) -> Answer {
        let invocation = self.api.invoke(&json!({ "Records": batch })).await;
        let sequences: Vec<String> = batch.iter().map(|r| sequence(r).to_owned()).collect();
        let answer = match &invocation.outcome {
            Outcome::Succeeded(response) => partial_batch_response(response, &sequences),
            Outcome::Failed(error) => Answer::Error(error.clone()),
            other => Answer::Error(format!("{other:?}")),
        };
        self.deliveries.push(Delivery {
            sequences,
            invocation,
            answer: answer.clone(),
        });
        answer
    }

    /// Every delivery, one line each, and the function's log: for failure messages.
    pub fn context(&self) -> String {
        format!("{}\n{}", self.describe(), self.api.log_text())
    }

    /// Every delivery, one line each.
    pub fn describe(&self) -> String {
        let lines = self.deliveries.iter().map(|d| {
            format!(
                "  {} records {}..{}: {:?}",
                d.sequences.len(),
                d.sequences.first().map_or("", String::as_str),
                d.sequences.last().map_or("", String::as_str),
                d.answer
            )
        });
        lines.collect::<Vec<_>>().join("\n")
    }
}

/// A response read as Lambda reads a partial batch response of a stream.
fn partial_batch_response(response: &Value, sequences: &[String]) -> Answer {
    let invalid = || Answer::Invalid(response.to_string());
    let failures = match response {
        Value::Null => return Answer::Failures(Vec::new()),
        Value::Object(o) if o.is_empty() => return Answer::Failures(Vec::new()),
        Value::Object(o) => match o.get("batchItemFailures") {
            None | Some(Value::Null) => return Answer::Failures(Vec::new()),
            Some(Value::Array(failures)) => failures,
            Some(_) => return invalid(),
        },
        _ => return invalid(),
    };
    let mut named = Vec::new();
    for failure in failures {
        match failure.get("itemIdentifier").and_then(Value::as_str) {
            Some(id) if sequences.iter().any(|s| s == id) => named.push(id.to_owned()),
            _ => return invalid(),
        }
    }
    Answer::Failures(named)
}
