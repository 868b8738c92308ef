//! (c'), archive mode's documented exception (docs/events.md, "Archive"): an `Item Expired` the
//! sink accepted whose chunk never settled it — the sweeper that published it died or its sweep
//! ended (stopped, or the key failed or left) before the key was deleted or the expiry
//! cancelled — and whose item the application changed or deleted before a later sweep settled
//! it. Nothing else is excused here (docs/reliability.md, "The invariants").

use std::collections::HashMap;
use std::fmt::Write as _;

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
    /// Item id -> when a sweeper logged an event of it `expiry event not published` (failed,
    /// or not published before the sweep had to stop).
    pub(super) unpublished: &'a HashMap<String, Vec<f64>>,
    /// When each SIGKILL was sent (wall clock, s).
    pub(super) kills: &'a [f64],
    /// When a sweeper logged leaving keys for the next sweep (a read before publishing failed,
    /// keys left, stopped early), whichever keys.
    pub(super) leaving: &'a [f64],
    /// Item id -> when a sweeper logged it re-read with a new ttl after its expiry was accepted
    /// (`cancelling the expiry`).
    pub(super) cancelling: &'a HashMap<String, Vec<f64>>,
    /// When a sweeper logged that its chunk's read settling the accepted, not deleted items
    /// failed (`could not re-read items whose expiry was accepted but not deleted`).
    pub(super) reread_failed: &'a [f64],
}

