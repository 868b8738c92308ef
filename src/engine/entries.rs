//! Expiry index table mode (`EXPIRY_INDEX_TABLE`): an entry is removed once a sweep has judged
//! its item against the table — deleted, found gone, or kept because its ttl in the table is no
//! longer the indexed one — so each entry is read by one sweep, and the lookback re-reads only
//! what is still to do. An item whose delete failed or was left (the sweep had to stop) keeps
//! its entry: the next sweep finds it again. A key listed from a pack ([`crate::store::packs`]),
//! which is never removed, is carried instead: written into a new pack the next sweep reads.

use std::collections::{HashMap, HashSet};

use tracing::warn;

use super::delete::{write_index, ChunkOutcome, Deleter, Expired};
use crate::store::packs::{self, PackEntry};
use crate::store::{key_to_json, EntryWrite, Key, Store};

/// Entry removals in one `BatchWriteItem`.
const REMOVALS_PER_REQUEST: usize = 25;

/// An entry of a group: its item's key as DynamoDB JSON text, the ttl it lists, and its own key.
pub(super) type GroupEntry = (String, f64, Key);

/// The entries of `group` (the keys a task deletes); empty when the keys come from a GSI.
pub(super) fn entries_of(group: &[Expired]) -> Vec<GroupEntry> {
    group
        .iter()
        .filter_map(|e| {
            // The key's text only for a key with an entry: from a GSI there are none.
            let entry = e.entry.clone()?;
            Some((key_to_json(&e.key).to_string(), e.ttl, entry))
        })
        .collect()
}

/// Removes the entries of `entries` whose item `out` settled (not failed, not left); answers how
/// many were removed. A removal that fails every attempt leaves its entry, logged: the next sweep
/// reads it and finds nothing more to do.
///
/// An item listed by several entries of the group (written again with another ttl, both past)
/// goes to DynamoDB once, judged on the latest ttl listed (`drop_repeats`): only the entries of
/// that ttl are removed. The others stay, and a later sweep judges each on its own — the table may
/// hold an earlier one, written last.
pub(super) async fn remove_settled<S: Store>(
    d: &Deleter<'_, S>,
    entries: Vec<GroupEntry>,
    out: &ChunkOutcome,
) -> u64 {
    if entries.is_empty() {
        return 0;
    }
    let unsettled: HashSet<String> = out
        .failed
        .iter()
        .map(|f| f.key.to_string())
        .chain(out.left_keys.iter().map(|k| key_to_json(k).to_string()))
        .collect();
    let mut judged: HashMap<&str, f64> = HashMap::new();
    for (item, ttl, _) in &entries {
        let latest = judged.entry(item.as_str()).or_insert(*ttl);
        *latest = latest.max(*ttl);
    }
    let settled: Vec<EntryWrite> = entries
        .iter()
        .filter(|(item, ttl, _)| !unsettled.contains(item) && judged[item.as_str()] == *ttl)
        .map(|(_, _, id)| EntryWrite::Remove(id.clone()))
        .collect();
    let mut removed = 0;
    for request in settled.chunks(REMOVALS_PER_REQUEST) {
        let (done, error) = write_index(d, request.to_vec()).await;
        removed += done as u64;
        if let Some(e) = error {
            warn!(error = %e, entries = request.len() - done, "expiry index entries not removed; the next sweep reads them again");
            if d.stop.reached() {
                break;
            }
        }
    }
    removed
}

/// The keys of `group` listed from packs: each with the ttl as read.
pub(super) fn packed_of(group: &[Expired]) -> Vec<(String, PackEntry)> {
    group
        .iter()
        .filter(|e| e.packed)
        .map(|e| {
            let entry = PackEntry {
                key: e.key.clone(),
                ttl: e.ttl_as_read.clone(),
            };
            (key_to_json(&e.key).to_string(), entry)
        })
        .collect()
}

/// Carries the keys of `packed` that `out` did not settle (failed, or left), and those in `also`
/// (held by another group), into new packs due at
/// the sweep instant, in the partition of that instant and each key's shard, so that the next
/// sweep, which reads from that instant on, judges them again. Sets `out.carried_all` when every
/// such key was written (or there was none). Without `write` (a pass whose packs end before its
/// instant: a later read may already be past it), nothing is carried, and `out.carried_all` says
/// whether there was nothing to carry.
pub(super) async fn carry_unsettled<S: Store>(
    d: &Deleter<'_, S>,
    packed: Vec<(String, PackEntry)>,
    also: std::collections::HashSet<String>,
    write: bool,
    out: &mut ChunkOutcome,
) {
    let unsettled: std::collections::HashSet<String> = out
        .failed
        .iter()
        .map(|f| f.key.to_string())
        .chain(out.left_keys.iter().map(|k| key_to_json(k).to_string()))
        .chain(also)
        .collect();
    let carry: Vec<PackEntry> = packed
        .into_iter()
        .filter(|(token, _)| unsettled.contains(token))
        .map(|(_, e)| e)
        .collect();
    if carry.is_empty() || !write {
        // Not written: the pass's packs are read again, unless every key was settled.
        out.carried_all = carry.is_empty();
        return;
    }
    // By partition: each key's shard, in the window of the sweep instant.
    let (schema, due) = (d.schema, d.now);
    let origin = format!("carry-{:016x}", fastrand::u64(..));
    let due_now = carry.into_iter().map(|e| (due, e, ())).collect();
    let (packed, apart) = packs::group(schema, &origin, due_now);
    if !apart.is_empty() {
        // Not keys of this table: nothing a sweep could delete, nothing to carry.
        warn!(
            keys = apart.len(),
            "unsettled keys of a pack have no window; not carried"
        );
    }
    let writes: Vec<_> = packed
        .into_iter()
        .map(|(pack, _)| (pack.entries.len() as u64, EntryWrite::Put(pack.to_item())))
        .collect();
    let mut all = true;
    for chunk in writes.chunks(25) {
        let count: u64 = chunk.iter().map(|(n, _)| n).sum();
        let request = chunk.iter().map(|(_, w)| w.clone()).collect();
        match write_index(d, request).await {
            (_, None) => out.carried += count,
            (_, Some(e)) => {
                warn!(error = %e, keys = count, "unsettled keys of packs not carried; their packs are read again");
                all = false;
            }
        }
    }
    out.carried_all = all;
}
