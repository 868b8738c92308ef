//! Packed entries of the expiry index table: many items' entries in one index item (a *pack*),
//! written once (a put), never updated, and removed by the index table's native TTL, not by a
//! delete per entry. A sweep reads a pack once, when it is due, and judges every entry in it
//! against the table; what tells the next sweep that a pack is judged is the sweeper's cursor
//! ([`CURSOR`]): every pack due before it was read and each of its entries judged, or carried
//! into a new pack due later. Layout and completeness: `docs/design.md`, "Packed entries".
//!
//! A pack's sort key ([`entries::ENTRY`]) is `p<due, epoch ms, 14 digits>#<origin>#<n>`: every
//! entry in it is due (its ttl has passed) by then. The `p` keeps packs apart from the entries
//! of one item each (`<ttl ms>#…`, digits first), which sweeps still read and remove as before.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::entries::{self, item, n, s, ttl_part, ENTRY, EXPIRES, WINDOW};
use super::{Key, TableSchema};
use crate::expiry::Timestamp;

mod write;
pub use write::{
    rewrite_lead, write_grouped, write_packs, Grouped, Written, ACK_MARGIN, MAX_REWRITE_LEAD,
    PACKS_PER_REQUEST, PACK_LEAD, WRITES,
};

/// The first character of a pack's sort key.
pub const PREFIX: &str = "p";

/// A pack's item keys (a List of Maps), in the order of [`TTLS`].
pub const KEYS: &str = "keys";

/// A pack's ttls (a List of Numbers), each exactly as its item had it.
pub const TTLS: &str = "ttls";

/// The partition of the sweepers' cursors: one item per swept table and shard range (sort key
/// [`ENTRY`]: `<table>#<shard range>`), [`THROUGH`] the instant before which every pack was
/// judged; and the writers' mark (sort key: the table's name), stored before the first pack: no
/// pack is due before it. No window key begins with `#`, so no sweep lists it; it has no
/// [`EXPIRES`]: native TTL keeps it.
pub const CURSOR: &str = "#cursor";

/// A cursor's instant (Number, epoch ms).
pub const THROUGH: &str = "through";

/// When a cursor was last written (Number, epoch ms).
const WRITTEN_AT: &str = "writtenAt";

/// A pack holds entries up to about this many bytes (four write units, one strongly consistent
/// read unit); one entry larger than that is a pack of its own.
pub const MAX_PACK_BYTES: usize = 4_000;

/// How long after it is due a pack is left to native TTL: as long as an entry of one item
/// ([`entries::KEEP_SECONDS`]), past any catch-up a sweep makes exactly.
pub const KEEP_SECONDS: i64 = entries::KEEP_SECONDS;

/// One item's entry in a pack.
#[derive(Debug, Clone, PartialEq)]
pub struct PackEntry {
    /// The item's primary key.
    pub key: Key,
    /// Its ttl, exactly as the item had it (a Number in epoch seconds).
    pub ttl: String,
}

/// A pack: entries of one window partition, every one due by [`Pack::due`].
#[derive(Debug, Clone, PartialEq)]
pub struct Pack {
    /// The window and shard ([`WINDOW`]).
    pub window: String,
    /// The sort key ([`ENTRY`]): `p<due>#<origin>#<n>`.
    pub sort: String,
    /// Its entries, each due by the pack's due.
    pub entries: Vec<PackEntry>,
}

/// The sort key of the `n`th pack of `origin` due at `due`.
pub fn sort_for(due: Timestamp, origin: &str, n: usize) -> String {
    format!("{}{origin}#{n}", due_prefix(due))
}

/// When an entry with ttl `ttl` (epoch seconds) is due at the earliest: the ttl in milliseconds,
/// rounded up, so that every sweep instant past it is past the ttl.
pub fn due_of_ttl(ttl: f64) -> Timestamp {
    Timestamp::from_millis((ttl * 1000.0).ceil() as i64)
}

/// What the sort key of every pack due at `due` begins with.
pub fn due_prefix(due: Timestamp) -> String {
    format!("{PREFIX}{}#", ttl_part(due.millis()))
}

/// The window partition of the packs due at `due` that hold `key` of `schema`'s table; `None`
/// when the key has no window (not a key of the table).
pub fn window_of(schema: &TableSchema, key: &Key, due: Timestamp) -> Option<String> {
    let pk = schema.key_attributes.first().and_then(|a| key.get(a))?;
    schema.layout.window_for(due.as_secs_f64(), pk).ok()
}

/// The lowest and highest sort key of packs due from `since` (included) to `now` (excluded).
pub fn bounds(since: Timestamp, now: Timestamp) -> (String, String) {
    let key = |t: Timestamp| format!("{PREFIX}{}", ttl_part(t.millis()));
    (key(since), key(now))
}

