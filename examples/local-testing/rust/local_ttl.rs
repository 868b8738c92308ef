//! TTL for DynamoDB Local in a Rust test suite: `ttl-sweeper run --local` beside the tests (items
//! gone about a fifth of a second after their ttl), and `expire_as_of` to fast-forward past a
//! ttl instead of waiting for it. Needs the `ttl-sweeper` binary (on PATH, or `TTL_SWEEPER`).

use std::process::{Child, Command, Stdio};

/// A `ttl-sweeper run --local` of one table, stopped when dropped.
pub struct LocalTtl {
    child: Child,
    program: String,
    endpoint: String,
    table: String,
}

impl LocalTtl {
    /// Sweeps `table` on the DynamoDB Local at `endpoint` every 200 ms. The table may be
    /// created after this call: the sweeper waits for it.
    pub fn start(endpoint: &str, table: &str) -> std::io::Result<Self> {
        let program = std::env::var("TTL_SWEEPER").unwrap_or_else(|_| "ttl-sweeper".into());
        Self::start_with(&program, endpoint, table)
    }

    /// [`LocalTtl::start`] with the `ttl-sweeper` binary at `program`.
    pub fn start_with(program: &str, endpoint: &str, table: &str) -> std::io::Result<Self> {
        let mut run = sweeper(program, endpoint);
        run.args(["run", "--local", "--every", "200ms", "--table-name", table]);
        Ok(LocalTtl {
            child: run.stdout(Stdio::null()).spawn()?,
            program: program.to_owned(),
            endpoint: endpoint.to_owned(),
            table: table.to_owned(),
        })
    }

    /// Deletes every item whose ttl is before `at` (epoch seconds), now: the suite's clock
    /// moved forward for this table.
    pub fn expire_as_of(&self, at: i64) -> std::io::Result<()> {
        let at = chrono::DateTime::from_timestamp(at, 0).expect("a valid instant");
        let mut sweep = sweeper(&self.program, &self.endpoint);
        sweep.args(["sweep", "--local", "--table-name", &self.table]);
        let status = sweep
            .args(["--at", &at.to_rfc3339()])
            .stdout(Stdio::null())
            .status()?;
        match status.success() {
            true => Ok(()),
            false => Err(std::io::Error::other(format!(
                "ttl-sweeper sweep: {status}"
            ))),
        }
    }
}

impl Drop for LocalTtl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `program` (`ttl-sweeper`) pointed at `endpoint`, with DynamoDB Local's dummy credentials and Region.
fn sweeper(program: &str, endpoint: &str) -> Command {
    let mut command = Command::new(program);
    command
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local");
    command
}
