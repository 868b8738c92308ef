//! `ttl-sweeper audit`: what is really in the table. Scans it (or a sample of it) and reports the
//! expired items still present, by how long ago they expired (the sweeper's real lag), and the
//! writer bugs that hide items from the sweeper ([`AuditReport`]). A ttl more than five years old
//! is invalid, not expired: native TTL's rule, which the sweeper follows, never deletes its item.
//! [`verdict`] holds a report against the thresholds of `--max-expired-age` and `--max-problems`.

use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use super::backfill::window_of;
use super::scan::{
    item_attributes, paced, parallel_scan, Position, RateLimit, ScanPageOf, MAX_SEGMENTS,
};
use crate::expiry::window::{parse_ttl, ttl_state, TtlError, TtlState};
use crate::expiry::Timestamp;
use crate::store::entries::{index_item, sort_prefix, Indexing, BACKFILL_ORIGIN};
use crate::store::{
    key_to_json, lock, packs, Index, Key, OpenedTable, Scan, StoreError, TableSchema,
};

/// Upper bounds (seconds) of the expired-age buckets, and their names.
pub const AGE_BUCKETS: [(i64, &str); 5] = [
    (60, "under_1m"),
    (300, "1m_to_5m"),
    (3600, "5m_to_1h"),
    (86_400, "1h_to_24h"),
    (i64::MAX, "over_24h"),
];

/// A problem item, for the report's examples.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// What is wrong.
    pub problem: &'static str,
    /// The item's key, as DynamoDB JSON.
    pub key: serde_json::Value,
    /// The offending values.
    pub detail: String,
}

/// What an audit found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    /// Items read.
    pub scanned: u64,
    /// Items with a ttl attribute.
    pub with_ttl: u64,
    /// Items without one (they never expire; not a problem).
    pub no_ttl: u64,
    /// Expired items still present, by how long ago they expired.
    pub expired_present: std::collections::BTreeMap<&'static str, u64>,
    /// How long ago the oldest present expired item expired, seconds.
    pub oldest_expired_age_seconds: i64,
    /// Items with a numeric ttl but no window attribute: the sweeper cannot see them.
    pub missing_window: u64,
    /// Items whose window attribute does not match their ttl (or shard): the sweeper looks
    /// elsewhere.
    pub wrong_window: u64,
    /// Expiry index table mode: items whose ttl is still to come and that have no entry in the
    /// index table: the sweeper will not see them (written before the stream, or their records
    /// failed): run `backfill`.
    pub missing_entry: u64,
    /// Items whose ttl looks like milliseconds (beyond year 9999): they never expire.
    pub millis_ttl: u64,
    /// Items whose ttl is not a Number, a negative one, or one more than five years in the past:
    /// neither TTL nor the sweeper use them.
    pub invalid_ttl: u64,
    /// Of `invalid_ttl`, ttls more than five years in the past: native TTL ignores them and the
    /// sweeper never deletes them, so they are not counted as expired items still present.
    pub too_old_ttl: u64,
    /// Up to 5 example keys per problem.
    pub examples: Vec<Example>,
    /// True when the read stopped at the sample (`--sample`, [`DEFAULT_SAMPLE`] unless `--all`)
    /// rather than at the table's end.
    pub sampled: bool,
}

impl AuditReport {
    /// Items the writers got wrong.
    pub fn writer_problems(&self) -> u64 {
        self.missing_window
            + self.wrong_window
            + self.missing_entry
            + self.millis_ttl
            + self.invalid_ttl
    }

    fn example(&mut self, problem: &'static str, key: Option<Key>, detail: String) {
        self.keep_example(Example {
            problem,
            key: key.as_ref().map(key_to_json).unwrap_or_default(),
            detail,
        });
    }

    /// Keeps up to 5 examples per problem.
    fn keep_example(&mut self, e: Example) {
        let same = self.examples.iter().filter(|x| x.problem == e.problem);
        if same.count() < 5 {
            self.examples.push(e);
        }
    }