/// When the pack with sort key `sort` is due; `None` for any other sort key.
pub fn due_of(sort: &str) -> Option<Timestamp> {
    let digits = sort.strip_prefix(PREFIX)?.get(..14)?;
    digits.parse().ok().map(Timestamp::from_millis)
}

/// About how many bytes `value` takes in an item, by DynamoDB's rules (names and values by their
/// UTF-8 length, a Number by its digits, 3 bytes per List or Map and 1 per element in it).
pub fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| 1 + k.len() + value_bytes(v))
                .sum::<usize>()
        }
        AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value_bytes(v)).sum::<usize>(),
        _ => 1,
    }
}

impl PackEntry {
    /// About how many bytes the entry adds to a pack.
    pub fn bytes(&self) -> usize {
        2 + value_bytes(&AttributeValue::M(self.key.clone())) + self.ttl.len()
    }
}

impl Pack {
    /// When it is due.
    pub fn due(&self) -> Option<Timestamp> {
        due_of(&self.sort)
    }

    /// The pack as an item of the index table, with its [`EXPIRES`] for native TTL.
    pub fn to_item(&self) -> Key {
        let due_s = self.due().map_or(0, |d| d.millis().div_euclid(1000));
        let list = |f: fn(&PackEntry) -> AttributeValue| {
            AttributeValue::L(self.entries.iter().map(f).collect())
        };
        item([
            (WINDOW, s(&self.window)),
            (ENTRY, s(&self.sort)),
            (KEYS, list(|e| AttributeValue::M(e.key.clone()))),
            (TTLS, list(|e| AttributeValue::N(e.ttl.clone()))),
            (EXPIRES, n(due_s + KEEP_SECONDS)),
        ])
    }

    /// The pack `item` holds; `None` when it does not read as one.
    pub fn from_item(item: &Key) -> Option<Pack> {
        let s = |name: &str| item.get(name)?.as_s().ok().cloned();
        let (window, sort) = (s(WINDOW)?, s(ENTRY)?);
        due_of(&sort)?;
        let (keys, ttls) = (item.get(KEYS)?.as_l().ok()?, item.get(TTLS)?.as_l().ok()?);
        if keys.len() != ttls.len() {
            return None;
        }
        let entry = |(k, t): (&AttributeValue, &AttributeValue)| {
            let (key, ttl) = (k.as_m().ok()?.clone(), t.as_n().ok()?.clone());
            Some(PackEntry { key, ttl })
        };
        let entries: Option<Vec<_>> = keys.iter().zip(ttls).map(entry).collect();
        Some(Pack {
            window,
            sort,
            entries: entries?,
        })
    }
}

/// The items of `pack` as a GSI would list them: the table's key attributes and its ttl
/// attribute. `None` when an entry's key is not a key of `schema`'s table: the pack is someone
/// else's.
pub fn listed(schema: &TableSchema, pack: Pack) -> Option<Vec<Key>> {
    let item = |e: PackEntry| entries::with_ttl(schema, e.key, AttributeValue::N(e.ttl));
    pack.entries.into_iter().map(item).collect()
}

/// `entries` of window partition `window`, all due by `due`, cut into packs of at most
/// [`MAX_PACK_BYTES`] each, the `n`th's sort key [`sort_for`]`(due, origin, n)`.
pub fn pack(window: &str, due: Timestamp, origin: &str, entries: Vec<PackEntry>) -> Vec<Pack> {
    let mut packs: Vec<Pack> = Vec::new();
    let mut bytes = 0;
    for entry in entries {
        let size = entry.bytes();
        let full = packs
            .last()
            .is_none_or(|p| !p.entries.is_empty() && bytes + size > MAX_PACK_BYTES);
        if full {
            packs.push(Pack {
                window: window.to_owned(),
                sort: sort_for(due, origin, packs.len()),
                entries: Vec::new(),
            });
            bytes = 0;
        }
        bytes += size;
        packs.last_mut().expect("one pushed").entries.push(entry);
    }
    packs
}

/// `entries`, each due by its instant and tagged, as packs of `schema`'s index table: grouped by
/// the window partition of their due (the window of the due, the shard of the key) and their
/// due, cut at [`MAX_PACK_BYTES`]; the packs of the `g`th group sorted
/// [`sort_for`]`(due, "<origin>-<g>", n)`. Each pack comes with its entries' tags, in order. An
/// entry whose key has no window (not a key of the table) is answered apart, with its tag.
#[allow(clippy::type_complexity)]
pub fn group<T>(
    schema: &TableSchema,
    origin: &str,
    entries: Vec<(Timestamp, PackEntry, T)>,
) -> (Vec<(Pack, Vec<T>)>, Vec<(PackEntry, T)>) {
    let mut groups: BTreeMap<(String, i64), Vec<(PackEntry, T)>> = BTreeMap::new();
    let mut apart = Vec::new();
    for (due, entry, tag) in entries {
        match window_of(schema, &entry.key, due) {
            Some(w) => groups
                .entry((w, due.millis()))
                .or_default()
                .push((entry, tag)),
            None => apart.push((entry, tag)),
        }
    }
    let mut out = Vec::new();
    for (g, ((window, due), members)) in groups.into_iter().enumerate() {
        let (entries, tags): (Vec<_>, Vec<_>) = members.into_iter().unzip();
        let mut tags = tags.into_iter();
        let due = Timestamp::from_millis(due);
        for pack in pack(&window, due, &format!("{origin}-{g}"), entries) {
            let of_pack = tags.by_ref().take(pack.entries.len()).collect();
            out.push((pack, of_pack));
        }
    }
    (out, apart)
}

