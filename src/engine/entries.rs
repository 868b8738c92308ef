//! Expiry index table mode (`EXPIRY_INDEX_TABLE`): an entry is removed once a sweep has judged
//! its item against the table — deleted, found gone, or kept because its ttl in the table is no
//! longer the indexed one — so each entry is read by one sweep, and the lookback re-reads only
//! what is still to do. An item whose delete failed or was left (the sweep had to stop) keeps
//! its entry: the next sweep finds it again.

use std::collections::{HashMap, HashSet};

use tracing::warn;

use super::delete::{write_index, ChunkOutcome, Deleter, Expired};
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
