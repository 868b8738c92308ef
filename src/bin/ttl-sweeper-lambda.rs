//! The Lambda entry point: configuration and the DynamoDB client are set up once per cold start;
//! each invocation is handled by `ttl_sweeper::handler::handle`.

use std::time::SystemTime;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use ttl_sweeper::config::Config;
use ttl_sweeper::handler::{handle, HandlerError};
use ttl_sweeper::sweep::SweepReport;
use ttl_sweeper::telemetry::{self, LogFormat, DEFAULT_NAMESPACE};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init(LogFormat::Json, "info", true);
    let config =
        Config::from_env().inspect_err(|e| tracing::error!(error = %e, "invalid configuration"))?;
    let namespace = std::env::var("METRICS_NAMESPACE").unwrap_or_else(|_| DEFAULT_NAMESPACE.into());
    let sweeper = ttl_sweeper::connect(&config)
        .await
        .inspect_err(|e| tracing::error!(error = %e, "start-up check of the table failed"))?;
    tracing::info!(table = %config.table_name, index = %config.index_name, mode = %config.delete_mode, "ready");
    let sweeper = &sweeper;
    let namespace = namespace.as_str();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .ok();
        let result: Result<SweepReport, HandlerError> = handle(
            sweeper,
            &event.payload,
            chrono::Utc::now(),
            remaining,
            namespace,
        )
        .await;
        result
    }))
    .await
}
