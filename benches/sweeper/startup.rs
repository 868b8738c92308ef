//! Section 3 of docs/BENCHMARKS.md, "Start-up and memory": the release Lambda binary started
//! against the in-process fake Lambda Runtime API and DynamoDB endpoint (`fake`), timed to its
//! first request, and its peak RSS after one invocation.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::fake;
use crate::support::*;
use crate::{median, vm_hwm_kib, Scale};

pub struct Startup {
    first_request_ms: Vec<f64>,
    peak_rss_kib: Vec<i64>,
    swept: u64,
    binary: String,
}

pub async fn startup_and_memory(s: &Scale) -> Startup {
    let binary = crate::daemon::release_binary("ttl-sweeper-lambda");
    let per_window = 6_250; // 16 windows (lookback 15): 100,000 items per invocation
    let mut first = Vec::new();
    let mut rss = Vec::new();
    let mut swept = 0;
    for _ in 0..s.startup_runs {
        let port = free_port();
        let shared = fake::Shared::default();
        let server = tokio::spawn(fake::serve(port, per_window, shared.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        *shared.started.lock().unwrap() = Some(started);
        // Reaped below with waitpid, after its peak RSS is read.
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new(&binary)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
            .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "b")
            .env("AWS_SECRET_ACCESS_KEY", "b")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("TABLE_NAME", "fake")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(120);
        while shared.responses.lock().unwrap().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(at) = *shared.first_request.lock().unwrap() {
            first.push(at.duration_since(started).as_secs_f64() * 1000.0);
        }
        if let Some(resp) = shared.responses.lock().unwrap().first() {
            let v: serde_json::Value = serde_json::from_str(resp).unwrap_or_default();
            swept = v["items_deleted"].as_u64().unwrap_or(0);
        }
        // Peak RSS of the function's own address space: VmHWM, read before stopping it.
        // (wait4's ru_maxrss is not used: Linux carries the parent's high-water mark across
        // fork and exec, so it would report the benchmark's own memory.)
        if let Some(kib) = vm_hwm_kib(pid) {
            rss.push(kib);
        }
        // SAFETY: stop and reap the child we started.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        server.abort();
    }
    Startup {
        first_request_ms: first,
        peak_rss_kib: rss,
        swept,
        binary: binary
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&binary)
            .display()
            .to_string(),
    }
}

/// Section 3: the start-up and peak memory table.
pub fn render(d: &mut String, st: &Startup) {
    let _ = writeln!(d, "## 3. Start-up and memory\n");
    let _ = writeln!(d, "`{}` (x86_64 here; arm64 is the same code) started {} times against a fake Lambda Runtime API and DynamoDB endpoint. *Start-up*: from `spawn` to the first DynamoDB request. *Peak RSS*: `VmHWM` after one invocation that swept {} (fake) items.\n", st.binary, st.first_request_ms.len(), st.swept);
    crate::table_head(d, "| measure | median | min | max |");
    let f = &st.first_request_ms;
    let _ = writeln!(
        d,
        "| process start → first request | {:.1} ms | {:.1} ms | {:.1} ms |",
        median(f),
        f.iter().copied().fold(f64::INFINITY, f64::min),
        f.iter().copied().fold(0.0, f64::max)
    );
    let r: Vec<f64> = st.peak_rss_kib.iter().map(|k| *k as f64 / 1024.0).collect();
    let _ = writeln!(
        d,
        "| peak RSS | {:.1} MiB | {:.1} MiB | {:.1} MiB |\n",
        median(&r),
        r.iter().copied().fold(f64::INFINITY, f64::min),
        r.iter().copied().fold(0.0, f64::max)
    );
}
