//! JSON log lines with the keys of Powertools for AWS Lambda: `level`, `message`, `timestamp`,
//! `service`, and during an invocation `cold_start`, `function_name`, `function_arn`,
//! `function_memory_size`, `function_request_id` and `xray_trace_id`; then the event's fields.
//!
//! The invocation context is process state, set by [`Invocation::begin`] and cleared when its
//! guard drops: an execution environment runs one invocation at a time.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::store::lock;

/// The `service` key when `POWERTOOLS_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE: &str = "ttl-sweeper";

/// The service name: `POWERTOOLS_SERVICE_NAME`, else [`DEFAULT_SERVICE`].
pub fn service_name() -> String {
    std::env::var("POWERTOOLS_SERVICE_NAME")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE.to_owned())
}

/// The invocation running now, if any.
static CURRENT: Mutex<Option<Context>> = Mutex::new(None);

/// Whether the next invocation is this environment's first.
static COLD: AtomicBool = AtomicBool::new(true);

#[derive(Debug, Clone)]
struct Context {
    request_id: String,
    xray_trace_id: Option<String>,
    function_arn: String,
    cold_start: bool,
}

/// The invocation in progress; its context leaves the log lines when this drops.
#[derive(Debug)]
#[must_use = "the invocation's context is cleared when the guard drops"]
pub struct Invocation {
    cold_start: bool,
}

impl Invocation {
    /// Marks the start of the invocation of `context`: its request id, its X-Ray trace header
    /// (Lambda's `Lambda-Runtime-Trace-Id`, also in `_X_AMZN_TRACE_ID`; the `Root=` id is logged)
    /// and the function ARN it was invoked through. The process's first invocation is the cold
    /// start.
    pub fn begin(context: &lambda_runtime::Context) -> Invocation {
        let cold_start = COLD.swap(false, Ordering::SeqCst);
        let header =
            (context.xray_trace_id.clone()).or_else(|| std::env::var("_X_AMZN_TRACE_ID").ok());
        let context = Context {
            request_id: context.request_id.clone(),
            xray_trace_id: header.as_deref().and_then(trace_root),
            function_arn: context.invoked_function_arn.clone(),
            cold_start,
        };
        *lock(&CURRENT) = Some(context);
        Invocation { cold_start }
    }

    /// Whether this is the first invocation of the execution environment.
    pub fn cold_start(&self) -> bool {
        self.cold_start
    }
}

impl Drop for Invocation {
    fn drop(&mut self) {
        *lock(&CURRENT) = None;
    }
}

/// The trace id of an X-Ray trace header, as Powertools logs it:
/// `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=...;Sampled=1` → `1-5759e988-bd86...`.
pub fn trace_root(header: &str) -> Option<String> {
    header
        .split(';')
        .find_map(|part| part.trim().strip_prefix("Root="))
        .filter(|root| !root.is_empty())
        .map(str::to_owned)
}

/// The event formatter: one JSON object per line.
#[derive(Debug, Clone)]
pub struct PowertoolsJson {
    service: String,
    function_name: Option<String>,
    function_memory_size: Option<u64>,
}

impl PowertoolsJson {
    /// The formatter for this process: the service name and the function's name and memory size
    /// from the environment Lambda sets (absent outside Lambda).
    pub fn from_env() -> PowertoolsJson {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        PowertoolsJson {
            service: service_name(),
            function_name: var("AWS_LAMBDA_FUNCTION_NAME"),
            function_memory_size: var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
                .and_then(|v| v.parse().ok()),
        }
    }

    /// The JSON object of one log line: the Powertools keys, then the event's fields (a field
    /// named like a Powertools key is renamed `field_<name>`, so the keys stay trustworthy).
    fn line(
        &self,
        level: &tracing::Level,
        timestamp: &str,
        event: &Event<'_>,
    ) -> Map<String, Value> {
        let mut fields = Map::new();
        event.record(&mut JsonFields(&mut fields));
        let message = fields.remove("message").unwrap_or_else(|| "".into());
        let current = lock(&CURRENT).clone();
        let c = current.as_ref();
        // Every key this formatter owns; one without a value (outside Lambda, between
        // invocations, without a trace) is left out of the line.
        let keys = json!({
            "level": level.as_str(),
            "message": message,
            "timestamp": timestamp,
            "service": self.service,
            "function_name": self.function_name,
            "function_memory_size": self.function_memory_size,
            "cold_start": c.map(|c| c.cold_start),
            "function_request_id": c.map(|c| &c.request_id),
            "function_arn": c.map(|c| &c.function_arn),
            "xray_trace_id": c.and_then(|c| c.xray_trace_id.as_ref()),
        });
        let Value::Object(mut line) = keys else {
            unreachable!("json! of an object literal is an object")
        };
        let mut renamed = Vec::with_capacity(fields.len());
        for (key, value) in fields {
            let taken = line.contains_key(&key);
            renamed.push((if taken { format!("field_{key}") } else { key }, value));
        }
        line.retain(|_, v| !v.is_null());
        line.extend(renamed);
        line
    }
}

