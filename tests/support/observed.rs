//! The one [`Store`] wrapper of the tests and the benchmark: [`Observed`] forwards every method
//! to the store it wraps and tells its [`Observer`] of each call, before the call reaches that
//! store and with its answer after. A method added to [`Store`] is forwarded here once, for every
//! observer: [`Instrumented`](super::Instrumented)'s recording, the benchmark's in-flight gauge.

use std::future::Future;
use std::ops::{Deref, DerefMut};

use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    ConditionalOutcome, EntryWrite, IndexerReport, Key, LeaseItem, Page, Store, StoreError,
    TableSchema,
};

/// A call of a [`Store`] method, with the arguments an observer looks at.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    QueryExpired { partition: &'a str },
    BatchDelete { keys: &'a [&'a Key] },
    DeleteIfExpired { key: &'a Key },
    GetItems,
    WriteEntries,
    ReadCheckpoint,
    AdvanceCheckpoint,
    ReadLease,
    WriteLease,
    ReleaseLease,
    ClaimIndexTable,
    WriteIndexerReport,
    ReadIndexerReports,
    ReadPending,
    ReadCursor,
    MarkPacks,
}

/// What a call answered, as an observer sees it.
#[derive(Debug, Clone, Copy)]
pub enum Answer<'a> {
    /// `query_expired`'s page.
    Page(&'a Page),
    /// `batch_delete`: the keys left unprocessed; `get_items`: the items found.
    Keys(&'a [Key]),
    /// `delete_if_expired`'s outcome.
    Conditional(ConditionalOutcome),
    /// Any other method's answer.
    Other,
}

/// An answer of a [`Store`] method, as an observer sees it.
trait AsAnswer {
    fn as_answer(&self) -> Answer<'_>;
}

/// Each method's answer, as an observer sees it.
macro_rules! answers {
    ($($answer:ty => |$a:pat_param| $seen:expr),* $(,)?) => {$(
        impl AsAnswer for $answer {
            fn as_answer(&self) -> Answer<'_> {
                let $a = self;
                $seen
            }
        }
    )*};
}

answers! {
    Page => |page| Answer::Page(page),
    Vec<Key> => |keys| Answer::Keys(keys),
    (ConditionalOutcome, Option<Key>) => |(outcome, _)| Answer::Conditional(*outcome),
    Vec<EntryWrite> => |_| Answer::Other,
    Option<Timestamp> => |_| Answer::Other,
    bool => |_| Answer::Other,
    Option<LeaseItem> => |_| Answer::Other,
    () => |_| Answer::Other,
    Vec<IndexerReport> => |_| Answer::Other,
}

/// Told of every call through an [`Observed`] store.
pub trait Observer: Send + Sync + 'static {
    /// What [`Observer::before`] hands over, held until the call ends (or is dropped).
    type Guard: Send;

    /// Before the call reaches the wrapped store.
    fn before(&self, call: Call<'_>) -> impl Future<Output = Self::Guard> + Send;

    /// Once the wrapped store answered (`Err`: with an error): an error returned here is the
    /// call's answer instead, as if the store's answer was lost on its way.
    fn after(
        &self,
        call: Call<'_>,
        answer: Result<Answer<'_>, &StoreError>,
    ) -> Result<(), StoreError> {
        let _ = (call, answer);
        Ok(())
    }
}

/// A [`Store`] that forwards every call to `inner`, telling `observer`. It derefs to its
/// observer, so what the observer records reads as fields of the store.
pub struct Observed<S, O> {
    pub inner: S,
    pub observer: O,
}

impl<S, O> Deref for Observed<S, O> {
    type Target = O;

    fn deref(&self) -> &O {
        &self.observer
    }
}

impl<S, O> DerefMut for Observed<S, O> {
    fn deref_mut(&mut self) -> &mut O {
        &mut self.observer
    }
}

impl<S: Store, O: Observer> Observed<S, O> {
    /// `answer`, the wrapped store's call (a store's call does its work when polled), between
    /// the observer's two looks.
    async fn observe<T>(
        &self,
        call: Call<'_>,
        answer: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError>
    where
        T: AsAnswer,
    {
        let _guard = self.observer.before(call).await;
        let answer = answer.await;
        self.observer
            .after(call, answer.as_ref().map(T::as_answer))?;
        answer
    }
}

/// Each [`Store`] method: the call of `inner`, told to the observer as the [`Call`] after `=>`.
macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty => $call:expr;)*) => {
        impl<S: Store, O: Observer> Store for Observed<S, O> {$(
            async fn $name(&self, $($arg: $ty),*) -> Result<$out, StoreError> {
                self.observe($call, self.inner.$name($($arg),*)).await
            }
        )*}
    };
}

// The key handed to `inner` is moved, so the call is told of a copy.
forward! {
    fn query_expired(schema: &TableSchema, partition: &str, now: Timestamp,
        packs_since: Option<Timestamp>, start: Option<Key>, limit: Option<i32>) -> Page
        => Call::QueryExpired { partition };
    fn batch_delete(schema: &TableSchema, keys: &[&Key]) -> Vec<Key> => Call::BatchDelete { keys };
    fn delete_if_expired(schema: &TableSchema, key: Key, ttl: &str, now: Timestamp,
        return_item: bool) -> (ConditionalOutcome, Option<Key>)
        => Call::DeleteIfExpired { key: &key.clone() };
    fn get_items(schema: &TableSchema, keys: Vec<Key>, ttl_only: bool) -> Vec<Key> => Call::GetItems;
    fn write_entries(schema: &TableSchema, writes: Vec<EntryWrite>) -> Vec<EntryWrite>
        => Call::WriteEntries;
    fn read_checkpoint(table: &str, id: &str) -> Option<Timestamp> => Call::ReadCheckpoint;
    fn advance_checkpoint(table: &str, id: &str, to: Timestamp, at: Timestamp) -> bool
        => Call::AdvanceCheckpoint;
    fn read_lease(table: &str, id: &str) -> Option<LeaseItem> => Call::ReadLease;
    fn write_lease(table: &str, id: &str, lease: &LeaseItem, lapsed_before: Timestamp) -> bool
        => Call::WriteLease;
    fn release_lease(table: &str, id: &str, holder: &str) -> bool => Call::ReleaseLease;
    fn claim_index_table(schema: &TableSchema) -> () => Call::ClaimIndexTable;
    fn write_indexer_report(index_table: &str, report: &IndexerReport) -> ()
        => Call::WriteIndexerReport;
    fn read_indexer_reports(index_table: &str) -> Vec<IndexerReport> => Call::ReadIndexerReports;
    fn read_pending(schema: &TableSchema, due: Timestamp, limit: i32) -> Vec<Key> => Call::ReadPending;
    fn read_cursor(schema: &TableSchema, id: &str) -> Option<Timestamp> => Call::ReadCursor;
    fn mark_packs(schema: &TableSchema, at: Timestamp) -> () => Call::MarkPacks;
}
