//! The follower's decisions, as pure functions of what it knows: which shards may be read now,
//! and which records of a batch to try again after a failure; and the position it saves.

use std::collections::{BTreeMap, HashMap, HashSet};

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

/// The saved position must fit in one item (400 KB), with room.
pub(super) const MAX_POSITION_BYTES: usize = 350_000;

/// The listed shards read to their end: those marked [`ShardPosition::Done`], and the ancestors
/// of every shard with a position — a shard is read only after its parent was read to its end,
/// so a shard begun vouches for its parent, grandparent and so on ([`compact`] drops the marks
/// that are vouched for).
fn read_to_end<'a>(shards: &'a [Shard], position: &Position) -> HashSet<&'a str> {
    let parent_of: HashMap<&str, &str> = shards
        .iter()
        .filter_map(|s| Some((s.id.as_str(), s.parent.as_deref()?)))
        .collect();
    let mut done: HashSet<&str> = HashSet::new();
    let mut vouched: Vec<&str> = Vec::new();
    let begun = shards
        .iter()
        .filter_map(|s| Some((s, position.shards.get(&s.id)?)));
    for (s, at) in begun {
        if *at == ShardPosition::Done {
            done.insert(s.id.as_str());
        }
        vouched.extend(parent_of.get(s.id.as_str()));
    }
    while let Some(shard) = vouched.pop() {
        if done.insert(shard) {
            vouched.extend(parent_of.get(shard));
        }
    }
    done
}

/// Drops the `Done` marks of listed shards whose descendants vouch for them ([`read_to_end`]):
/// closed shards pile up for 24 hours (thousands on a table of hundreds of partitions), and the
/// position must stay small enough to save in one item. Only the newest shard of each lineage
/// keeps an entry, so what is read to its end is unchanged.
pub(super) fn compact(position: &mut Position, shards: &[Shard]) -> bool {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    let vouched: HashSet<&str> = shards
        .iter()
        .filter(|s| position.shards.contains_key(&s.id))
        .filter_map(|s| s.parent.as_deref())
        .filter(|p| listed.contains(p))
        .collect();
    // A mark is dropped only when a listed child has an entry; that child's entry stays unless
    // its own child has one: the deepest entries always stay, and vouch for every mark dropped.
    let before = position.shards.len();
    position
        .shards
        .retain(|id, at| !(*at == ShardPosition::Done && vouched.contains(id.as_str())));
    position.shards.len() != before
}

/// Writes back the `Done` mark of every listed shard read to its end that [`compact`] dropped:
/// before an entry goes (a shard trimmed, or no longer listed), the marks it vouched for must not
/// go with it, or a closed shard would be read again from its oldest record.
pub(super) fn expand(position: &mut Position, shards: &[Shard]) {
    for id in read_to_end(shards, position) {
        let mark = position.shards.entry(id.to_owned());
        mark.or_insert(ShardPosition::Done);
    }
}

