//! Entries gathered across batches before they are packed (`FOLLOW_HOLD`): a stream batch's
//! records rarely share a due second, so the entries due later than [`HOLD_FROM`] are held and
//! each due instant's written together ([`Gathered::take_due`] says when). A shard's saved
//! position never passes a record whose entries are held: after a kill the records are read
//! again, so nothing is lost. `docs/design.md`, "Gathered across batches".

use std::collections::{btree_map::Entry, BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use tokio::time::Instant;

use crate::expiry::Timestamp;
use crate::index::HeldEntry;
use crate::store::packs::PackEntry;
use crate::store::{key_from_json, key_to_json, Backoff, Retry};

/// Entries due sooner than this past the latest DynamoDB's clock may read are written at once.
pub const HOLD_FROM: Duration = Duration::from_secs(120);

/// A held entry is written at the latest this long before it is due: time for a slow write and
/// its retries, far more than [`crate::store::packs::ACK_MARGIN`].
pub const WRITE_BEFORE: Duration = Duration::from_secs(60);

/// How held entries whose write failed are tried again: until written, waits of 1 s doubling to
/// 30 s.
const WRITE_AGAIN: Retry = Retry {
    attempts: u32::MAX,
    base: Duration::from_secs(1),
    cap: Duration::from_secs(30),
};

/// How the follower gathers entries across batches (`FOLLOW_HOLD`, `FOLLOW_HOLD_ENTRIES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathering {
    /// How long an entry may be held, from when its record was read; zero: every entry is
    /// written with its batch.
    pub hold: Duration,
    /// Entries held at most; past it the soonest due are written.
    pub max_entries: usize,
}

