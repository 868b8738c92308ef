//! What a test scripts of a [`MemStore`](super::MemStore)'s calls: faults and the
//! application's changes, by operation and call.

use std::sync::Mutex;
use std::time::Duration;

use ttl_sweeper::store::ErrorKind;

/// One operation of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Query,
    BatchDelete,
    /// The conditional `DeleteItem`.
    Delete,
    Get,
    ReadCheckpoint,
    AdvanceCheckpoint,
    /// The leader lease's `GetItem`.
    ReadLease,
    /// The leader lease's conditional `UpdateItem`.
    WriteLease,
    /// The conditional `UpdateItem` giving the leader lease up.
    ReleaseLease,
    /// A `BatchWriteItem` of expiry index entries (puts and removals).
    WriteEntries,
    /// The `BatchWriteItem` of a stream indexer's report.
    WriteReport,
    /// The `Query` of the stream indexer's reports.
    ReadReports,
    /// The `Query` of archive mode's journal.
    ReadPending,
    /// The `Query` of a sweeper's cursor of packs.
    ReadCursor,
    /// The conditional `PutItem` of the writers' mark of packs.
    MarkPacks,
    /// A page of a parallel `Scan` (backfill, audit).
    Scan,
    /// Backfill's conditional `UpdateItem` of an item's window.
    SetWindow,
    /// Backfill's `DeleteItem` conditional on the ttl read.
    DeleteRead,
    /// Audit's `Query` of an item's entry or pack.
    HasEntry,
}

impl Op {
    pub const ALL: [Op; 19] = [
        Op::Query,
        Op::BatchDelete,
        Op::Delete,
        Op::Get,
        Op::ReadCheckpoint,
        Op::AdvanceCheckpoint,
        Op::ReadLease,
        Op::WriteLease,
        Op::ReleaseLease,
        Op::WriteEntries,
        Op::WriteReport,
        Op::ReadReports,
        Op::ReadPending,
        Op::ReadCursor,
        Op::MarkPacks,
        Op::Scan,
        Op::SetWindow,
        Op::DeleteRead,
        Op::HasEntry,
    ];

    /// The DynamoDB operation's name.
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Query | Op::ReadReports | Op::ReadPending | Op::ReadCursor | Op::HasEntry => {
                "Query"
            }
            Op::Scan => "Scan",
            Op::BatchDelete | Op::WriteEntries | Op::WriteReport => "BatchWriteItem",
            Op::Delete | Op::DeleteRead => "DeleteItem",
            Op::Get => "BatchGetItem",
            Op::MarkPacks => "PutItem",
            Op::ReadCheckpoint | Op::ReadLease => "GetItem",
            Op::AdvanceCheckpoint | Op::WriteLease | Op::ReleaseLease | Op::SetWindow => {
                "UpdateItem"
            }
        }
    }
}

/// Which calls of an operation a fault or a change applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// The n-th call, from 1.
    Call(usize),
    /// The first n calls.
    First(usize),
    Always,
    /// The first call that carries the item with this `id` (once).
    Key(String),
}

impl When {
    pub(super) fn matches(&self, n: usize, id: Option<&str>) -> bool {
        match self {
            When::Call(c) => *c == n,
            When::First(m) => n <= *m,
            When::Always => true,
            When::Key(k) => Some(k.as_str()) == id,
        }
    }
}

/// What happens to a call. Several may apply to one call: a `Delay` and one other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// The call takes this much longer (on top of the operation's delay).
    Delay(Duration),
    /// An error of this kind, the table untouched.
    Fail(ErrorKind),
    /// The call is applied, then answers a transient error: its answer was lost.
    LoseAnswer,
    /// A transient error at once; the `BatchWriteItem`'s deletes land this much later.
    LandLate(Duration),
    /// The call never answers.
    Stall,
    /// The call is served at once and answers this much later (a read's answer then says what
    /// was there when it was served).
    AnswerLate(Duration),
    /// `BatchWriteItem`: the keys are left unprocessed (with `When::Key`, that key only).
    Unprocessed,
    /// `BatchWriteItem`: only the first key is deleted, the others left unprocessed.
    AllButFirstUnprocessed,
    /// `BatchWriteItem`: the first key is left unprocessed and named unlike any key sent.
    RenameUnprocessed,
}

/// What the application does to an item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Writes the item again with this ttl (in the partition of that ttl).
    Put(f64),
    /// Gives the item this ttl if it is still there.
    Extend(f64),
    /// Deletes the item.
    Remove,
}

/// What applies to which calls of which operation.
pub(super) type Script<T> = Mutex<Vec<(Op, When, T)>>;

/// The entries of `list` for `op` that apply to a call (`hit`), taking those that apply once.
pub(super) fn take<T: Clone>(list: &Script<T>, op: Op, hit: impl Fn(&When) -> bool) -> Vec<T> {
    let mut taken = vec![];
    list.lock().unwrap().retain(|(o, when, entry)| {
        let applies = *o == op && hit(when);
        if applies {
            taken.push(entry.clone());
        }
        !(applies && matches!(when, When::Key(_)))
    });
    taken
}
