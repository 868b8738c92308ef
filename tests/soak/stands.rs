//! Invariant (c), from the events' side: an `Item Expired` the sink accepted stands for an item
//! the sweeper deleted, or a cancellation with its id was accepted too, or the application
//! deleted the item while the chunk that published it was in flight: after that chunk's last
//! strongly consistent read of the item (which found it with the event's ttl) and before the
//! chunk's end, its delete of the item. In archive mode the rest is (c'), the documented
//! exception, only as [`unsettled::check`] finds it (docs/reliability.md, "The invariants").

use std::collections::{HashMap, HashSet};

use super::unsettled::{self, Ends};
use super::{Accepted, Action, Row, Seen, Write};

/// Checks every `Item Expired` of `seen` against `swept` (item id -> the ttl the sweeper deleted
/// it with), `destroyed` (the keys whose writer's item a sweeper delete destroyed: batch mode's
/// documented risk or a violation of (a), judged there) and the writers' log, counting the
/// in-flight deletes in `row.in_flight` and the rest as violations of (c), each with everything
/// the proxies saw of the item and whether the sweepers reported an event of its id failed
/// (`reported`: the expiry or its cancellation; a report excuses nothing here). With `archive`,
/// an event [`unsettled::check`] finds the documented exception counts under (c') instead; with
/// `journaled` too (archive mode with the expiry index table, whose journal outlives the process)
/// there is no such exception: the chunk is in flight until a sweep settles the expiry, so an
/// event stands only if the application deleted the item after the chunk's read ([`journaled`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    row: &mut Row,
    seen: &Seen,
    swept: &HashMap<&str, i64>,
    destroyed: &HashSet<&str>,
    writes: &HashMap<&str, &Write>,
    reported: &dyn Fn(&str) -> bool,
    archive: Option<&Ends>,
    journaled: bool,
) {
    let mut expired: Vec<_> = seen.expired.iter().collect();
    expired.sort_by(|a, b| a.1.item.cmp(&b.1.item).then(a.0.cmp(b.0)));
    for (id, event) in expired {
        if swept.get(event.item.as_str()).map(|t| *t as f64) == Some(event.ttl)
            || destroyed.contains(event.item.as_str())
            || seen.cancelled.contains_key(id)
        {
            continue;
        }
        let write = writes.get(event.item.as_str()).copied();
        let flight = if journaled {
            self::journaled(seen, event, write)
        } else {
            in_flight(seen, event, write, archive)
        };
        match flight {
            Ok(()) => row.in_flight += 1,
            Err(why) => {
                let exception = (archive.filter(|_| !journaled))
                    .map(|ends| unsettled::check(seen, event, write, ends));
                let why = match exception {
                    Some(Ok(how)) => {
                        row.unsettled(describe(seen, event, write, &how));
                        continue;
                    }
                    Some(Err(not)) => format!("{why}; not the archive-mode exception: {not}"),
                    None => why,
                };
                let mut text = describe(seen, event, write, &why);
                if reported(id) {
                    text.push_str("; an event of its id was reported failed");
                }
                row.violation('c', text);
            }
        }
    }
}