impl Default for Gathering {
    fn default() -> Self {
        Gathering {
            hold: DEFAULT_HOLD,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// `FOLLOW_HOLD`'s default.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(30 * 60);
/// `FOLLOW_HOLD_ENTRIES`'s default.
pub const DEFAULT_MAX_ENTRIES: usize = 1_000_000;

/// The longest `FOLLOW_HOLD`: a record is read again after a restart while its entries are
/// held, and the stream keeps records 24 hours.
pub const MAX_HOLD: Duration = Duration::from_secs(6 * 3600);
/// `FOLLOW_HOLD_ENTRIES`' range.
pub const HOLD_ENTRIES: std::ops::RangeInclusive<usize> = 1_000..=10_000_000;

/// An entry held: the item's key (DynamoDB JSON) and ttl as the image had it, and its record.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Held {
    key: Box<str>,
    ttl: Box<str>,
    shard: Rc<str>,
    record: u64,
}

impl Held {
    /// The entry to pack.
    pub(super) fn entry(&self) -> Option<PackEntry> {
        let key = key_from_json(&serde_json::from_str(&self.key).ok()?)?;
        let ttl = self.ttl.to_string();
        Some(PackEntry { key, ttl })
    }
}

/// A record with entries held, and the position its shard may be saved at while they are.
#[derive(Debug)]
struct HeldRecord {
    record: u64,
    /// The sequence number of the record before it, as read; `None`: it was the first read.
    before: Option<String>,
    left: usize,
}

/// The entries held of one due instant, and when the first of them was.
#[derive(Debug)]
struct Group {
    first: Instant,
    held: Vec<Held>,
}

/// The entries held, by due instant (epoch ms), and the records they came from.
#[derive(Debug)]
pub(super) struct Gathered {
    settings: Gathering,
    by_due: BTreeMap<i64, Group>,
    /// When each due instant's group was started and its due, in that order (a group written
    /// since, or started again, is passed over).
    order: VecDeque<(Instant, i64)>,
    count: usize,
    /// Per shard, its records with entries held, oldest first.
    records: HashMap<Rc<str>, VecDeque<HeldRecord>>,
    /// Per shard, the sequence number of the last record handled.
    handled: HashMap<Rc<str>, String>,
    next_record: u64,
    failures: Backoff,
    retry_at: Option<Instant>,
    /// The due instants of entries whose write failed: taken at the next attempt.
    again: Vec<i64>,
}

impl Gathered {
    pub(super) fn new(settings: Gathering) -> Gathered {
        Gathered {
            settings,
            by_due: BTreeMap::new(),
            order: VecDeque::new(),
            count: 0,
            records: HashMap::new(),
            handled: HashMap::new(),
            next_record: 0,
            failures: Backoff::new(WRITE_AGAIN),
            retry_at: None,
            again: Vec::new(),
        }
    }

    /// Entries due after this are held, as of `latest` (the latest DynamoDB's clock may read);
    /// `None` when nothing is.
    pub(super) fn hold_after(&self, latest: Timestamp) -> Option<Timestamp> {
        (!self.settings.hold.is_zero()).then(|| latest + HOLD_FROM)
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Takes `records`, the records of `shard` handled (in order, each once), and `held`, the
    /// entries of theirs held back (`at`: the place of the record in `records`), at `now`.
    pub(super) fn add(
        &mut self,
        shard: &str,
        records: &[EventRecord],
        held: Vec<HeldEntry>,
        now: Instant,
    ) {
        let Some(last) = records.last() else { return };
        let shard: Rc<str> = self
            .handled
            .get_key_value(shard)
            .map_or_else(|| Rc::from(shard), |(s, _)| s.clone());
        let mut per_record = vec![0usize; records.len()];
        for (_, _, at) in &held {
            per_record[*at] += 1;
        }
        let sequence = |r: &EventRecord| crate::index::sequence(r).to_owned();
        let first = self.next_record;
        self.next_record += records.len() as u64;
        let queue = self.records.entry(shard.clone()).or_default();
        let mut before = self.handled.get(&shard).cloned();
        for (i, record) in records.iter().enumerate() {
            if per_record[i] > 0 {
                let (record, left) = (first + i as u64, per_record[i]);
                queue.push_back(HeldRecord {
                    record,
                    before: before.clone(),
                    left,
                });
            }
            before = Some(sequence(record));
        }
        self.handled.insert(shard.clone(), sequence(last));
        for (due, entry, at) in held {
            let held = Held {
                key: key_to_json(&entry.key).to_string().into(),
                ttl: entry.ttl.into(),
                shard: shard.clone(),
                record: first + at as u64,
            };
            self.hold(due.millis(), held, now);
        }
    }

    /// Where `shard`'s position may be saved: after the last record handled, or, while entries
    /// are held, after the record before the oldest record holding one. `None`: nothing read
    /// yet that the position may pass.
    pub(super) fn position(&self, shard: &str) -> Option<String> {
        match self.records.get(shard).and_then(VecDeque::front) {
            Some(oldest) => oldest.before.clone(),
            None => self.handled.get(shard).cloned(),
        }
    }

    /// The sequence number of the last record of `shard` handled, if any: where reading goes on
    /// from (the saved position may be further back).
    pub(super) fn handled(&self, shard: &str) -> Option<String> {
        self.handled.get(shard).cloned()
    }

    /// Forgets `shard`: where it was read to, and which of its records hold entries (read to its
    /// end, or gone from the stream: its records are read again from its oldest, if any). Its held
    /// entries stay, to be written, and hold no position back.
    pub(super) fn forget(&mut self, shard: &str) {
        self.handled.remove(shard);
        self.records.remove(shard);
    }

    /// Whether the entries held are at their bound: reading waits (their writes are failing,
    /// or the bound is being written).
    pub(super) fn full(&self) -> bool {
        self.count >= self.settings.max_entries.max(1)
    }

    /// Whether entries of `shard`'s records are held.
    pub(super) fn holds(&self, shard: &str) -> bool {
        self.records.get(shard).is_some_and(|q| !q.is_empty())
    }

    /// Takes the entries to write now (`latest`: the latest DynamoDB's clock may read): those due
    /// within [`WRITE_BEFORE`], every entry of a due instant whose first entry was held for the
    /// hold, and, once the bound is reached, the soonest due down to nine tenths of it. Nothing
    /// while a failed write waits to be tried again, unless due soon.
    pub(super) fn take_due(&mut self, latest: Timestamp, now: Instant) -> Vec<(Timestamp, Held)> {
        let mut taken = Vec::new();
        let soon = (latest + WRITE_BEFORE).millis();
        while let Some(entry) = self.by_due.first_entry() {
            if *entry.key() > soon {
                break;
            }
            let (due, group) = entry.remove_entry();
            self.take(due, group.held, &mut taken);
        }
        if self.retry_at.is_some_and(|at| now < at) {
            return taken;
        }
        for due in std::mem::take(&mut self.again) {
            if let Some(group) = self.by_due.remove(&due) {
                self.take(due, group.held, &mut taken);
            }
        }
        let bound = self.settings.max_entries.max(1);
        while let Some(&(since, due)) = self.order.front() {
            let aged = now.saturating_duration_since(since) >= self.settings.hold;
            if !aged && self.order.len() <= 2 * bound {
                break;
            }
            self.order.pop_front();
            // The group this started, not one started again after it was written.
            if self.by_due.get(&due).is_some_and(|g| g.first == since) {
                let group = self.by_due.remove(&due).expect("just seen");
                self.take(due, group.held, &mut taken);
            }
        }
        // At the bound, the soonest due down to nine tenths of it, so that reading goes on.
        if self.count >= bound {
            while self.count > bound * 9 / 10 {
                let Some((due, group)) = self.by_due.pop_first() else {
                    break;
                };
                self.take(due, group.held, &mut taken);
            }
        }
        taken
    }

    /// Takes every entry of `shard`'s records (its end was read).
    pub(super) fn take_shard(&mut self, shard: &str) -> Vec<(Timestamp, Held)> {
        let mut taken = Vec::new();
        for (due, group) in &mut self.by_due {
            let (of_shard, others) = std::mem::take(&mut group.held)
                .into_iter()
                .partition::<Vec<_>, _>(|h| &*h.shard == shard);
            group.held = others;
            let at = Timestamp::from_millis(*due);
            taken.extend(of_shard.into_iter().map(|h| (at, h)));
        }
        self.by_due.retain(|_, group| !group.held.is_empty());
        self.count -= taken.len();
        taken
    }

    /// Takes every entry held (the stop).
    pub(super) fn take_all(&mut self) -> Vec<(Timestamp, Held)> {
        let mut taken = Vec::new();
        for (due, group) in std::mem::take(&mut self.by_due) {
            self.take(due, group.held, &mut taken);
        }
        self.order.clear();
        taken
    }

    /// Holds `held`, due at `due` (epoch ms), at `now`: in its due instant's group, or a group
    /// started now.
    fn hold(&mut self, due: i64, held: Held, now: Instant) {
        match self.by_due.entry(due) {
            Entry::Occupied(mut group) => group.get_mut().held.push(held),
            Entry::Vacant(group) => {
                group.insert(Group {
                    first: now,
                    held: vec![held],
                });
                self.order.push_back((now, due));
            }
        }
        self.count += 1;
    }

    fn take(&mut self, due: i64, held: Vec<Held>, into: &mut Vec<(Timestamp, Held)>) {
        self.count -= held.len();
        let at = Timestamp::from_millis(due);
        into.extend(held.into_iter().map(|h| (at, h)));
    }

    /// Counts `written` as written: a record none of whose entries is held any more no longer
    /// holds its shard's position back. Answers the shards whose position may move.
    pub(super) fn written<'a>(&mut self, written: impl Iterator<Item = &'a Held>) -> Vec<Rc<str>> {
        let mut moved = Vec::new();
        let mut any = false;
        for held in written {
            any = true;
            let Some(queue) = self.records.get_mut(&held.shard) else {
                continue;
            };
            if let Ok(i) = queue.binary_search_by_key(&held.record, |r| r.record) {
                queue[i].left = queue[i].left.saturating_sub(1);
            }
            let before = queue.len();
            while queue.front().is_some_and(|r| r.left == 0) {
                queue.pop_front();
            }
            if queue.len() != before && !moved.contains(&held.shard) {
                moved.push(held.shard.clone());
            }
        }
        if any {
            self.failures = Backoff::new(WRITE_AGAIN);
            self.retry_at = None;
        }
        moved
    }

    /// Holds `failed` again (their write failed), to be tried again after a backoff, or when
    /// due soon, whichever is first.
    pub(super) fn failed(&mut self, failed: Vec<(Timestamp, Held)>, now: Instant) {
        if failed.is_empty() {
            return;
        }
        let wait = self.failures.wait();
        self.retry_at = Some(now + wait);
        for (due, held) in failed {
            self.hold(due.millis(), held, now);
            self.again.push(due.millis());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(sequence: &str) -> EventRecord {
        serde_json::from_value(serde_json::json!({
            "eventID": format!("e{sequence}"), "eventName": "INSERT", "awsRegion": "eu-west-1",
            "eventSource": "aws:dynamodb",
            "dynamodb": { "Keys": {"pk": {"S": sequence}}, "SequenceNumber": sequence,
                          "SizeBytes": 10, "StreamViewType": "NEW_IMAGE" }
        }))
        .unwrap()
    }

    fn entry(pk: &str, ttl: i64) -> PackEntry {
        let key = [(
            "pk".to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S(pk.into()),
        )];
        PackEntry {
            key: key.into_iter().collect(),
            ttl: ttl.to_string(),
        }
    }

    fn gathered(hold_s: u64, max_entries: usize) -> Gathered {
        Gathered::new(Gathering {
            hold: Duration::from_secs(hold_s),
            max_entries,
        })
    }

    const DAY: i64 = 1_800_000_000;

    fn held(at: usize, due_s: i64) -> HeldEntry {
        (
            Timestamp::from_secs(due_s),
            entry(&format!("k{at}-{due_s}"), due_s),
            at,
        )
    }

    /// Adds to `g`, now, record `sequence` of `shard` holding entries due `dues` s after DAY.
    fn add(g: &mut Gathered, shard: &str, sequence: &str, dues: &[i64]) {
        let entries = dues.iter().map(|&due| held(0, DAY + due)).collect();
        g.add(shard, &[record(sequence)], entries, Instant::now());
    }

    /// What `g` gives to write now, DynamoDB's clock reading up to `after` seconds after DAY.
    fn due(g: &mut Gathered, after: i64) -> Vec<(Timestamp, Held)> {
        g.take_due(Timestamp::from_secs(DAY + after), Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_is_saved_only_before_its_oldest_record_with_entries_held() {
        let mut g = gathered(600, 100);
        let batch: Vec<_> = ["1", "2", "3"].map(record).into();
        // Record 2 holds one entry, record 3 two; record 1 none.
        g.add(
            "s",
            &batch,
            vec![held(1, DAY + 500), held(2, DAY + 900), held(2, DAY + 300)],
            Instant::now(),
        );
        assert_eq!(g.position("s"), Some("1".into()));
        assert!(g.holds("s"));
        // Nothing is due yet and nothing aged.
        assert!(due(&mut g, 0).is_empty());
        // The soonest due (record 3's) are written: record 2 still holds the shard at 1.
        let taken = due(&mut g, 300 - 60);
        assert_eq!(taken.len(), 1);
        assert!(g.written(taken.iter().map(|(_, h)| h)).is_empty());
        assert_eq!(g.position("s"), Some("1".into()));
        // Record 2's entry: the shard moves to 2, still held by record 3's other entry.
        let taken = due(&mut g, 500 - 60);
        assert_eq!(g.written(taken.iter().map(|(_, h)| h)).len(), 1);
        assert_eq!(g.position("s"), Some("2".into()));
        let taken = due(&mut g, 900 - 60);
        g.written(taken.iter().map(|(_, h)| h));
        assert_eq!(g.position("s"), Some("3".into()));
        assert!(!g.holds("s"));
        assert_eq!(g.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_record_read_holding_an_entry_leaves_the_position_unset() {
        let mut g = gathered(600, 100);
        add(&mut g, "s", "1", &[500]);
        assert_eq!(g.position("s"), None);
        add(&mut g, "t", "7", &[]);
        assert_eq!(g.position("t"), Some("7".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_due_instant_is_written_whole_once_its_first_entry_was_held_for_the_hold() {
        let mut g = gathered(600, 100);
        add(&mut g, "s", "1", &[5_000]);
        tokio::time::advance(Duration::from_secs(300)).await;
        add(&mut g, "s", "2", &[5_000, 6_000]);
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(due(&mut g, 0).is_empty(), "not yet held 600 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        let taken = due(&mut g, 0);
        // Both entries due at +5,000 s, the one held 300 s too; not the other instant's.
        assert_eq!(taken.len(), 2);
        assert!(taken
            .iter()
            .all(|(due, _)| *due == Timestamp::from_secs(DAY + 5_000)));
        assert_eq!(g.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_due_instant_started_again_after_its_write_waits_a_whole_hold() {
        let mut g = gathered(45, 100);
        let at = |s: u64| tokio::time::advance(Duration::from_secs(s));
        add(&mut g, "s", "1", &[5_000]);
        at(30).await;
        add(&mut g, "s", "2", &[5_000]);
        at(15).await;
        assert_eq!(due(&mut g, 0).len(), 2, "held 45 s");
        at(5).await;
        add(&mut g, "s", "3", &[5_000]);
        // 45 s after the second entry of the first group: the new group is 25 s old.
        at(25).await;
        assert!(due(&mut g, 0).is_empty(), "written 25 s after it started");
        at(20).await;
        assert_eq!(due(&mut g, 0).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_reading_waits_and_the_soonest_due_are_written_down_to_nine_tenths() {
        let mut g = gathered(3_600, 10);
        let entries = (0..10).map(|i| held(0, DAY + 900 - i)).collect();
        g.add("s", &[record("1")], entries, Instant::now());
        assert!(g.full());
        let taken = due(&mut g, 0);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0, Timestamp::from_secs(DAY + 891), "the soonest");
        assert_eq!(g.len(), 9);
        assert!(!g.full());
        assert!(due(&mut g, 0).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_backs_off_longer_each_time_until_one_goes_through() {
        let mut g = gathered(600, 100);
        add(&mut g, "s", "1", &[5_000]);
        let taken = g.take_all();
        g.failed(taken, Instant::now());
        // A write of nothing (the other entries of that attempt) ends no backoff: the next
        // attempt is the second.
        assert!(g.written(std::iter::empty()).is_empty());
        assert_eq!((g.failures.made(), g.retry_at.is_some()), (2, true));
        tokio::time::advance(WRITE_AGAIN.cap).await;
        let taken = due(&mut g, 0);
        assert_eq!(taken.len(), 1);
        g.failed(taken, Instant::now());
        assert_eq!(g.failures.made(), 3);
        tokio::time::advance(WRITE_AGAIN.cap).await;
        let taken = due(&mut g, 0);
        g.written(taken.iter().map(|(_, h)| h));
        assert_eq!((g.failures.made(), g.retry_at), (1, None));
        assert_eq!(g.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_is_held_again_and_tried_after_a_backoff_or_when_due() {
        let mut g = gathered(600, 100);
        add(&mut g, "s", "1", &[5_000, 400]);
        let taken = g.take_all();
        assert_eq!(taken.len(), 2);
        g.failed(taken, Instant::now());
        assert_eq!((g.len(), g.position("s")), (2, None));
        // Backing off: only what is due soon.
        assert!(due(&mut g, 0).is_empty());
        let soon = due(&mut g, 400 - 60);
        assert_eq!(soon.len(), 1);
        g.failed(soon, Instant::now());
        tokio::time::advance(WRITE_AGAIN.cap).await;
        let again = due(&mut g, 0);
        assert_eq!(again.len(), 2, "both tried again after the backoff");
        assert!(again.iter().all(|(_, h)| h.entry().is_some()));
        g.written(again.iter().map(|(_, h)| h));
        assert_eq!(g.position("s"), Some("1".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_read_to_its_end_gives_up_its_entries_only() {
        let mut g = gathered(600, 100);
        add(&mut g, "s", "1", &[500]);
        add(&mut g, "t", "2", &[500, 600]);
        let taken = g.take_shard("t");
        assert_eq!(taken.len(), 2);
        assert!(taken.iter().all(|(_, h)| &*h.shard == "t"));
        g.written(taken.iter().map(|(_, h)| h));
        assert!(!g.holds("t") && g.holds("s"));
        assert_eq!(g.len(), 1);
    }
}