    fn add(&mut self, other: AuditReport) {
        add_counts!(self, other; scanned, with_ttl, no_ttl, missing_window, wrong_window,
            missing_entry, millis_ttl, invalid_ttl, too_old_ttl);
        for (k, v) in other.expired_present {
            *self.expired_present.entry(k).or_default() += v;
        }
        self.oldest_expired_age_seconds = self
            .oldest_expired_age_seconds
            .max(other.oldest_expired_age_seconds);
        for e in other.examples {
            self.keep_example(e);
        }
    }
}

/// Which of an audit's thresholds a report exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// An expired item is still present longer than the allowed age after its ttl.
    pub too_old: bool,
    /// More items than allowed have writer problems ([`AuditReport::writer_problems`]).
    pub too_many_problems: bool,
}

impl Verdict {
    /// True when no threshold is exceeded.
    pub fn passed(&self) -> bool {
        !self.too_old && !self.too_many_problems
    }

    /// Logs each threshold `report` exceeds, as an error naming its flag.
    pub fn log(&self, report: &AuditReport) {
        if self.too_old {
            tracing::error!(
                age_s = report.oldest_expired_age_seconds,
                "expired items are present longer than --max-expired-age"
            );
        }
        if self.too_many_problems {
            tracing::error!(
                problems = report.writer_problems(),
                "items the sweeper cannot see exceed --max-problems"
            );
        }
    }
}

/// Holds `report` against the thresholds: the oldest expired item still present may be at most
/// `max_expired_age` past its ttl, and at most `max_problems` items may have writer problems.
pub fn verdict(report: &AuditReport, max_expired_age: Duration, max_problems: u64) -> Verdict {
    let max_age = i64::try_from(max_expired_age.as_secs()).unwrap_or(i64::MAX);
    Verdict {
        too_old: report.oldest_expired_age_seconds > max_age,
        too_many_problems: report.writer_problems() > max_problems,
    }
}

/// Checks one item against the table's layout as of `now`.
pub fn audit_item(report: &mut AuditReport, item: &Key, schema: &TableSchema, now: Timestamp) {
    report.scanned += 1;
    let layout = &schema.layout;
    let key = || schema.key_of(item);
    let Some(value) = item.get(&layout.ttl_attribute) else {
        report.no_ttl += 1;
        return;
    };
    report.with_ttl += 1;
    let parsed = match value {
        AttributeValue::N(n) => parse_ttl(n).map_err(|e| (e, n.clone())),
        other => Err((TtlError::NotANumber(String::new()), format!("{other:?}"))),
    };
    let ttl = match parsed {
        Ok(t) => t,
        Err((TtlError::LooksLikeMilliseconds(_), shown)) => {
            report.millis_ttl += 1;
            report.example("millis_ttl", key(), format!("ttl = {shown}"));
            return;
        }
        Err((_, shown)) => {
            report.invalid_ttl += 1;
            report.example("invalid_ttl", key(), format!("ttl = {shown}"));
            return;
        }
    };
    match ttl_state(ttl, now) {
        TtlState::Live => {}
        TtlState::TooOld => {
            report.invalid_ttl += 1;
            report.too_old_ttl += 1;
            let detail =
                format!("ttl = {ttl}: more than five years in the past, native TTL ignores it");
            report.example("too_old_ttl", key(), detail);
            return;
        }
        TtlState::Expired => {
            let age = now.secs() - ttl.floor() as i64;
            let bucket = AGE_BUCKETS
                .iter()
                .find(|(upper, _)| age < *upper)
                .map_or("over_24h", |b| b.1);
            *report.expired_present.entry(bucket).or_default() += 1;
            report.oldest_expired_age_seconds = report.oldest_expired_age_seconds.max(age);
        }
    }
    if schema.index.table().is_some() {
        // No window attribute here: whether the item has its entry is checked by `audit`.
        return;
    }
    let Ok(expected) = window_of(item, schema, ttl) else {
        return;
    };
    match item.get(&layout.window_attribute) {
        None => {
            report.missing_window += 1;
            let detail = format!("ttl = {ttl}, expected window {expected}");
            report.example("missing_window", key(), detail);
        }
        Some(AttributeValue::S(w)) if *w == expected => {}
        Some(other) => {
            report.wrong_window += 1;
            let detail = format!("ttl = {ttl}: has {other:?}, expected {expected}");
            report.example("wrong_window", key(), detail);
        }
    }
}