impl<S, N> FormatEvent<S, N> for PowertoolsJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let line = self.line(event.metadata().level(), &timestamp, event);
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// Collects an event's fields as JSON values: numbers and booleans as such, the rest as text.
struct JsonFields<'a>(&'a mut Map<String, Value>);

/// `Visit` methods that insert the value as the JSON value of its own type.
macro_rules! record_as_json {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(&mut self, field: &Field, value: $ty) {
            self.0.insert(field.name().into(), value.into());
        }
    )*};
}

impl Visit for JsonFields<'_> {
    record_as_json!(record_f64: f64, record_i64: i64, record_u64: u64);
    record_as_json!(record_bool: bool, record_str: &str);
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::tests::Buf;

    #[test]
    fn trace_root_is_the_root_id_of_the_header() {
        assert_eq!(
            trace_root(
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            )
            .as_deref(),
            Some("1-5759e988-bd862e3fe1be46a994272793")
        );
        assert_eq!(trace_root("Parent=1;Sampled=0"), None);
        assert_eq!(trace_root(""), None);
    }

    /// The context of an invocation with these request id, trace header and function ARN.
    fn invocation(request_id: &str, trace: Option<&str>, arn: &str) -> lambda_runtime::Context {
        let mut context = lambda_runtime::Context::default();
        context.request_id = request_id.into();
        context.xray_trace_id = trace.map(Into::into);
        context.invoked_function_arn = arn.into();
        context
    }

    // One test owns the process-wide invocation state: the cold start happens once.
    #[test]
    fn lines_carry_the_powertools_keys_and_the_invocation_context() {
        let buf = Buf::default();
        let writer = buf.clone();
        let format = PowertoolsJson {
            service: "orders".into(),
            function_name: Some("sweeper".into()),
            function_memory_size: Some(128),
        };
        let subscriber = tracing_subscriber::fmt()
            .event_format(format)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(deleted = 7u64, table = "sessions", level = "x", "before");
            let first = Invocation::begin(&invocation(
                "req-1",
                Some("Root=1-abc-def;Parent=1;Sampled=0"),
                "arn:aws:lambda:us-east-1:1:function:sweeper",
            ));
            assert!(first.cold_start());
            tracing::warn!(lag = 1.5, ok = true, "during");
            drop(first);
            let second = Invocation::begin(&invocation("req-2", None, "arn"));
            assert!(!second.cold_start());
            tracing::error!(error = %"boom", "second");
            drop(second);
        });
        let (text, lines) = buf.json_lines();
        assert_eq!(lines.len(), 3, "{text}");
        let before = &lines[0];
        assert_eq!(before["level"], "INFO");
        assert_eq!(before["message"], "before");
        assert_eq!(before["service"], "orders");
        assert_eq!(before["function_name"], "sweeper");
        assert_eq!(before["function_memory_size"], 128);
        assert_eq!(before["deleted"], 7);
        assert_eq!(before["table"], "sessions");
        assert_eq!(
            before["field_level"], "x",
            "a field does not overwrite a key"
        );
        assert!(before.get("function_request_id").is_none(), "{before}");
        assert!(
            chrono::DateTime::parse_from_rfc3339(before["timestamp"].as_str().unwrap()).is_ok()
        );
        let during = &lines[1];
        assert_eq!(during["level"], "WARN");
        assert_eq!(during["cold_start"], true);
        assert_eq!(during["function_request_id"], "req-1");
        assert_eq!(during["xray_trace_id"], "1-abc-def");
        assert_eq!(during["lag"], 1.5);
        assert_eq!(during["ok"], true);
        let second = &lines[2];
        assert_eq!(second["cold_start"], false);
        assert_eq!(second["function_request_id"], "req-2");
        assert_eq!(second["error"], "boom");
    }
}
