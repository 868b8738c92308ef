//! [`Threads`]: the Tokio runtime the binaries run on, from `TOKIO_WORKER_THREADS`: one thread by
//! default, since a sweep mostly waits on DynamoDB and one thread spends less CPU per delete than
//! two workers (docs/BENCHMARKS.md, section 6); more for a host where one core does not keep up.

use std::num::NonZeroUsize;

use super::ConfigError;

/// The environment variable, Tokio's own name for it.
pub const WORKER_THREADS_VAR: &str = "TOKIO_WORKER_THREADS";

/// Most workers `TOKIO_WORKER_THREADS` may ask for.
pub const MAX_WORKER_THREADS: usize = 256;

const EXPECTED: &str = "a whole number of threads from 1 to 256: 1 (the default) runs the sweeper \
                        on one thread, 2 or more on a multi-threaded runtime with that many workers";

/// Why the binaries' runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `TOKIO_WORKER_THREADS` is not acceptable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The operating system refused what the runtime needs (threads, an I/O driver).
    #[error("cannot start the async runtime: {0}")]
    Start(#[from] std::io::Error),
}

/// The threads the async runtime runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// A current-thread runtime: everything on the thread that calls `block_on`.
    #[default]
    One,
    /// A multi-threaded runtime with this many workers (at least 2).
    Workers(NonZeroUsize),
}

impl Threads {
    /// From the value of `TOKIO_WORKER_THREADS`, if set.
    pub fn parse(value: Option<&str>) -> Result<Threads, ConfigError> {
        let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Threads::One);
        };
        let invalid = || ConfigError::Environment {
            var: WORKER_THREADS_VAR,
            value: text.to_owned(),
            expected: EXPECTED,
        };
        match text.parse::<NonZeroUsize>().map_err(|_| invalid())? {
            n if n.get() == 1 => Ok(Threads::One),
            n if n.get() <= MAX_WORKER_THREADS => Ok(Threads::Workers(n)),
            _ => Err(invalid()),
        }
    }

    /// The runtime `TOKIO_WORKER_THREADS` asks for (unset or empty: [`Threads::One`]): what both
    /// binaries run on.
    pub fn runtime_from_env() -> Result<tokio::runtime::Runtime, RuntimeError> {
        let threads = Threads::parse(std::env::var(WORKER_THREADS_VAR).ok().as_deref())?;
        Ok(threads.builder().build()?)
    }

    /// A runtime builder for these threads, with I/O and time enabled; the caller may add to it
    /// (a hook on each thread's stop, say) before building.
    pub fn builder(self) -> tokio::runtime::Builder {
        let mut builder = match self {
            Threads::One => tokio::runtime::Builder::new_current_thread(),
            Threads::Workers(n) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(n.get());
                b
            }
        };
        builder.enable_all();
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_unless_more_are_asked_for() {
        assert_eq!(Threads::parse(None), Ok(Threads::One));
        assert_eq!(Threads::parse(Some("")), Ok(Threads::One));
        assert_eq!(Threads::parse(Some("1")), Ok(Threads::One));
        assert_eq!(
            Threads::parse(Some(" 4 ")),
            Ok(Threads::Workers(NonZeroUsize::new(4).unwrap()))
        );
        assert_eq!(
            Threads::parse(Some("256")),
            Ok(Threads::Workers(NonZeroUsize::new(256).unwrap()))
        );
    }

    #[test]
    fn the_message_states_the_accepted_range() {
        assert!(EXPECTED.contains(&format!("from 1 to {MAX_WORKER_THREADS}:")));
    }

    #[test]
    fn a_count_that_is_not_one_to_256_is_refused_by_name() {
        for bad in ["0", "257", "-1", "two", "1.5", "99999999999999999999999"] {
            let err = Threads::parse(Some(bad)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("TOKIO_WORKER_THREADS=\"{bad}\""))
                    && err.contains("1 to 256"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_runtime_has_the_threads_asked_for() {
        let one = Threads::One.builder().build().unwrap();
        assert_eq!(one.metrics().num_workers(), 1);
        assert_eq!(
            one.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::CurrentThread
        );
        let three = Threads::parse(Some("3"))
            .unwrap()
            .builder()
            .build()
            .unwrap();
        assert_eq!(three.metrics().num_workers(), 3);
        assert_eq!(
            three.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::MultiThread
        );
    }
}