/// Expiry index table mode: counts `item` in `missing_entry` when its ttl is still to come at
/// `now` and `index_table` has no entry for it (an expired item present is counted as such).
async fn check_entry(
    store: &impl Scan,
    schema: &TableSchema,
    index_table: &str,
    item: &Key,
    (now, read_limit): (Timestamp, Option<&RateLimit>),
    report: &mut AuditReport,
) -> Result<(), StoreError> {
    let Some(Indexing::Entry {
        entry,
        expired: false,
    }) = index_item(schema, item, BACKFILL_ORIGIN, now)
    else {
        return Ok(());
    };
    let ttl = parse_ttl(&entry.ttl).unwrap_or_default();
    let Some(prefix) = sort_prefix(schema, &entry.key, ttl) else {
        return Ok(());
    };
    // An entry of one item (`backfill`'s), or one in a pack due at the ttl (the indexer's).
    // Each look-up within `--max-rcu`, as the scan's pages are.
    let due = packs::due_of_ttl(ttl);
    let entry_found = store.has_entry(index_table, &entry.window, &prefix);
    let mut found = paced(read_limit, entry_found).await?;
    if let (false, Some(window)) = (found, packs::window_of(schema, &entry.key, due)) {
        let packed = store.has_packed(schema, index_table, &window, due, &entry.key);
        found = paced(read_limit, packed).await?;
    }
    if !found {
        report.missing_entry += 1;
        let detail = format!("ttl = {}, no entry in {index_table}", entry.ttl);
        report.example("missing_entry", Some(entry.key), detail);
    }
    Ok(())
}

/// The items `audit` reads unless told otherwise (`--sample`, `--all`): enough to find a writer's
/// bug or a backlog, at a bounded cost whatever the table's size (100,000 items of 1 KB: about
/// 12,500 read units).
pub const DEFAULT_SAMPLE: u64 = 100_000;

/// Refuses to audit a table that looks swept through an expiry index table not named: it has a
/// stream, no GSI `INDEX_NAME`, and no expiry index table was named (`opened`). Every item would
/// count as `missing_window`, though a table swept through an expiry index table (`followStream`,
/// `run --follow-stream`) is fine: the error says to name it. A table with neither stream nor
/// GSI is audited for its windows, as before adoption.
pub fn require_swept(opened: &OpenedTable) -> Result<(), String> {
    let Index::Gsi(index_name) = &opened.schema.index else {
        return Ok(());
    };
    if opened.index_present || !opened.has_stream {
        return Ok(());
    }
    let table = &opened.schema.table_name;
    Err(format!(
        "table {table:?} has a stream and no global secondary index {index_name:?} \
         (INDEX_NAME), and no expiry index table was named. If it is swept through an expiry \
         index table (`followStream`, `ttl-sweeper run --follow-stream`), name it: \
         --expiry-index-table <table> (EXPIRY_INDEX_TABLE; the construct's `ExpiryIndexTable` \
         output). If writers set the window, create the GSI first (docs/adoption.md)"
    ))
}

