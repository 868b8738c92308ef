//! Expiry index table mode (`EXPIRY_INDEX_TABLE`): an entry is removed once a sweep has judged
//! its item against the table — deleted, found gone, or kept because its ttl in the table is no
//! longer the indexed one — so each entry is read by one sweep, and the lookback re-reads only
//! what is still to do. An item whose delete failed or was left (the sweep had to stop) keeps
//! its entry: the next sweep finds it again. A key listed from a pack ([`crate::store::packs`]),
//! which is never removed, is carried instead: written into a new pack the next sweep reads.

use std::collections::{HashMap, HashSet};

use tracing::warn;

use super::delete::{write_index, ChunkOutcome, Deleter, Expired};
use crate::expiry::window::parse_ttl;
use crate::expiry::Clock;
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
    let unsettled = out.unsettled();
    let judged = latest_ttls(entries.iter().map(|(item, ttl, _)| (item.as_str(), *ttl)));
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

/// The latest ttl each key (by its text) is listed with in a group.
fn latest_ttls<'a>(listed: impl Iterator<Item = (&'a str, f64)>) -> HashMap<&'a str, f64> {
    let mut latest = HashMap::new();
    for (key, ttl) in listed {
        let at = latest.entry(key).or_insert(ttl);
        *at = f64::max(*at, ttl);
    }
    latest
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

/// Carries into new packs, for a later sweep to judge them again: the keys of `packed` that
/// `out` did not settle (failed, or left), those in `also` (held by another group), and each
/// entry of a key listed with a later ttl beside it (a ttl moved earlier: the delete judged the
/// key on the later ttl only). A carried pack is written as the stream indexer writes its packs
/// ([`packs::write_packs`]): due at the sweep instant, or [`packs::PACK_LEAD`] past the latest
/// DynamoDB's clock may read (`clock`) if that is later, and written again if acknowledged too
/// late, so that no sweep, tick or full, has read past it before it is there. Sets
/// `out.carried_all` when there was something to carry: whether all of it was written.
pub(super) async fn carry_unsettled<S: Store>(
    d: &Deleter<'_, S>,
    clock: &dyn Clock,
    packed: Vec<(String, PackEntry)>,
    also: HashSet<String>,
    out: &mut ChunkOutcome,
) {
    let mut unsettled = out.unsettled();
    unsettled.extend(also);
    let ttl_of = |e: &PackEntry| parse_ttl(&e.ttl).unwrap_or(f64::NAN);
    let latest = latest_ttls(packed.iter().map(|(token, e)| (token.as_str(), ttl_of(e))));
    let passed_over =
        |token: &str, e: &PackEntry| latest.get(token).is_some_and(|l| ttl_of(e) < *l);
    let carry: Vec<PackEntry> = packed
        .iter()
        .filter(|(token, e)| unsettled.contains(token) || passed_over(token, e))
        .map(|(_, e)| e.clone())
        .collect();
    if carry.is_empty() {
        return;
    }
    let (schema, due) = (d.schema, d.now.max(clock.latest() + packs::PACK_LEAD));
    let origin = format!("carry-{:016x}", fastrand::u64(..));
    let due_now = carry.into_iter().map(|e| (due, e, ())).collect();
    let (written, apart) = packs::write_grouped(d.store, schema, clock, &origin, due_now, 1).await;
    if !apart.is_empty() {
        // Not keys of this table: nothing a sweep could delete, nothing to carry.
        warn!(
            keys = apart.len(),
            "unsettled keys of a pack have no window; not carried"
        );
    }
    let mut all = true;
    for (pack, _, error) in written {
        let count = pack.entries.len() as u64;
        match error {
            None => out.carried += count,
            Some((_, e)) => {
                warn!(error = %e, keys = count, "unsettled keys of packs not carried; their packs are read again");
                all = false;
            }
        }
    }
    out.carried_all = Some(all);
}
