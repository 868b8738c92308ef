//! What the integration tests (tests/suite.rs) share, and the benchmark with them
//! (benches/sweeper/main.rs mounts this folder as its `support` module).
//!
//! By default the first test that needs a server starts Amazon's DynamoDB Local (installed into
//! `.tools/` by `make test`, or `scripts/dynamodb-local.sh install`) on a free port, reached
//! through 127.0.0.1 only, and the test process stops it by its PID when it exits. Set
//! `DYNAMODB_ENDPOINT` (e.g. `http://127.0.0.1:4567` for dynalite) to use a server you run.
//!
//! `use crate::support::*` brings the everyday helpers, each from the file that holds its kind:
//! - `dynamodb_local`: the local DynamoDB server and SDK clients for it;
//! - `tables`: test tables (the sweeper's GSI, checkpoint and expiry index tables);
//! - `items`: items and keys as the tests build them;
//! - `table_io`: reading and writing a table's items through a client;
//! - `app_writer`: an application that writes its table and remembers what it wrote;
//! - `sweepers`: configurations, stores and sweepers over the test server, and report checks;
//! - `instrumented`: a `Store` wrapper that records what a sweep did, through `observed`: the one
//!   `Store` wrapper, forwarding each call and telling an observer of it;
//! - `processes`: the binaries as child processes, and waiting on them; `logs`: what code run in
//!   the test process writes, read back;
//! - `clocks`: the wall clock as the tests read it.
//!
//! The other modules are named where they are used: `mem_store` (the in-memory store),
//! `fault_proxy`, `runtime_api`, `recorder`, `hook` (an expiry hook recording what it accepts),
//! `esm`, `moto`, `cost`, `capacity` (capacity units counted at a proxy) and `server` (what the local servers share).
#![allow(dead_code, unreachable_pub)]

mod app_writer;
mod clocks;
mod dynamodb_local;
mod instrumented;
mod items;
mod logs;
pub mod observed;
mod processes;
mod sweepers;
mod table_io;
mod tables;

pub mod capacity;
pub mod cost;
pub mod esm;
pub mod fault_proxy;
pub mod hook;
pub mod mem_store;
pub mod mem_stream;
pub mod moto;
pub mod recorder;
pub mod runtime_api;
pub mod server;

pub use app_writer::*;
pub use clocks::*;
pub use dynamodb_local::*;
pub use instrumented::*;
pub use items::*;
pub use logs::JsonLines;
pub use observed::Observed;
pub use processes::*;
pub use server::free_port;
pub use sweepers::*;
pub use table_io::*;
pub use tables::*;
