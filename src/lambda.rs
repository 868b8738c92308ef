//! The Lambda edge: what an invocation receives and what it does with it.
//!
//! - [`event`]: the accepted inputs and the sweep instant they ask for, never ahead of the clock.
//! - [`handler`]: one invocation, from event to report, metrics and result.
//! - [`stream`]: the stream indexer's invocations — a batch of the table's DynamoDB Streams
//!   records, answered with the records to deliver again.
//!
//! Tick mode, which keeps one invocation sweeping every second, is the engine's
//! [`crate::engine::ticks`], shared with the long-running `run` command.

pub mod event;
pub mod handler;
pub mod stream;

pub use handler::{handle, handle_tables, invoke, time_left, HandlerError, HandlerSettings};