/// The listed `shards` not `running`, not read to their end, and whose parent (if still listed)
/// was read to its end: parents before children.
pub(super) fn ready(
    shards: &[Shard],
    position: &Position,
    running: &HashSet<String>,
) -> Vec<String> {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    let ended = read_to_end(shards, position);
    let done = |id: &str| ended.contains(id);
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

    /// Shards from `id` and `id:parent` words.
    fn shards(spec: &str) -> Vec<Shard> {
        let shard = |word: &str| match word.split_once(':') {
            Some((id, parent)) => (id.into(), Some(parent.into())),
            None => (word.into(), None),
        };
        spec.split_whitespace()
            .map(shard)
            .map(|(id, parent)| Shard { id, parent })
            .collect()
    }

    /// A position from `id:done` and `id:<sequence number>` words: read to the end, or after.
    fn marks(spec: &str) -> Position {
        let mark = |word: &str| {
            let (id, at) = word.split_once(':').unwrap();
            let at = match at {
                "done" => ShardPosition::Done,
                sequence => ShardPosition::After(sequence.into()),
            };
            (id.to_owned(), at)
        };
        let shards = spec.split_whitespace().map(mark).collect();
        Position {
            shards,
            ..Position::default()
        }
    }

    #[test]
    fn children_wait_for_their_parent_to_be_read_to_its_end() {
        let shards = shards("a b:a c:b d:gone");
        let none = HashSet::new();
        let ready_at = |spec: &str| ready(&shards, &marks(spec), &none);
        assert_eq!(ready_at(""), ["a", "d"]);
        assert_eq!(ready_at("a:5"), ["a", "d"]);
        assert_eq!(ready_at("a:done"), ["b", "d"]);
        let running: HashSet<String> = ["b".to_string()].into();
        assert_eq!(ready(&shards, &marks("a:done"), &running), ["d"]);
        assert_eq!(ready_at("a:done b:done"), ["c", "d"]);
    }

    /// A day of a table's stream: `lineages` shards open now, each the last of `generations`
    /// shards that split from one another (closed ones read to their end), with DynamoDB's shard
    /// ids and sequence numbers.
    fn a_day_of_shards(lineages: usize, generations: usize) -> (Vec<Shard>, Position) {
        let id = |l: usize, g: usize| {
            format!("shardId-{:020}-{:08x}", 1_764_000_000_000u64 + g as u64, l)
        };
        let mut shards = vec![];
        let mut position = Position {
            stream: "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/2026-11-27T00:00:00.000".into(),
            shards: BTreeMap::new(),
        };
        for l in 0..lineages {
            for g in 0..generations {
                let parent = (g > 0).then(|| id(l, g - 1));
                shards.push(Shard {
                    id: id(l, g),
                    parent,
                });
                let at = if g + 1 == generations {
                    ShardPosition::After(format!(
                        "{:028}",
                        4_421_584_500_000_000_017_450_439_091u128 + l as u128
                    ))
                } else {
                    ShardPosition::Done
                };
                position.shards.insert(id(l, g), at);
            }
        }
        (shards, position)
    }

    #[test]
    fn thousands_of_shards_are_saved_in_one_item_and_nothing_is_read_again() {
        // 625 partitions splitting over a day: 5,000 listed shards, 4,375 of them closed (256 KB
        // whole); and twice as many, whose whole position is past what one item can hold.
        for lineages in [625, 1_250] {
            let (shards, position) = a_day_of_shards(lineages, 8);
            let full = serde_json::to_string(&position).unwrap().len();
            if lineages == 1_250 {
                assert!(
                    full > MAX_POSITION_BYTES,
                    "the whole position is {full} bytes"
                );
            }
            compacts_to_its_open_shards(&shards, position);
        }
    }

    fn compacts_to_its_open_shards(shards: &[Shard], mut position: Position) {
        let lineages = shards.iter().filter(|s| s.parent.is_none()).count();
        let none = HashSet::new();
        let before = ready(shards, &position, &none);
        assert!(compact(&mut position, shards));
        let saved = serde_json::to_string(&position).unwrap().len();
        assert!(saved <= MAX_POSITION_BYTES / 2, "{saved} bytes");
        assert_eq!(
            position.shards.len(),
            lineages,
            "the open shard of each lineage"
        );
        assert_eq!(ready(shards, &position, &none), before);
        // The open shards are ready to read on, and no closed one is read again.
        assert_eq!(before.len(), lineages);
        assert!(before
            .iter()
            .all(|id| matches!(position.shards[id], ShardPosition::After(_))));
        // A compact position of a compact position is the same.
        assert!(!compact(&mut position, shards));
    }

    #[test]
    fn a_compacted_position_reads_what_the_whole_one_reads() {
        // A split (a into b and c), c read to its end and its child d begun, b not begun; e
        // closed and read to its end, with no child yet.
        let shards = shards("a b:a c:a d:c e");
        let mut position = marks("a:done c:done d:7 e:done");
        let none = HashSet::new();
        let whole = ready(&shards, &position, &none);
        assert_eq!(whole, ["b", "d"]);
        assert!(compact(&mut position, &shards));
        let kept: Vec<&str> = position.shards.keys().map(String::as_str).collect();
        assert_eq!(kept, ["d", "e"], "a and c are vouched for by d");
        assert_eq!(ready(&shards, &position, &none), whole);
        // d read to its end: still nothing of a or c read again.
        position.shards.insert("d".into(), ShardPosition::Done);
        assert_eq!(ready(&shards, &position, &none), ["b"]);
    }

    #[test]
    fn an_entry_that_goes_takes_no_mark_it_vouched_for_with_it() {
        // a read to its end and split into b; b begun: a's mark is dropped, vouched for by b.
        let shards = shards("a b:a");
        let mut position = marks("a:done b:9");
        assert!(compact(&mut position, &shards));
        let none = HashSet::new();
        // b's records trimmed before they were read: its entry goes, a's mark comes back first.
        expand(&mut position, &shards);
        position.shards.remove("b");
        assert_eq!(
            ready(&shards, &position, &none),
            ["b"],
            "a is not read again"
        );
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
        let position = Position {
            stream: "arn".into(),
            ..marks("s1:100 s0:done")
        };
        let text = serde_json::to_string(&position).unwrap();
        assert_eq!(
            text,
            r#"{"stream":"arn","shards":{"s0":"done","s1":{"after":"100"}}}"#
        );
        assert_eq!(serde_json::from_str::<Position>(&text).unwrap(), position);
    }
}