/// Whether `event` (not deleted by the sweeper, not cancelled, its item not deleted by the
/// application in its chunk's flight) is the documented exception, and how (the text of the
/// (c') line); else why not. For one of the event's acceptances `p`, all of:
///
/// 1. the chunk's read: the last consistent read of the key before `p` that found it with the
///    event's ttl, so the application's write that changed or removed the original item took
///    effect after it (while the event was being published, or after it was accepted). A read
///    of the change between it and `p` is not the chunk's (a chunk reads nothing between its read
///    and its publish): another sweep's or process's read before publishing, which published
///    nothing (ambiguous, said so);
/// 2. the chunk's end, the earliest of: the first `key not deleted` of the key logged after `p`
///    (its deletes failed), and the end of each process or invocation alive at the chunk's read
///    (the one that published ended: SIGKILL, timeout, the harness's stop; perhaps before `p`,
///    its publish in flight);
/// 3. no delete of the key acknowledged: every `DeleteItem` of it a sweeper sent after `p` was
///    faulted before DynamoDB answered, or lost its answer (held past the client's timeout, or
///    dropped after applying), but one sent once every process or invocation alive at the chunk's
///    read had ended (by another); or (A) the delete answered was refused by its condition and a
///    process or invocation alive at the chunk's read and at that delete then ended by SIGKILL
///    within [`settle_window`] of it, or within that time the key's `expiry event not
///    published` / `key not deleted` was logged (stopped, failed), and no cancellation was
///    accepted: the chunk's end is that process's or invocation's end;
/// 4. the chunk saw no change: every consistent read of the key from `p` to the chunk's end
///    (with a refused delete: to that delete) found the event's ttl (else it owed a
///    cancellation), but for a read after which a sweeper logged the key `cancelling the expiry`
///    and then was killed or logged its event not published within [`settle_window`] (its
///    cancellation never accepted), for one after which a sweeper's settling re-read failed and
///    it logged the key `key not deleted` within that time (the key failed), and for one with no
///    such log (another chunk's read before publishing, of the same process, which runs several
///    at once, or of another process or invocation: it found the change and published nothing;
///    ambiguous, said so);
/// 5. each consistent read after the chunk's end that came before the application's write or
///    found the event's ttl is a later sweep's that left the key (B): no acceptance of the event
///    followed it, and within [`settle_window`] of it the key's `key not deleted` / `expiry event
///    not published` was logged, or a process or invocation alive at the read was killed, or
///    one of them logged keys left (a read before publishing failed, keys left, stopped early).
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
    // Lives (processes, invocations) alive at `t`.
    let alive_at = |t: f64| {
        ends.lives
            .iter()
            .filter(move |(start, end)| *start <= t && *end > t)
    };
    let logged = |from: f64, to: f64| {
        times_of(ends.given_up, item)
            .iter()
            .chain(times_of(ends.unpublished, item))
            .any(|t| *t > from && *t <= to)
    };
    let killed = |end: f64| ends.kills.iter().any(|k| (end - k).abs() <= 1.0);
    let mut why = Vec::new();
    for &p in &event.times {
        // 1. The chunk's read. It found the original, so the application's only write of the key
        // took effect after it, even if sent before its answer came back.
        // With two Lambda environments, reads of the change after the last read of the event's
        // ttl made while both still ran may be the other one's reads before publishing (which
        // published nothing): ambiguous, said so.
        let read = reads
            .iter()
            .filter(|(t, f)| *t < p && *f == Some(ttl))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(read_at, _)) = read else {
            why.push(format!(
                "accepted at {p:.2} with no read of ttl {ttl} before it"
            ));
            continue;
        };
        // A chunk reads nothing between its read and its publish (EXPIRY_EVENTS_ITEM is `auto`
        // here): a read of the change in between is another sweep's, or another process's
        // (one started after a SIGKILL while the killed one's publish was still in flight),
        // whose read before publishing published nothing. Said so.
        let mut ambiguous: Vec<String> = (reads.iter())
            .filter(|(t, f)| *t > read_at && *t < p && *f != Some(ttl))
            .map(|(t, f)| format!("{t:.2}:{}", found(f)))
            .collect();
        // 2. The chunk's end.
        let Some((mut end, mut how, last_alive)) = chunk_end(ends, item, p, read_at) else {
            why.push(format!("accepted at {p:.2}, no end of its chunk seen"));
            continue;
        };
        // 3. No delete acknowledged, or (A) the delete was refused by its condition and the
        // process or invocation that could have sent it ended (SIGKILL), or its sweep logged the
        // key's event not published, before any cancellation was accepted (none was).
        let sent: Vec<&(f64, Option<String>)> = deletes.iter().filter(|(t, _)| *t > p).collect();
        let acked = sent
            .iter()
            .find(|(t, fault)| fault.is_none() && last_alive.is_none_or(|last| *t <= last));
        let mut refused = None;
        if let Some((ta, _)) = acked {
            let ta = *ta;
            let senders: Vec<f64> = alive_at(read_at)
                .filter(|(_, e)| *e > ta)
                .map(|(_, e)| *e)
                .collect();
            let ended = senders
                .iter()
                .copied()
                .filter(|e| {
                    *e <= ta + settle_window() && killed(*e) || logged(ta, ta + settle_window())
                })
                .reduce(f64::min);
            let Some(e) = ended else {
                why.push(format!(
                    "accepted at {p:.2}, its chunk {how}, but a delete of it sent at {ta:.2} was answered (not applied: refused by its condition), and no process or invocation that could have sent it was killed or logged the key's event not published after it (no cancellation was accepted)"
                ));
                continue;
            };
            let by = if killed(e) {
                "SIGKILL"
            } else {
                "its event logged not published"
            };
            how = format!("{how}; its delete sent at {ta:.2} was refused by its condition and the sweeper that could have sent it ended at {e:.2} ({by}) before any cancellation");
            end = end.max(e);
            refused = Some(ta);
        }
        let sent: Vec<String> = sent
            .iter()
            .map(|(t, f)| format!("{t:.2}:{}", f.as_deref().unwrap_or("answered")))
            .collect();
        // 4. The chunk saw no change (with a refused delete: before it; the re-read after it owed
        // the cancellation that was never published), or what it saw it owed a cancellation for
        // and ended first. A read that found a change with no cancellation queued after it may
        // be another chunk's: ambiguous, counted here and said so.
        let until = refused.unwrap_or(end);
        let chunk_reads = reads.iter().filter(|(t, _)| *t > p && *t <= until);
        let mut changed_seen = None;
        let mut owed = Vec::new();
        let mut unread_reads = Vec::new();
        for (t, f) in chunk_reads.clone().filter(|(_, f)| *f != Some(ttl)) {
            let t = *t;
            // A chunk that re-read it after its expiry was accepted logs so as it queues the
            // cancellation: one that then died or stopped before it was accepted is the
            // exception (killed within the window, or the key's event logged not published).
            let by = t + settle_window();
            let cancelling = times_of(ends.cancelling, item)
                .iter()
                .any(|c| *c >= t && *c <= by);
            let cut = alive_at(t).any(|(_, e)| *e <= by && killed(*e)) || logged(t, by);
            // A read that found the change with no cancellation queued after it may be another
            // chunk's read before publishing (a sweeper runs several chunks at once: up to
            // MAX_CONCURRENCY, `run`'s ticks beside its full sweeps; and two Lambda environments
            // side by side), of a listing made before the change: it publishes nothing, not
            // knowing the expiry in flight, and its process may die before the chunk that
            // published settles it (the documented exception). A chunk's own reads after its
            // publish log `cancelling the expiry` when they find a change. Ambiguous: counted.
            // Or the chunk's settling re-read failed and it reported the key not deleted: it
            // stays as it was (docs/events.md, "Archive").
            let unread = ends.reread_failed.iter().any(|l| *l >= t && *l <= by)
                && times_of(ends.given_up, item)
                    .iter()
                    .any(|g| *g >= t && *g <= by);
            if cancelling && cut {
                owed.push(format!("{t:.2}:{}", found(f)));
            } else if unread {
                unread_reads.push(format!("{t:.2}:{}", found(f)));
            } else if !cancelling {
                ambiguous.push(format!("{t:.2}:{}", found(f)));
            } else {
                changed_seen = Some((t, *f));
                break;
            }
        }
        if let Some((t, f)) = changed_seen {
            why.push(format!(
                "accepted at {p:.2}, its chunk {how}, but read {} at {t:.2} before it ended",
                found(&f)
            ));
            continue;
        }
        // 5. No later sweep read it before the change, or (B) each later sweep that did left
        // the key: no acceptance of the event followed its read, and the key's `key not
        // deleted` or `expiry event not published` was logged, or every process or invocation
        // alive at the read ended, before the next read that found the change (or the
        // application's write).
        let later: Vec<&(f64, Option<f64>)> = reads.iter().filter(|(t, _)| *t > end).collect();
        let mut left = Vec::new();
        let mut unexcused = None;
        for &&(t, f) in later
            .iter()
            .filter(|(t, f)| *t < changed || *f == Some(ttl))
        {
            let republished = event.times.iter().any(|a| *a > t);
            // Its sweep left it within the time it had to publish it (else it owed the expiry
            // again): the key logged not deleted or its event not published, or a process or
            // invocation alive at the read killed, or one of them logged keys left.
            let by = t + settle_window();
            let sweep_left = logged(t, by)
                || alive_at(t).any(|(_, e)| *e <= by && killed(*e))
                || ends
                    .leaving
                    .iter()
                    .any(|l| *l > t && *l <= by && alive_at(t).any(|(_, e)| *l <= *e + 1.0));
            if !republished && sweep_left {
                left.push(format!("{t:.2}"));
            } else {
                unexcused = Some((t, f, republished));
                break;
            }
        }
        if let Some((t, f, republished)) = unexcused {
            why.push(format!(
                "accepted at {p:.2}, its chunk {how}, but a later read at {t:.2} found {} before the application's write at {changed:.2}{}",
                found(&f),
                if republished {
                    ""
                } else {
                    ", and no acceptance of the event followed that read, but its sweep neither logged the key given up or keys left nor was killed in the time it had to publish it"
                }
            ));
            continue;
        }
        let when = if changed < p {
            format!("{:.2} s before it was accepted", p - changed)
        } else {
            format!("{:.2} s after it was accepted", changed - p)
        };
        let later: Vec<String> = later
            .iter()
            .map(|(t, f)| format!("{t:.2}:{}", found(f)))
            .collect();
        let mut notes = String::new();
        if refused.is_some() {
            notes.push_str("; [refused delete, sweeper ended]");
        }
        // Each note: its text before and after the times it lists.
        for (times, (before, after)) in [
            (&left, ("a later sweep read it unchanged at", "and left it")),
            (&owed, ("re-read", "after it was accepted, its cancellation queued and not published: the sweeper ended or logged it not published")),
            (&unread_reads, ("read", "after it was accepted, then its chunk's settling re-read failed and it reported the key not deleted")),
            (&ambiguous, ("ambiguous: reads", "found the change, not the chunk's own reads (none between its read and its publish; after it, no sweeper logged the key re-read for a cancellation): another chunk's, sweep's or process's read before publishing")),
        ] {
            if !times.is_empty() {
                let _ = write!(notes, "; [{before} {} {after}]", times.join(" "));
            }
        }
        return Ok(format!(
            "published after a read at {read_at:.2}, accepted at {p:.2}; its chunk {how} with no delete of it applied (deletes sent since: [{}]; {} chunk reads); the application's {action:?} at {changed:.2}, {when}; later reads: [{}]{notes}",
            sent.join(" "),
            chunk_reads.count(),
            later.join(" ")
        ));
    }
    Err(why.join("; "))
}

/// How long after a refused delete its chunk settles the key at most, unless it logs the key's
/// event not published: the re-read of the key (`MAX_RETRIES + 1` attempts, each held at most
/// `DELAY`), then publishing the cancellation ([`super::CRASH_PUBLISH_WINDOW`]). A SIGKILL after
/// that does not excuse a missing cancellation.
fn settle_window() -> f64 {
    (super::MAX_RETRIES as f64 + 1.0) * super::DELAY.as_secs_f64() + super::CRASH_PUBLISH_WINDOW
}

/// `item`'s times in `m`.
fn times_of<'m>(m: &'m HashMap<String, Vec<f64>>, item: &str) -> &'m [f64] {
    m.get(item).map_or(&[][..], Vec::as_slice)
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
