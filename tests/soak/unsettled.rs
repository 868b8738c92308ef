//! (c'), archive mode's documented exception (docs/events.md, "Archive"): an `Item Expired` the
//! sink accepted whose chunk never settled it — the sweeper that published it ended, or gave
//! the key up with its deletes failed, before any delete of the key was acknowledged — and whose
//! item the application changed or deleted after the read the event rests on and before any
//! later sweep read the key. Nothing else is excused here (docs/reliability.md, "The
//! invariants").

use std::collections::HashMap;

use super::{Accepted, Action, Seen, Write};

/// When the sweepers ended what they were doing, as seen from outside.
pub(super) struct Ends<'a> {
    /// Each sweeper process's life (`run`: from its start to its SIGKILL, exit or SIGTERM) or
    /// each Lambda invocation's (from `/next` to its answer, timeout or SIGKILL): wall clock, s.
    pub(super) lives: &'a [(f64, f64)],
    /// Item id -> when a sweeper logged it `key not deleted` (its chunk gave it up, after its
    /// deletes failed and its re-read found it unchanged, or could not read it).
    pub(super) given_up: &'a HashMap<String, Vec<f64>>,
    /// Item id -> each `DeleteItem` of it a sweeper sent, as the fault proxy saw it: when it
    /// arrived, and the fault injected (`None`: passed on, its answer — applied, or refused by
    /// its condition — going back to the sweeper: acknowledged).
    pub(super) deletes: &'a HashMap<String, Vec<(f64, Option<String>)>>,
}

/// Whether `event` (not deleted by the sweeper, not cancelled, its item not deleted by the
/// application in its chunk's flight) is the documented exception, and how (the text of the
/// (c') line); else why not. For one of the event's acceptances `p`, all of:
///
/// 1. the chunk's read: the last consistent read of the key before `p` found it with the event's
///    ttl, so the application's write that changed or removed the original item took effect
///    after it (while the event was being published, or after it was accepted);
/// 2. the chunk's end, the earliest of: the first `key not deleted` of the key logged after `p`
///    (its deletes failed), and the end of each process or invocation alive at the chunk's read
///    (the one that published ended: SIGKILL, timeout, the harness's stop; perhaps before `p`,
///    its publish in flight);
/// 3. no delete of the key acknowledged: every `DeleteItem` of it a sweeper sent after `p` was
///    faulted before DynamoDB answered, or lost its answer (held past the client's timeout, or
///    dropped after applying), but one sent once every process or invocation alive at the chunk's
///    read had ended (by another);
/// 4. the chunk saw no change: every consistent read of the key from `p` to the chunk's end found
///    the event's ttl (else it owed a cancellation);
/// 5. no later sweep read it before the change: no consistent read after the chunk's end came
///    before the application's write or found the event's ttl.
pub(super) fn check(
    seen: &Seen,
    event: &Accepted,
    write: Option<&Write>,
    ends: &Ends,
) -> Result<String, String> {
    let changed = write
        .filter(|w| w.found_original)
        .and_then(|w| match w.action {
            Action::Extend => Some((w.action, w.started)),
            _ => w.app_delete.map(|(sent, _)| (w.action, sent)),
        });
    let Some((action, changed)) = changed else {
        return Err("the application neither changed nor deleted it".into());
    };
    let item = event.item.as_str();
    let reads = seen.reads.get(item).map_or(&[][..], Vec::as_slice);
    let deletes = ends.deletes.get(item).map_or(&[][..], Vec::as_slice);
    let ttl = event.ttl;
    let found = |f: &Option<f64>| f.map_or("nothing".into(), |f| format!("ttl {f}"));
    let mut why = Vec::new();
    for &p in &event.times {
        // 1. The chunk's read. It found the original, so the application's only write of the key
        // took effect after it, even if sent before its answer came back.
        let read = reads
            .iter()
            .filter(|(t, _)| *t < p)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let read_at = match read {
            Some((t, f)) if *f == Some(ttl) => *t,
            _ => {
                why.push(format!(
                    "accepted at {p:.2} with no read of ttl {ttl} just before"
                ));
                continue;
            }
        };
        // 2. The chunk's end.
        let Some((end, how, last_alive)) = chunk_end(ends, item, p, read_at) else {
            why.push(format!("accepted at {p:.2}, no end of its chunk seen"));
            continue;
        };
        // 3. No delete acknowledged.
        let sent: Vec<&(f64, Option<String>)> = deletes.iter().filter(|(t, _)| *t > p).collect();
        let acked = sent
            .iter()
            .find(|(t, fault)| fault.is_none() && last_alive.is_none_or(|last| *t <= last));
        if let Some((t, _)) = acked {
            why.push(format!(
                "accepted at {p:.2}, its chunk {how}, but a delete of it sent at {t:.2} was answered (not applied: refused by its condition), and no cancellation was accepted"
            ));
            continue;
        }
        let sent: Vec<String> = sent
            .iter()
            .map(|(t, f)| format!("{t:.2}:{}", f.as_deref().unwrap_or("answered")))
            .collect();
        // 4. The chunk saw no change.
        let chunk_reads = reads.iter().filter(|(t, _)| *t > p && *t <= end);
        if let Some((t, f)) = chunk_reads.clone().find(|(_, f)| *f != Some(ttl)) {
            why.push(format!(
                "accepted at {p:.2}, its chunk {how}, but read {} at {t:.2} before it ended",
                found(f)
            ));
            continue;
        }
        // 5. No later sweep read it before the change.
        let later = reads.iter().filter(|(t, _)| *t > end);
        if let Some((t, f)) = later.clone().find(|(t, f)| *t < changed || *f == Some(ttl)) {
            why.push(format!(
                "accepted at {p:.2}, its chunk {how}, but a later read at {t:.2} found {} before the application's write at {changed:.2}{}",
                found(f),
                if event.times.iter().any(|a| a > t) {
                    ""
                } else {
                    ", and no acceptance of the event followed that read (its sweep did not publish it again: stopped first, its publish failed, or killed)"
                }
            ));
            continue;
        }
        let when = if changed < p {
            format!("{:.2} s before it was accepted", p - changed)
        } else {
            format!("{:.2} s after it was accepted", changed - p)
        };
        let later: Vec<String> = later.map(|(t, f)| format!("{t:.2}:{}", found(f))).collect();
        return Ok(format!(
            "published after a read at {read_at:.2}, accepted at {p:.2}; its chunk {how} with no delete of it acknowledged (deletes sent since: [{}]; {} chunk reads, all ttl {ttl}); the application's {action:?} at {changed:.2}, {when}; no later read before it (later: [{}])",
            sent.join(" "),
            chunk_reads.count(),
            later.join(" ")
        ));
    }
    Err(why.join("; "))
}

