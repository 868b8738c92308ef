//! Batch mode in tick mode: the keys of the next tick, read from the index and confirmed by the
//! table shortly before the tick, so that the tick's deletes leave one query after the tick, not
//! a query and a read (`docs/design.md`, "Sub-second precision (tick mode)", confirmed ahead).
//! Nothing is deleted ahead. A key the tick lists with the ttl confirmed is dated by that read
//! ([`super::delete::Confirmed`]), by the wall clock too (the monotonic one stops while the
//! process is frozen, and a confirmation may outlive its tick): the bound of an unconditional
//! delete (`BATCH_MAX_READ_AGE`) runs from it, its age the greater of the two clocks'.

use std::time::Duration;

use super::delete::{Dated, Expired};
use super::pace::read_ahead;
use super::partition::check_item;
use super::retry::Stop;
use super::sweep::Sweeper;
use super::DeleteMode;
use crate::expiry::window::{partition_key, Window};
use crate::expiry::Timestamp;
use crate::store::{Key, Store};

/// How long before a tick its keys are read ahead.
pub const CONFIRM_AHEAD: Duration = Duration::from_millis(300);

/// `BatchGetItem` takes at most this many keys.
const GET_BATCH: usize = 100;

impl<S: Store> Sweeper<S> {
    /// Batch mode: reads ahead the keys a tick at `at` will find in `windows` (the shards in
    /// range), and confirms them by the table (module docs). At most the read-ahead budget of
    /// keys; stops at `stop`. Does nothing in conditional mode, where each delete checks the table.
    pub async fn confirm_ahead(&self, at: Timestamp, windows: &[Window], stop: &Stop) {
        let shared = &self.shared;
        let options = &shared.options;
        if options.delete_mode != DeleteMode::Batch || stop.reached() || !self.leading() {
            return;
        }
        // Dated on the wall clock too (module docs); without one, by the tick's instant, which
        // the sweep that takes them compares with its own.
        let dated = || Dated::now(self.raw_wall().unwrap_or(at));
        let max_age = options.batch_max_read_age;
        shared.confirmed.forget_older(dated(), max_age);
        let most = read_ahead(options);
        let (store, schema) = (&shared.store, &shared.schema);
        let shards = schema.layout.window_shards.max(1);
        // By key token: a key listed twice (its ttl rewritten between two pages) is read once,
        // since DynamoDB refuses a `BatchGetItem` that names a key twice.
        let mut listed: Vec<(String, Expired)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        'partitions: for window in windows {
            for shard in self.shard_range().shards() {
                let partition = partition_key(*window, shard, shards);
                let mut start = None;
                loop {
                    if listed.len() >= most {
                        break 'partitions;
                    }
                    let left = i32::try_from(most - listed.len()).unwrap_or(i32::MAX);
                    let query =
                        store.query_expired(schema, &partition, at, None, start, Some(left));
                    let Ok(page) = stop.bound("Query", query).await else {
                        // Nothing lost: the tick reads the table itself for what is not here.
                        break 'partitions;
                    };
                    let items = page.items.into_iter();
                    for e in items.filter_map(|item| check_item(schema, item, at)) {
                        match schema.key_token(&e.key) {
                            Some(token) if seen.insert(token.clone()) => listed.push((token, e)),
                            _ => {}
                        }
                    }
                    let Some(next) = page.next else { break };
                    start = Some(next);
                }
            }
        }
        listed.truncate(most);
        for keys in listed.chunks(GET_BATCH) {
            let wanted: Vec<Key> = keys.iter().map(|(_, e)| e.key.clone()).collect();
            // Dated at the request: DynamoDB may read the items any time until its answer.
            let asked = dated();
            let read = store.get_items(schema, wanted, true);
            let Ok(found) = stop.bound("BatchGetItem", read).await else {
                return;
            };
            let found = schema.index(&found);
            let unchanged = keys
                .iter()
                .filter(|(_, e)| found.get(&e.key).and_then(|i| schema.ttl_of(i)) == Some(e.ttl))
                .map(|(token, e)| (token.clone(), e.ttl_as_read.clone()));
            shared.confirmed.insert(unchanged, asked);
        }
    }
}