/// The cursor item `id`, through `through`, written at `at`.
pub fn cursor_item(id: &str, through: Timestamp, at: Timestamp) -> Key {
    item([
        (WINDOW, s(CURSOR)),
        (ENTRY, s(id)),
        (THROUGH, n(through.millis())),
        (WRITTEN_AT, n(at.millis())),
    ])
}

/// The instant a cursor item holds; `None` when it does not read as one.
pub fn cursor_of(item: &Key) -> Option<Timestamp> {
    let n = item.get(THROUGH)?.as_n().ok()?;
    n.parse().ok().map(Timestamp::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::Layout;
    use AttributeValue as AV;

    fn schema() -> TableSchema {
        crate::store::tests::schema(&["pk"], Some("x"), Layout::default())
    }

    /// The entries of items `session#<i>` for each `i` of `ids`, each with ttl `ttl`.
    fn entries_of(ids: std::ops::Range<usize>, ttl: i64) -> Vec<PackEntry> {
        let entry = |i| PackEntry {
            key: [("pk".to_owned(), AV::S(format!("session#{i:06}")))].into(),
            ttl: ttl.to_string(),
        };
        ids.map(entry).collect()
    }

    #[test]
    fn a_pack_reads_back_as_written_and_lists_its_items_with_their_ttls() {
        let due = Timestamp::from_millis(1_800_000_000_999);
        let packs = pack("w#1", due, "seq-1", entries_of(0..3, 1_800_000_000));
        assert_eq!(packs.len(), 1);
        let item = packs[0].to_item();
        assert_eq!(item[ENTRY], AV::S("p01800000000999#seq-1#0".into()));
        assert_eq!(
            item[EXPIRES],
            AV::N((1_800_000_000 + KEEP_SECONDS).to_string())
        );
        let back = Pack::from_item(&item).unwrap();
        assert_eq!(back, packs[0]);
        assert_eq!(back.due(), Some(due));
        let items = listed(&schema(), back).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[2]["pk"], AV::S("session#000002".into()));
        assert_eq!(items[2]["ttl"], AV::N("1800000000".into()));
    }

    #[test]
    fn packs_stay_under_their_size_and_sort_between_the_bounds_of_their_due() {
        let due = Timestamp::from_millis(1_800_000_000_000);
        let packs = pack("w", due, "o", entries_of(0..500, 1_799_999_999));
        assert!(packs.len() > 1);
        assert_eq!(packs.iter().map(|p| p.entries.len()).sum::<usize>(), 500);
        for p in &packs {
            let bytes: usize = p.entries.iter().map(PackEntry::bytes).sum();
            assert!(bytes <= MAX_PACK_BYTES, "{bytes}");
            let (lo, hi) = bounds(due, due + std::time::Duration::from_millis(1));
            assert!(lo <= p.sort && p.sort < hi, "{}", p.sort);
            let (lo, _) = bounds(due + std::time::Duration::from_millis(1), due);
            assert!(p.sort < lo, "not due after its due");
            // Never read as an entry of one item: those sort below every 14-digit bound.
            assert!(
                p.sort.as_str()
                    > entries::sort_bound(Timestamp::from_millis(i64::MAX / 2)).as_str()
            );
        }
    }

    #[test]
    fn an_item_of_another_table_or_shape_is_no_pack_listed() {
        let due = Timestamp::from_millis(1_800_000_000_000);
        let mut p = pack("w", due, "o", entries_of(1..2, 5)).remove(0);
        p.entries[0].key.insert("sk".into(), AV::S("x".into()));
        assert!(listed(&schema(), p).is_none());
        let mut item = pack("w", due, "o", entries_of(1..2, 5))[0].to_item();
        item.insert(TTLS.into(), AV::L(vec![]));
        assert!(Pack::from_item(&item).is_none());
        assert_eq!(due_of("01800000000000#abc#seq"), None);
        let cursor = cursor_item("t#all", due, due);
        assert_eq!(cursor_of(&cursor), Some(due));
    }
}
