//! Invariant (c), from the events' side: an `Item Expired` the sink accepted stands for an item
//! the sweeper deleted, or a cancellation with its id was accepted too, or the application
//! deleted the item while the chunk that published it was in flight — after the sweep's last
//! strongly consistent read of the item, which found it with the event's ttl, and before the
//! sweeper's delete of it reached DynamoDB (docs/reliability.md, "The invariants").

use std::collections::HashMap;

use super::{Action, Row, Seen, Write};

/// Checks every `Item Expired` of `seen` against `swept` (item id -> the ttl the sweeper deleted
/// it with) and the writers' log, counting the in-flight deletes in `row.in_flight` and the rest
/// as violations of (c), each with everything the proxies saw of the item.
pub(super) fn check(
    row: &mut Row,
    seen: &Seen,
    swept: &HashMap<&str, i64>,
    writes: &HashMap<&str, &Write>,
) {
    let mut expired: Vec<_> = seen.expired.iter().collect();
    expired.sort_by(|a, b| a.1.item.cmp(&b.1.item).then(a.0.cmp(b.0)));
    for (id, event) in expired {
        if swept.get(event.item.as_str()).map(|t| *t as f64) == Some(event.ttl)
            || seen.cancelled.contains_key(id)
        {
            continue;
        }
        let write = writes.get(event.item.as_str()).copied();
        match in_flight(seen, &event.item, event.ttl, write) {
            Ok(()) => row.in_flight += 1,
            Err(why) => {
                let text = describe(seen, &event.item, event.ttl, event.at, write, &why);
                row.violation('c', text);
            }
        }
    }
}

/// Whether the application's delete of `item` (the writer's, removing the original) came while a
/// chunk was in flight: a delete request of the sweeper reached the proxy after the application
/// sent its delete, and the last consistent read of the item answered before that request found
/// it with `ttl`. That read found the original, so the application's delete, the only one that
/// removed it, came after it. Else why not.
fn in_flight(seen: &Seen, item: &str, ttl: f64, write: Option<&Write>) -> Result<(), String> {
    let Some((sent, _)) = write.and_then(|w| w.app_delete) else {
        return Err("the application did not delete it".into());
    };
    let requests = seen.delete_requests.get(item).map_or(&[][..], Vec::as_slice);
    let after: Vec<f64> = requests.iter().copied().filter(|d| *d > sent).collect();
    if after.is_empty() {
        return Err("no delete of the sweeper's after the application's".into());
    }
    let reads = seen.reads.get(item).map_or(&[][..], Vec::as_slice);
    let mut why = String::new();
    for d in after {
        let last = reads.iter().filter(|(t, _)| *t < d).last();
        match last {
            Some((_, found)) if *found == Some(ttl) => return Ok(()),
            Some((t, found)) => {
                let found = found.map_or("nothing".into(), |f| format!("ttl {f}"));
                why = format!("the last consistent read ({t:.2}) before the sweeper's delete at {d:.2} found {found}");
            }
            None => why = format!("no consistent read before the sweeper's delete at {d:.2}"),
        }
    }
    Err(why)
}

/// One violation: the event, why it is not excused, and everything seen of the item: the
/// sweepers' delete requests and the deletes applied, the consistent reads (with the ttl found),
/// the `Query` listings, and the writer's action.
fn describe(
    seen: &Seen,
    item: &str,
    ttl: f64,
    at: f64,
    write: Option<&Write>,
    why: &str,
) -> String {
    let times = |ts: Option<&Vec<f64>>| {
        let ts: Vec<String> = ts.into_iter().flatten().map(|t| format!("{t:.2}")).collect();
        ts.join(" ")
    };
    let reads: Vec<String> = seen
        .reads
        .get(item)
        .into_iter()
        .flatten()
        .map(|(t, found)| match found {
            Some(f) => format!("{t:.2}:{f}"),
            None => format!("{t:.2}:gone"),
        })
        .collect();
    let write = match write {
        None => "none".to_owned(),
        Some(w) => {
            let delete = w.app_delete.map_or("-".into(), |(s, a)| format!("{s:.2}..{a:.2}"));
            let found = if w.action == Action::Extend {
                format!("found {}", w.found_original)
            } else {
                format!("removed the original {}", w.found_original)
            };
            format!("{:?} at {:.2}, {found}, its delete {delete}", w.action, w.started)
        }
    };
    format!(
        "{item} (ttl {ttl}): Item Expired accepted at {at:.2}, not deleted by the sweeper, never cancelled: {why} (sweeper's delete requests at [{}]; deletes applied at [{}]; consistent reads at [{}]; listed at [{}]; write: {write})",
        times(seen.delete_requests.get(item)),
        times(seen.deleted.get(item)),
        reads.join(" "),
        times(seen.listed.get(item)),
    )
}
