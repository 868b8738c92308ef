//! SDK errors, classified once into [`ErrorKind`]: every retry and stop decision reads the kind,
//! and the SDK error stays attached as the source.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

/// What went wrong talking to DynamoDB, as far as the caller's decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Throttling (`ProvisionedThroughputExceededException`, `ThrottlingException`,
    /// `RequestLimitExceeded`): retry with backoff.
    Throttled,
    /// A 5xx, a timeout or a broken connection: retry with backoff.
    Transient,
    /// A write to a Multi-Region strongly consistent global table refused because another
    /// Region's write to the same item was in progress (`ReplicatedWriteConflictException`, HTTP
    /// 400): nothing was applied; retry with backoff.
    WriteConflict,
    /// A condition expression did not hold: the item was kept.
    ConditionFailed,
    /// The table (or index) does not exist.
    NotFound,
    /// Credentials missing, rejected, or not allowed to do this.
    Auth,
    /// The request was rejected as invalid (wrong attribute types, missing index, ...).
    Validation,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Whether a later attempt of the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::Throttled | ErrorKind::Transient | ErrorKind::WriteConflict
        )
    }
}

/// A failed DynamoDB call: its classification, the operation, the error type and request id
/// DynamoDB gave (for AWS Support), and the cause.
#[derive(Debug, thiserror::Error)]
#[error(
    "{operation} failed ({kind:?}{code}): {message}{request}",
    code = code.as_deref().map(|c| format!(", {c}")).unwrap_or_default(),
    request = request_id.as_deref().map(|r| format!(" (request id {r})")).unwrap_or_default()
)]
pub struct StoreError {
    /// Classification used for retry decisions.
    pub kind: ErrorKind,
    /// The DynamoDB operation, e.g. `BatchWriteItem`.
    pub operation: &'static str,
    /// The AWS error type (`ProvisionedThroughputExceededException`), when the service sent one.
    pub code: Option<String>,
    /// The request id DynamoDB answered with (`x-amzn-requestid`), when it answered.
    pub request_id: Option<String>,
    /// Human-readable detail.
    pub message: String,
    /// The underlying SDK error.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// A store error with no underlying SDK error (e.g. a schema check that failed).
    pub fn new(kind: ErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            operation,
            code: None,
            request_id: None,
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn from_sdk<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = err.code().map(str::to_owned);
        let request_id =
            aws_sdk_dynamodb::operation::RequestId::request_id(&err).map(str::to_owned);
        let kind = classify(&err, code.as_deref(), status);
        // Without a message of the service's: the error and its sources, `: `-separated.
        let message = err.message().map(str::to_owned).unwrap_or_else(|| {
            let chain = std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source());
            chain
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(": ")
        });
        StoreError {
            code,
            request_id,
            source: Some(Box::new(err)),
            ..StoreError::new(kind, operation, message)
        }
    }
}

/// The kind an AWS error code means, when the code alone decides it.
pub(crate) fn classify_code(code: Option<&str>) -> Option<ErrorKind> {
    Some(match code? {
        "ProvisionedThroughputExceededException"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "Throttling" => ErrorKind::Throttled,
        "ConditionalCheckFailedException" => ErrorKind::ConditionFailed,
        "ReplicatedWriteConflictException" => ErrorKind::WriteConflict,
        "ResourceNotFoundException" => ErrorKind::NotFound,
        "UnrecognizedClientException"
        | "AccessDeniedException"
        | "InvalidSignatureException"
        | "MissingAuthenticationToken"
        | "ExpiredTokenException"
        | "IncompleteSignatureException" => ErrorKind::Auth,
        "ValidationException" | "SerializationException" => ErrorKind::Validation,
        "InternalServerError" | "ServiceUnavailable" | "InternalFailure" => ErrorKind::Transient,
        _ => return None,
    })
}

fn classify<E, R>(err: &SdkError<E, R>, code: Option<&str>, status: Option<u16>) -> ErrorKind {
    if let Some(kind) = classify_code(code) {
        return kind;
    }
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            ErrorKind::Transient
        }
        _ => match status {
            Some(s) if s >= 500 => ErrorKind::Transient,
            Some(403) => ErrorKind::Auth,
            _ => ErrorKind::Other,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicated_write_conflict_is_its_own_retryable_kind() {
        let kind = classify_code(Some("ReplicatedWriteConflictException"));
        assert_eq!(kind, Some(ErrorKind::WriteConflict));
        assert!(ErrorKind::WriteConflict.is_retryable());
        // Nothing else is taken for one.
        assert_eq!(
            classify_code(Some("TransactionConflictException")),
            None,
            "a transaction conflict is not a replicated write conflict"
        );
        assert!(!ErrorKind::ConditionFailed.is_retryable());
    }
}