/// Whether the application's delete of `item` (the writer's, removing the original) came while
/// the chunk that published `event` was in flight: for one of the event's acceptances, the last
/// consistent read of the item answered before it found it with the event's ttl (the chunk's
/// read), and the application sent its delete before the chunk's end — the sweeper's next delete
/// request of the item reaching the proxy, or else its next consistent read of it (the chunk's
/// check of a delete that did not reach DynamoDB, or the next sweep's read after a SIGKILL). The
/// read found the original, so the application's delete, the only one that removed it, came
/// after it. In archive mode, once [`unsettled::chunk_end`] is known, it ends at the first of that
/// and the chunk's next read that did not find the event's ttl: its reads that did (the check of
/// a delete whose answer was lost, the re-read of a key whose delete failed) do not end it, nor
/// do its delete requests — a conditional delete processed before the application's would have
/// deleted the item, so each of an event not deleted was processed after it, whenever it
/// reached the proxy. Else why not.
fn in_flight(
    seen: &Seen,
    event: &Accepted,
    write: Option<&Write>,
    archive: Option<&Ends>,
) -> Result<(), String> {
    let Some((sent, _)) = write.and_then(|w| w.app_delete) else {
        return Err("the application did not delete it".into());
    };
    let requests = seen
        .delete_requests
        .get(&event.item)
        .map_or(&[][..], Vec::as_slice);
    let reads = seen.reads.get(&event.item).map_or(&[][..], Vec::as_slice);
    let mut why = Vec::new();
    for &p in &event.times {
        let before = reads.iter().filter(|(t, _)| *t < p);
        let read = before.max_by(|a, b| a.0.total_cmp(&b.0));
        let read_at = match read {
            Some((t, found)) if *found == Some(event.ttl) => *t,
            // Notify mode: a settling read (after a delete whose answer was lost) that found
            // the item gone owes its event, whoever deleted it; the chunk's read is then the
            // last one that found the event's ttl, and an application delete after it and
            // before the event was in flight.
            Some((t, None)) if archive.is_none() => {
                let chunk_read = reads
                    .iter()
                    .filter(|(r, found)| *r < *t && *found == Some(event.ttl))
                    .map(|(r, _)| *r)
                    .reduce(f64::max);
                if chunk_read.is_some_and(|r| sent > r && sent < p) {
                    return Ok(());
                }
                why.push(format!(
                    "accepted at {p:.2}, the consistent read before it ({t:.2}) found nothing, \
                     and no read of the event's ttl came before the application's delete"
                ));
                continue;
            }
            Some((t, found)) => {
                let found = found.map_or("nothing".into(), |f| format!("ttl {f}"));
                why.push(format!(
                    "accepted at {p:.2}, the consistent read before it ({t:.2}) found {found}"
                ));
                continue;
            }
            None => {
                why.push(format!(
                    "accepted at {p:.2} with no consistent read before it"
                ));
                continue;
            }
        };
        let chunk = archive.and_then(|ends| unsettled::chunk_end(ends, &event.item, p, read_at));
        let ended = |found: &Option<f64>| chunk.is_none() || *found != Some(event.ttl);
        let requests = requests.iter().filter(|_| chunk.is_none());
        let later = requests.copied().chain(
            reads
                .iter()
                .filter(|(_, found)| ended(found))
                .map(|(t, _)| *t),
        );
        let end = later.filter(|t| *t > p).reduce(f64::min);
        let end = end.unwrap_or(f64::INFINITY);
        let end = chunk.map_or(end, |(chunk_end, ..)| end.min(chunk_end));
        if sent < end {
            return Ok(());
        }
        why.push(format!("accepted at {p:.2} after a read at {read_at:.2}, its chunk ended at {end:.2}, before the application's delete"));
    }
    Err(why.join("; "))
}

/// Archive mode with the expiry index table: whether the application deleted `event`'s item
/// while its expiry was in flight, which lasts, with the journal, until a sweep settles it (the
/// item deleted or found gone, or the expiry cancelled): for one of the event's acceptances, the
/// application's delete of the original item came after the chunk's read, the last consistent
/// read before the acceptance that found the event's ttl (a chunk reads nothing between its read
/// and its publish: a read between them that found the item gone or changed is another chunk's
/// or process's read before publishing, which published nothing). That read found the original
/// item (a rewrite's item has a ttl an hour ahead, never the event's), so the delete that removed
/// it was applied after the read, even when its request was sent before the read's answer came
/// back: a strongly consistent read finds nothing once the delete is applied. The times say it
/// only where the delete was sent after the read's answer. An item the application only extended
/// is owed its cancellation, whatever process published the expiry and whenever it died. Else
/// why not.
fn journaled(seen: &Seen, event: &Accepted, write: Option<&Write>) -> Result<(), String> {
    let Some((sent, _)) = write
        .filter(|w| w.found_original && w.action != Action::Extend)
        .and_then(|w| w.app_delete)
    else {
        return Err("not cancelled, and the application did not delete it (journaled: no process's end excuses it)".into());
    };
    let reads = seen.reads.get(&event.item).map_or(&[][..], Vec::as_slice);
    let mut why = Vec::new();
    for &p in &event.times {
        let chunk_read = (reads.iter())
            .filter(|(t, found)| *t < p && *found == Some(event.ttl))
            .map(|(t, _)| *t)
            .reduce(f64::max);
        match chunk_read {
            // The read found the original, so the delete came after it, whenever it was sent.
            Some(_) => return Ok(()),
            None => why.push(format!("accepted at {p:.2} with no consistent read of its ttl before it (the application's delete sent at {sent:.2})")),
        }
    }
    Err(why.join("; "))
}

