//! Adoption tools: putting the sweeper on a table that already holds data, and checking it.
//!
//! - [`scan`]: the parallel Scan driver both tools share.
//! - [`backfill`]: gives every item with a numeric ttl its window attribute, and deletes the ones
//!   already expired (conditionally, by native TTL's rule); resumable.
//! - [`audit`]: what is really in the table — expired items still present, writer bugs.

pub mod audit;
pub mod backfill;
pub mod scan;
