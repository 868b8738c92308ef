// TTL for DynamoDB Local in a Jest suite: `ttl-sweeper run --local` beside the tests (items gone
// about a fifth of a second after their ttl), and expireAsOf to fast-forward past a ttl instead
// of waiting for it. Needs the ttl-sweeper binary (on PATH, or TTL_SWEEPER).
const { spawn, execFileSync } = require("node:child_process");

const program = process.env.TTL_SWEEPER || "ttl-sweeper";

// ttl-sweeper pointed at `endpoint`, with DynamoDB Local's dummy credentials and Region.
function env(endpoint) {
  return {
    ...process.env,
    AWS_ENDPOINT_URL: endpoint,
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "local",
    AWS_SECRET_ACCESS_KEY: "local",
  };
}

// Sweeps `table` every 200 ms until stop(); the table may be created after this call.
function startLocalTtl({ endpoint, table }) {
  const args = ["run", "--local", "--every", "200ms", "--table-name", table];
  const child = spawn(program, args, { env: env(endpoint), stdio: ["ignore", "ignore", "inherit"] });
  return {
    // Deletes every item whose ttl is before `at` (epoch seconds), now.
    expireAsOf(at) {
      const instant = new Date(at * 1000).toISOString();
      const args = ["sweep", "--local", "--table-name", table, "--at", instant];
      execFileSync(program, args, { env: env(endpoint), stdio: ["ignore", "ignore", "inherit"] });
    },
    stop() {
      return new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
        child.once("exit", () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill("SIGTERM");
      });
    },
  };
}

module.exports = { startLocalTtl };