/// One violation: the event, why it is not excused, and everything seen of the item: the
/// sweepers' delete requests and the deletes applied, the consistent reads (with the ttl found),
/// the `Query` listings, and the writer's action.
fn describe(seen: &Seen, event: &Accepted, write: Option<&Write>, why: &str) -> String {
    let (item, ttl) = (event.item.as_str(), event.ttl);
    let times = |ts: Option<&Vec<f64>>| {
        let ts: Vec<String> = ts
            .into_iter()
            .flatten()
            .map(|t| format!("{t:.2}"))
            .collect();
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
            let delete = w
                .app_delete
                .map_or("-".into(), |(s, a)| format!("{s:.2}..{a:.2}"));
            let found = if w.action == Action::Extend {
                format!("found {}", w.found_original)
            } else {
                format!("removed the original {}", w.found_original)
            };
            format!(
                "{:?} at {:.2}, {found}, its delete {delete}",
                w.action, w.started
            )
        }
    };
    format!(
        "{item} (ttl {ttl}): Item Expired accepted at [{}], not deleted by the sweeper, never cancelled: {why} (sweeper's delete requests at [{}]; deletes applied at [{}]; consistent reads at [{}]; listed at [{}]; write: {write})",
        times(Some(&event.times)),
        times(seen.delete_requests.get(item)),
        times(seen.deleted.get(item)),
        reads.join(" "),
        times(seen.listed.get(item)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event and the application's delete of `SOAK_SEED=20261211`'s r344, as its report
    /// gave them (to the hundredth): the delete sent at .31 and answered at .32, the chunk's read
    /// answered at .32 with the item still on its ttl, the expiry accepted at .37; here the read's
    /// answer is placed between the delete's sending and its answer.
    fn r344(reads: Vec<(f64, Option<f64>)>) -> (Seen, Accepted, Write) {
        let ttl = 1796285454.0;
        let mut seen = Seen::default();
        seen.reads.insert("r344".into(), reads);
        let event = Accepted {
            item: "r344".into(),
            ttl,
            at: 1796285472.370,
            times: vec![1796285472.370],
        };
        let write = Write {
            id: "r344".into(),
            action: Action::Delete,
            found_original: true,
            live: false,
            marker: String::new(),
            started: 1796285472.314,
            app_delete: Some((1796285472.314, 1796285472.322)),
        };
        (seen, event, write)
    }

    #[test]
    fn a_delete_sent_before_the_chunk_s_read_answered_that_read_found_the_item_came_after_it() {
        let (seen, event, write) = r344(vec![(1796285472.318, Some(1796285454.0))]);
        assert_eq!(journaled(&seen, &event, Some(&write)), Ok(()));
    }

    #[test]
    fn without_a_read_of_the_event_s_ttl_before_it_an_expiry_of_an_item_the_application_deleted_stands(
    ) {
        let (seen, event, write) = r344(vec![(1796285472.318, None)]);
        assert!(journaled(&seen, &event, Some(&write)).is_err());
        let (seen, event, mut write) = r344(vec![(1796285472.318, Some(1796285454.0))]);
        write.action = Action::Extend;
        assert!(journaled(&seen, &event, Some(&write)).is_err());
    }
}
