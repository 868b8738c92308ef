//! The integration tests, one module per file beside this one, built as one binary: the crate and
//! its dependencies are linked and instantiated once instead of once per file.
//!
//! `make test` (scripts/run-tests.sh) runs each module in a process of its own, three at a time,
//! all of them against one DynamoDB Local the script starts (each test's tables named apart); a
//! module run by hand starts its own. One module by hand:
//! `cargo test --test suite faults::` (or a test's full name, e.g. `faults::chaos`).

mod support;

mod adoption;
mod backfill;
mod capacity;
mod cli;
mod clock_skew;
mod container;
mod daemon;
mod demo;
mod event_sinks;
mod events;
mod expiry_events;
mod faults;
mod follower;
mod handler;
mod iam_docs;
mod index_failover;
mod lambda_e2e;
mod leader_lease;
mod local_dynamodb;
mod local_testing;
mod mock_sdk;
mod packs;
mod precision;
mod readme;
mod release;
mod safety;
mod soak;
mod stream_esm;
mod stream_follow;
mod stream_indexer;
mod stream_snippets;
mod summary_line;
mod vectors;
