//! The follower's decisions, as pure functions of what it knows: which shards may be read now,
//! and which records of a batch to try again after a failure; and the position it saves.

use std::collections::{BTreeMap, HashSet};

use aws_lambda_events::dynamodb::EventRecord;
use serde::{Deserialize, Serialize};

use crate::store::stream::Shard;

/// Where each shard's reading stands: saved as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The stream's ARN: a position of another stream (the stream was disabled and enabled again)
    /// does not apply.
    pub stream: String,
    /// Per shard id.
    pub shards: BTreeMap<String, ShardPosition>,
}

/// How far one shard was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardPosition {
    /// Every record up to this sequence number was handled.
    After(String),
    /// The shard was closed and read to its end.
    Done,
}

/// The listed `shards` not `running`, not read to their end, and whose parent (if still listed)
/// was read to its end: parents before children.
pub(super) fn ready(
    shards: &[Shard],
    position: &Position,
    running: &HashSet<String>,
) -> Vec<String> {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    let done = |id: &str| position.shards.get(id) == Some(&ShardPosition::Done);
    shards
        .iter()
        .filter(|s| !running.contains(&s.id) && !done(&s.id))
        .filter(|s| {
            s.parent
                .as_deref()
                .is_none_or(|p| !listed.contains(p) || done(p))
        })
        .map(|s| s.id.clone())
        .collect()
}

/// After an attempt at `records[todo]` whose `failures` (sequence numbers) failed: the index of
/// each failed record, and what to try again — each failed record and the records of its item
/// (`ids`) after it, in order.
pub(super) fn to_retry(
    records: &[EventRecord],
    ids: &[String],
    todo: &[usize],
    failures: &[String],
) -> (Vec<usize>, Vec<usize>) {
    let failed: Vec<usize> = failures
        .iter()
        .filter_map(|sequence| {
            todo.iter()
                .copied()
                .find(|&i| records[i].change.sequence_number.as_deref() == Some(sequence.as_str()))
        })
        .collect();
    let again = todo
        .iter()
        .copied()
        .filter(|&i| failed.iter().any(|&f| i >= f && ids[i] == ids[f]))
        .collect();
    (failed, again)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> Shard {
        Shard {
            id: id.into(),
            parent: parent.map(str::to_owned),
        }
    }

    #[test]
    fn children_wait_for_their_parent_to_be_read_to_its_end() {
        let shards = [
            shard("a", None),
            shard("b", Some("a")),
            shard("c", Some("b")),
            shard("d", Some("gone")),
        ];
        let mut position = Position::default();
        let none = HashSet::new();
        assert_eq!(ready(&shards, &position, &none), ["a", "d"]);
        position
            .shards
            .insert("a".into(), ShardPosition::After("5".into()));
        assert_eq!(ready(&shards, &position, &none), ["a", "d"]);
        position.shards.insert("a".into(), ShardPosition::Done);
        assert_eq!(ready(&shards, &position, &none), ["b", "d"]);
        let running: HashSet<String> = ["b".to_string()].into();
        assert_eq!(ready(&shards, &position, &running), ["d"]);
        position.shards.insert("b".into(), ShardPosition::Done);
        assert_eq!(ready(&shards, &position, &none), ["c", "d"]);
    }

    #[test]
    fn a_failed_record_is_tried_again_with_its_item_s_later_records_only() {
        let records: Vec<EventRecord> = ["1", "2", "3", "4", "5", "6"]
            .iter()
            .map(|sequence| {
                let mut r = EventRecord::default();
                r.change.sequence_number = Some(sequence.to_string());
                r
            })
            .collect();
        let ids: Vec<String> = ["a", "b", "a", "c", "a", "b"].map(String::from).into();
        let todo: Vec<usize> = (0..6).collect();
        // a fails at its second record (3), b at its first (2); c succeeded.
        let (failed, again) = to_retry(&records, &ids, &todo, &["3".into(), "2".into()]);
        assert_eq!(failed, [2, 1]);
        assert_eq!(again, [1, 2, 4, 5]);
        // The next attempt: only b's last record fails.
        let (failed, again) = to_retry(&records, &ids, &again, &["6".into()]);
        assert_eq!((failed, again), (vec![5], vec![5]));
        let (failed, again) = to_retry(&records, &ids, &[5], &[]);
        assert!(failed.is_empty() && again.is_empty());
    }

    #[test]
    fn positions_are_saved_as_plain_json() {
        let mut position = Position {
            stream: "arn".into(),
            shards: BTreeMap::new(),
        };
        position
            .shards
            .insert("s1".into(), ShardPosition::After("100".into()));
        position.shards.insert("s0".into(), ShardPosition::Done);
        let text = serde_json::to_string(&position).unwrap();
        assert_eq!(
            text,
            r#"{"stream":"arn","shards":{"s0":"done","s1":{"after":"100"}}}"#
        );
        assert_eq!(serde_json::from_str::<Position>(&text).unwrap(), position);
    }
}
