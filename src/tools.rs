//! Adoption tools: putting the sweeper on a table that already holds data, and checking it.
//!
//! - [`scan`]: the parallel Scan driver both tools share.
//! - [`backfill`]: gives items their window attribute and deletes those already expired.
//! - [`audit`]: what is really in the table — expired items still present, writer bugs.
//! - [`local`]: TTL for a local test server (`sweep --local`, `run --local`): a Scan and a
//!   conditional delete per expired item, as of any instant, on a server its ARNs prove local.

pub mod audit;
pub mod backfill;
pub mod local;
pub mod scan;

#[cfg(test)]
/// For tests: table `t`, keyed by `id` alone, swept through the GSI `i` with the default layout.
pub(crate) fn test_schema() -> crate::store::TableSchema {
    crate::store::TableSchema {
        table_name: "t".into(),
        index: crate::store::Index::Gsi("i".into()),
        key_attributes: vec!["id".into()],
        layout: crate::expiry::Layout::default(),
    }
}
