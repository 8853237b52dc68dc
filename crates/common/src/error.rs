//! One small set of error codes for every service, and the one place they become gRPC statuses.

use std::fmt;
use std::time::Duration;

use tonic::{Code, Status};

/// What kind of failure an error is, independent of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unauthenticated,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
    Timeout,
    Unimplemented,
    Internal,
}

impl ErrorCode {
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorCode::InvalidArgument => Code::InvalidArgument,
            ErrorCode::NotFound => Code::NotFound,
            ErrorCode::AlreadyExists => Code::AlreadyExists,
            ErrorCode::FailedPrecondition => Code::FailedPrecondition,
            ErrorCode::Unauthenticated => Code::Unauthenticated,
            ErrorCode::PermissionDenied => Code::PermissionDenied,
            ErrorCode::ResourceExhausted => Code::ResourceExhausted,
            ErrorCode::Unavailable => Code::Unavailable,
            ErrorCode::Timeout => Code::DeadlineExceeded,
            ErrorCode::Unimplemented => Code::Unimplemented,
            ErrorCode::Internal => Code::Internal,
        }
    }

    /// The HTTP status the REST facade answers with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument => 400,
            ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists => 409,
            ErrorCode::FailedPrecondition => 412,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied => 403,
            ErrorCode::ResourceExhausted => 429,
            ErrorCode::Unavailable => 503,
            ErrorCode::Timeout => 504,
            ErrorCode::Unimplemented => 501,
            ErrorCode::Internal => 500,
        }
    }

    /// The inverse of [`ErrorCode::grpc_code`], for errors that come back from another service.
    pub fn from_grpc(code: Code) -> Self {
        match code {
            Code::InvalidArgument | Code::OutOfRange => ErrorCode::InvalidArgument,
            Code::NotFound => ErrorCode::NotFound,
            Code::AlreadyExists | Code::Aborted => ErrorCode::AlreadyExists,
            Code::FailedPrecondition => ErrorCode::FailedPrecondition,
            Code::Unauthenticated => ErrorCode::Unauthenticated,
            Code::PermissionDenied => ErrorCode::PermissionDenied,
            Code::ResourceExhausted => ErrorCode::ResourceExhausted,
            Code::Unavailable | Code::Cancelled => ErrorCode::Unavailable,
            Code::DeadlineExceeded => ErrorCode::Timeout,
            Code::Unimplemented => ErrorCode::Unimplemented,
            _ => ErrorCode::Internal,
        }
    }
}

/// Implemented by every service error: how it maps onto an [`ErrorCode`].
pub trait ServiceError: std::error::Error + Send + Sync + 'static {
    fn code(&self) -> ErrorCode;

    /// How long the caller should wait before retrying (rate limits, quotas).
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// A generic error with a code and a message meant for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// INVALID_ARGUMENT naming the field: `field: why`.
    pub fn invalid(field: &str, why: impl fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidArgument, format!("{field}: {why}"))
    }

    /// NOT_FOUND naming the kind and id (its first 128 characters: ids come from callers).
    pub fn not_found(kind: &str, id: &str) -> Self {
        let shown: String = id.chars().take(128).collect();
        let cut = if shown.len() < id.len() { "…" } else { "" };
        Self::new(ErrorCode::NotFound, format!("{kind} {shown:?}{cut} not found"))
    }

    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::PermissionDenied, message)
    }

    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedPrecondition, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// Keeps the code and message of a status returned by another service.
    pub fn from_status(status: &Status) -> Self {
        Self::new(ErrorCode::from_grpc(status.code()), status.message())
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl ServiceError for ApiError {
    fn code(&self) -> ErrorCode {
        self.code
    }

    fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        Self::from_status(&status)
    }
}

/// What every gRPC adapter answers for an error: `?` on a `Result<_, ApiError>` in a tonic
/// handler goes through [`to_status`].
impl From<ApiError> for Status {
    fn from(error: ApiError) -> Self {
        to_status(&error)
    }
}

/// `value` as JSON text, for a column or a record that keeps it. Serialising fails only for
/// values JSON cannot hold (a map with keys that are not strings, a serialiser that refuses):
/// that is an internal error naming `what`, never an empty string stored in the value's place.
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T, what: &str) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|err| ApiError::internal(format!("serialising {what}: {err}")))
}

