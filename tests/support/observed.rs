//! The one [`Store`] wrapper of the tests and the benchmark: [`Observed`] forwards every method
//! to the store it wraps and tells its [`Observer`] of each call, before the call reaches that
//! store and with its answer after. A method added to [`Store`] is forwarded here once, for every
//! observer: [`Instrumented`](super::Instrumented)'s recording, the benchmark's in-flight gauge.

use std::future::Future;
use std::ops::{Deref, DerefMut};

use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    ConditionalOutcome, EntryWrite, Key, LeaseItem, Page, Store, StoreError, TableSchema,
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

impl<S: Store, O: Observer> Store for Observed<S, O> {
    async fn query_expired(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        let answer = (self.inner).query_expired(schema, partition, now, start, limit);
        self.observe(Call::QueryExpired { partition }, answer).await
    }

    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        let answer = self.inner.batch_delete(schema, keys);
        self.observe(Call::BatchDelete { keys }, answer).await
    }

    async fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        let answer = (self.inner).delete_if_expired(schema, key.clone(), ttl, now, return_item);
        self.observe(Call::DeleteIfExpired { key: &key }, answer)
            .await
    }

    async fn get_items(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> Result<Vec<Key>, StoreError> {
        self.observe(Call::GetItems, self.inner.get_items(schema, keys, ttl_only))
            .await
    }

    async fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        self.observe(Call::WriteEntries, self.inner.write_entries(schema, writes))
            .await
    }

    async fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.observe(Call::ReadCheckpoint, self.inner.read_checkpoint(table, id))
            .await
    }

    async fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: Timestamp,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let answer = self.inner.advance_checkpoint(table, id, to, at);
        self.observe(Call::AdvanceCheckpoint, answer).await
    }

    async fn read_lease(&self, table: &str, id: &str) -> Result<Option<LeaseItem>, StoreError> {
        self.observe(Call::ReadLease, self.inner.read_lease(table, id))
            .await
    }

    async fn write_lease(
        &self,
        table: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> Result<bool, StoreError> {
        let answer = self.inner.write_lease(table, id, lease, lapsed_before);
        self.observe(Call::WriteLease, answer).await
    }

    async fn release_lease(&self, table: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        let answer = self.inner.release_lease(table, id, holder);
        self.observe(Call::ReleaseLease, answer).await
    }
}