/// Scans the table in `segments` segments (clamped to 1 to [`MAX_SEGMENTS`]), stopping after about
/// `sample` items if given, and audits every item as of `now`; the scan and, with an expiry
/// index table, the look-ups of the entries read at most `max_rcu` read capacity units a second
/// if given. `progress` sees the count of items read after every page.
#[allow(clippy::too_many_arguments)]
pub async fn audit(
    store: &impl Scan,
    schema: &TableSchema,
    segments: u32,
    sample: Option<u64>,
    max_rcu: Option<f64>,
    now: Timestamp,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<AuditReport, StoreError> {
    let read_limit = max_rcu.map(RateLimit::new);
    let total = Mutex::new(AuditReport::default());
    let limit = read_limit.as_ref();
    let segments = segments.clamp(1, MAX_SEGMENTS);
    let positions = vec![Position::Start; segments as usize];
    parallel_scan(
        store,
        &schema.table_name,
        positions,
        &item_attributes(schema),
        // Pages no larger than each segment's share of the sample: every segment reads a page
        // before it sees the sample reached, so the read stops within about twice the sample.
        sample.map(|n| n.div_ceil(u64::from(segments)).clamp(1, 1000) as i32),
        limit,
        |page: ScanPageOf| {
            let total = &total;
            async move {
                let mut part = AuditReport::default();
                for item in &page.items {
                    audit_item(&mut part, item, schema, now);
                    if let Some(index_table) = schema.index.table() {
                        let at = (now, limit);
                        check_entry(store, schema, index_table, item, at, &mut part).await?;
                    }
                }
                let mut t = lock(total);
                t.add(part);
                progress(t.scanned);
                Ok(sample.is_none_or(|n| t.scanned < n))
            }
        },
    )
    .await?;
    let mut report = total.into_inner().unwrap_or_else(|e| e.into_inner());
    report.sampled = sample.is_some_and(|n| report.scanned >= n);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_fails_only_past_a_threshold() {
        let five_minutes = Duration::from_secs(300);
        let judged = |report: &AuditReport, problems| {
            let v = verdict(report, five_minutes, problems);
            (v.too_old, v.too_many_problems, v.passed())
        };
        let clean = AuditReport::default();
        assert!(verdict(&clean, five_minutes, 0).passed());

        let lagging = AuditReport {
            oldest_expired_age_seconds: 300,
            ..AuditReport::default()
        };
        assert!(
            verdict(&lagging, five_minutes, 0).passed(),
            "the limit itself passes"
        );
        let lagging = AuditReport {
            oldest_expired_age_seconds: 301,
            ..lagging
        };
        assert_eq!(judged(&lagging, 0), (true, false, false));
        assert!(verdict(&lagging, Duration::from_secs(3 * 3600), 0).passed());
        assert!(verdict(&lagging, Duration::MAX, 0).passed());

        let buggy = AuditReport {
            missing_window: 1,
            wrong_window: 1,
            millis_ttl: 1,
            invalid_ttl: 1,
            ..AuditReport::default()
        };
        assert_eq!(judged(&buggy, 3), (false, true, false));
        assert!(verdict(&buggy, five_minutes, 4).passed());
    }

    #[test]
    fn a_ttl_more_than_five_years_old_is_invalid_not_expired() {
        use crate::expiry::window::{window_key, MAX_EXPIRED_AGE_SECONDS};
        let schema = crate::tools::test_schema();
        let now = 1_800_000_000i64;
        let mut report = AuditReport::default();
        for (id, ttl) in [
            ("six-years", now - 6 * 365 * 86_400),
            ("edge", now - MAX_EXPIRED_AGE_SECONDS),
            ("two-hours", now - 7200),
        ] {
            let item: Key = [
                ("id".to_string(), AttributeValue::S(id.into())),
                ("ttl".to_string(), AttributeValue::N(ttl.to_string())),
                (
                    "expirationWindow".to_string(),
                    AttributeValue::S(window_key(ttl as f64, 60).unwrap()),
                ),
            ]
            .into();
            audit_item(&mut report, &item, &schema, Timestamp::from_secs(now));
        }
        assert_eq!((report.invalid_ttl, report.too_old_ttl), (1, 1));
        assert_eq!(report.writer_problems(), 1);
        assert_eq!(
            report.expired_present.values().sum::<u64>(),
            2,
            "{report:?}"
        );
        assert_eq!(report.oldest_expired_age_seconds, MAX_EXPIRED_AGE_SECONDS);
        assert_eq!(report.examples.len(), 1);
        assert_eq!(report.examples[0].problem, "too_old_ttl");
    }
}