/// Metadata key carrying the retry delay in seconds on RESOURCE_EXHAUSTED.
pub const RETRY_AFTER_METADATA: &str = "retry-after";

/// The longest message a status carries, in bytes. It travels in a header (`grpc-message`,
/// percent-encoded) and HTTP/2 peers refuse header blocks past a few KiB: a message that
/// echoed a caller's megabyte-long value broke the connection instead of answering.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// `message` cut to [`MAX_STATUS_MESSAGE_BYTES`] at a character boundary, "…" marking a cut.
pub fn bounded_message(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut cut = MAX_STATUS_MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &message[..cut]))
}

/// Turns any service error into a gRPC status. Internal errors are logged with their cause
/// and returned with a generic message: causes may contain connection strings or file paths.
pub fn to_status<E: ServiceError + ?Sized>(error: &E) -> Status {
    let code = error.code();
    let mut status = if code == ErrorCode::Internal {
        tracing::error!(error = %error, source = ?std::error::Error::source(error), "internal error");
        Status::internal("internal error")
    } else {
        Status::new(code.grpc_code(), bounded_message(&error.to_string()).into_owned())
    };
    if let Some(delay) = error.retry_after() {
        let seconds = delay.as_secs().max(1).to_string();
        if let Ok(value) = seconds.parse() {
            status.metadata_mut().insert(RETRY_AFTER_METADATA, value);
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_hide_their_cause() {
        let error = ApiError::internal("connection to postgres://admin:secret@db failed");
        let status = to_status(&error);
        assert_eq!(status.code(), Code::Internal);
        assert_eq!(status.message(), "internal error");
    }

    #[test]
    fn question_mark_in_an_adapter_answers_to_status() {
        fn handler(error: ApiError) -> Result<(), Status> {
            Err(error)?;
            Ok(())
        }
        let status = handler(ApiError::invalid("limit", "must not be negative")).unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "limit: must not be negative");
        let status = handler(ApiError::internal("postgres://admin:secret@db")).unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::Internal, "internal error"));
        let busy = ApiError::new(ErrorCode::ResourceExhausted, "busy").with_retry_after(Duration::from_secs(3));
        let status = handler(busy).unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.metadata().get(RETRY_AFTER_METADATA).unwrap(), "3");
    }

    #[test]
    fn a_value_json_cannot_hold_is_an_error_not_an_empty_string() {
        assert_eq!(to_json(&vec!["a"], "tags").unwrap(), r#"["a"]"#);
        let keyed_by_pairs: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let err = to_json(&keyed_by_pairs, "the pairs").unwrap_err();
        assert_eq!(err.code(), ErrorCode::Internal);
        assert!(err.to_string().contains("the pairs"), "{err}");
    }

    #[test]
    fn invalid_argument_names_the_field() {
        let status = to_status(&ApiError::invalid("memory.importance", "must be 1-5, got 9"));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "memory.importance: must be 1-5, got 9");
    }

    #[test]
    fn messages_are_bounded_however_long_the_input() {
        let long = "预".repeat(100_000);
        let status = to_status(&ApiError::invalid("query", &long));
        assert!(status.message().len() <= MAX_STATUS_MESSAGE_BYTES);
        assert!(status.message().starts_with("query: 预") && status.message().ends_with('…'));
        let missing = ApiError::not_found("artifact", &" ".repeat(100_000));
        assert!(missing.message.len() < 200, "{}", missing.message.len());
    }

    #[test]
    fn retry_after_travels_in_metadata() {
        let error =
            ApiError::new(ErrorCode::ResourceExhausted, "rate limit").with_retry_after(Duration::from_millis(2500));
        let status = to_status(&error);
        assert_eq!(status.metadata().get(RETRY_AFTER_METADATA).unwrap(), "2");
    }

    #[test]
    fn codes_round_trip_through_grpc() {
        for code in [
            ErrorCode::InvalidArgument,
            ErrorCode::NotFound,
            ErrorCode::PermissionDenied,
            ErrorCode::ResourceExhausted,
            ErrorCode::Timeout,
            ErrorCode::Internal,
        ] {
            assert_eq!(ErrorCode::from_grpc(code.grpc_code()), code);
        }
    }
}
