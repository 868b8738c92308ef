//! The Lambda entry point: configuration and the DynamoDB client are set up once per cold start;
//! each invocation goes to `ttl_sweeper::lambda::invoke` (a sweep of every table), or, for a batch of the table's
//! DynamoDB Streams records, to `ttl_sweeper::lambda::stream::invoke_batch` (the stream indexer),
//! the wall clock held to DynamoDB's.

use std::process::ExitCode;

use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::Value;
use ttl_sweeper::config::{Settings, Threads};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::lambda::stream::{invoke_batch, is_stream_batch};
use ttl_sweeper::lambda::{invoke, time_left};
use ttl_sweeper::store::ServerTime;
use ttl_sweeper::telemetry::{self, LogFormat};

/// mimalloc without transparent huge pages, as in the CLI (`src/bin/ttl-sweeper/main.rs` says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    telemetry::init(LogFormat::Json, "info", true);
    // One thread unless TOKIO_WORKER_THREADS asks for more (config::Threads says why).
    let runtime = Threads::runtime_from_env();
    let Ok(runtime) = runtime.inspect_err(|e| tracing::error!(error = %e, "cannot start")) else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(serve())
}

/// Start-up, then invocations until the runtime API stops.
async fn serve() -> ExitCode {
    // Start-up failures are logged as one clear JSON line; the non-zero exit makes Lambda report
    // an init error, and no invocation runs with a bad configuration.
    let configs = Settings::from_env().validate_tables();
    let Ok(configs) = configs.inspect_err(|e| tracing::error!(error = %e, "invalid configuration"))
    else {
        return ExitCode::FAILURE;
    };
    let wall = || Timestamp::from_datetime(chrono::Utc::now());
    let connected = ttl_sweeper::connect(&configs, wall).await;
    let failed = |e: &_| tracing::error!(error = %e, "start-up check of the table failed");
    let Ok(ttl_sweeper::Connected { tables, clock }) = connected.inspect_err(failed) else {
        return ExitCode::FAILURE;
    };
    for config in &configs {
        tracing::info!(table = %config.target.table_name, index = %config.target.index.name(), mode = %config.options.delete_mode, "ready");
    }
    // The function-wide settings, the same in every table's configuration.
    let settings = configs[0].handler.clone();
    let (tables, settings, clock) = (&tables, &settings, &*clock);
    let handler = service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = Timestamp::from_millis(i64::try_from(event.context.deadline).unwrap_or(0));
        let remaining = time_left(deadline, wall(), clock.server().upper_bound());
        if is_stream_batch(&event.payload) {
            return invoke_batch(tables, &event, clock, Some(remaining)).await;
        }
        invoke(tables, &event, clock, Some(remaining), settings).await
    });
    let stopped = |e: &_| tracing::error!(error = %e, "Lambda runtime stopped");
    match lambda_runtime::run(handler).await.inspect_err(stopped) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
