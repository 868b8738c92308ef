//! The tests' in-memory DynamoDB stream ([`StreamRead`]): shards with their parents and records,
//! iterators that move through them, and what a test scripts: records trimmed from a shard's
//! start, and iterators that expire. It records each read, to tell the order shards were read in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lambda_events::dynamodb::EventRecord;
use ttl_sweeper::store::stream::{From, ReadError, Records, Shard, StreamRead};
use ttl_sweeper::store::StoreError;

/// One shard: its parent, its records in order, and whether it is closed (read to its end, it
/// answers no next iterator).
struct MemShard {
    id: String,
    parent: Option<String>,
    records: Vec<EventRecord>,
    closed: bool,
    /// Records before this index are trimmed away.
    trimmed: usize,
}

#[derive(Default)]
struct State {
    shards: Vec<MemShard>,
    /// Each iterator handed out: its shard and the index of the next record.
    iterators: HashMap<String, (String, usize)>,
    issued: usize,
    /// The next reads of records that answer an expired iterator.
    expire: usize,
    /// Each read that answered records: its shard and the sequence numbers.
    reads: Vec<(String, Vec<String>)>,
}

impl State {
    fn shard(&mut self, id: &str) -> Option<&mut MemShard> {
        self.shards.iter_mut().find(|s| s.id == id)
    }

    fn issue(&mut self, shard: &str, at: usize) -> String {
        self.issued += 1;
        let id = format!("iterator-{}", self.issued);
        self.iterators.insert(id.clone(), (shard.to_owned(), at));
        id
    }
}

/// A stream shared by the test and the follower reading it.
#[derive(Clone, Default)]
pub struct MemStream(Arc<Mutex<State>>);

/// A record's sequence number.
fn sequence(record: &EventRecord) -> String {
    record.change.sequence_number.clone().unwrap_or_default()
}

impl MemStream {
    /// Adds shard `id`, open, child of `parent`.
    pub fn shard(self, id: &str, parent: Option<&str>) -> Self {
        self.0.lock().unwrap().shards.push(MemShard {
            id: id.to_owned(),
            parent: parent.map(str::to_owned),
            records: Vec::new(),
            closed: false,
            trimmed: 0,
        });
        self
    }

    /// Appends `records` to shard `id`.
    pub fn push(&self, id: &str, records: impl IntoIterator<Item = EventRecord>) {
        let mut state = self.0.lock().unwrap();
        state.shard(id).expect("a shard").records.extend(records);
    }

    /// Closes shard `id`: read to its end, it answers no next iterator.
    pub fn close(&self, id: &str) {
        self.0.lock().unwrap().shard(id).expect("a shard").closed = true;
    }

    /// Trims shard `id`'s records before the `count`-th.
    pub fn trim(&self, id: &str, count: usize) {
        self.0.lock().unwrap().shard(id).expect("a shard").trimmed = count;
    }

    /// The next `reads` reads of records answer that the iterator expired.
    pub fn expire_next(&self, reads: usize) {
        self.0.lock().unwrap().expire = reads;
    }

    /// Each read that answered records: its shard and their sequence numbers, in order.
    pub fn reads(&self) -> Vec<(String, Vec<String>)> {
        self.0.lock().unwrap().reads.clone()
    }
}

impl StreamRead for MemStream {
    async fn shards(&self, _: &str) -> Result<Vec<Shard>, StoreError> {
        let state = self.0.lock().unwrap();
        let shard = |s: &MemShard| Shard {
            id: s.id.clone(),
            parent: s.parent.clone(),
        };
        Ok(state.shards.iter().map(shard).collect())
    }

    async fn iterator(&self, _: &str, id: &str, from: &From) -> Result<String, ReadError> {
        let mut state = self.0.lock().unwrap();
        let shard = state.shard(id).ok_or(ReadError::Trimmed)?;
        let at = match from {
            From::Oldest => shard.trimmed,
            From::After(after) => {
                let found = shard.records.iter().position(|r| sequence(r) == *after);
                match found {
                    Some(i) if i + 1 >= shard.trimmed => i + 1,
                    _ => return Err(ReadError::Trimmed),
                }
            }
        };
        Ok(state.issue(id, at))
    }

    async fn records(&self, iterator: &str) -> Result<Records, ReadError> {
        let mut state = self.0.lock().unwrap();
        if state.expire > 0 {
            state.expire -= 1;
            return Err(ReadError::ExpiredIterator);
        }
        let (id, at) = state
            .iterators
            .remove(iterator)
            .ok_or(ReadError::ExpiredIterator)?;
        let shard = state.shard(&id).expect("a shard");
        if at < shard.trimmed {
            return Err(ReadError::Trimmed);
        }
        let records: Vec<EventRecord> = shard.records.iter().skip(at).take(1000).cloned().collect();
        let end = at + records.len();
        let done = shard.closed && end == shard.records.len();
        if !records.is_empty() {
            let sequences = records.iter().map(sequence).collect();
            state.reads.push((id.clone(), sequences));
        }
        let next = (!done).then(|| state.issue(&id, end));
        Ok(Records { records, next })
    }
}

/// A stream record of the item `id` written with `ttl`, created at `created` (epoch seconds),
/// with sequence number `sequence`.
pub fn insert_record(sequence: u64, id: &str, ttl: i64, created: i64) -> EventRecord {
    let image = serde_json::json!({ "id": { "S": id }, "ttl": { "N": ttl.to_string() } });
    serde_json::from_value(serde_json::json!({
        "eventID": format!("e{sequence}"), "eventName": "INSERT", "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": { "id": { "S": id } }, "NewImage": image,
            "SequenceNumber": format!("{sequence:021}"), "SizeBytes": 64,
            "StreamViewType": "NEW_IMAGE", "ApproximateCreationDateTime": created
        }
    }))
    .unwrap()
}