/// The end of the chunk that published `item`'s event accepted at `p` after its read at
/// `read_at` (rule 2 of [`check`]): when, how, and — if it ended with its process — when the last
/// process or invocation alive at the read ended (with two Lambda environments either may have
/// published; a delete answered before the last of them ended may have been the publisher's).
/// A `key not deleted` is logged as the chunk's outcome is folded, at most that late.
pub(super) fn chunk_end(
    ends: &Ends,
    item: &str,
    p: f64,
    read_at: f64,
) -> Option<(f64, String, Option<f64>)> {
    let given_up = ends.given_up.get(item).map_or(&[][..], Vec::as_slice);
    let gave_up = given_up.iter().copied().filter(|t| *t > p).reduce(f64::min);
    // The publisher was alive at the chunk's read; it may have died before the sink's answer.
    let alive: Vec<f64> = ends
        .lives
        .iter()
        .filter(|(start, end)| *start <= read_at && *end > read_at)
        .map(|(_, end)| *end)
        .collect();
    let ended = alive.iter().copied().reduce(f64::min);
    let last = alive.iter().copied().reduce(f64::max);
    match (gave_up, ended) {
        (Some(g), e) if e.is_none_or(|e| g <= e) => Some((
            g,
            format!("gave the key up at {g:.2} (`key not deleted`)"),
            None,
        )),
        (_, Some(e)) if e < p => Some((
            e,
            format!("ended with a sweeper alive at its read, at {e:.2}, its publish in flight"),
            last,
        )),
        (_, Some(e)) => Some((
            e,
            format!("ended with a sweeper alive at its read, at {e:.2}"),
            last,
        )),
        _ => None,
    }
}
