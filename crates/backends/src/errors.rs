//! How backend errors map onto the common error codes.

use std::time::Duration;

use thinkus_common::error::{ErrorCode, ServiceError};

use crate::blob::BlobError;
use crate::embed::EmbedError;
use crate::llm::LlmError;
use crate::sql::StoreError;
use crate::vector::VectorError;

/// The Retry-After of a write refused because a disk is full: freeing space takes an operator,
/// and clients retrying at once would only add load.
pub const STORAGE_FULL_RETRY_AFTER: Duration = Duration::from_secs(60);

impl ServiceError for StoreError {
    fn code(&self) -> ErrorCode {
        match self {
            StoreError::NotFound(_) => ErrorCode::NotFound,
            StoreError::Conflict(_) | StoreError::AlreadyExists(_) => ErrorCode::AlreadyExists,
            StoreError::Invalid(_) => ErrorCode::InvalidArgument,
            StoreError::Unavailable(_) => ErrorCode::Unavailable,
            StoreError::Full(_) => ErrorCode::ResourceExhausted,
            StoreError::Backend(_) => ErrorCode::Internal,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        matches!(self, StoreError::Full(_)).then_some(STORAGE_FULL_RETRY_AFTER)
    }
}

impl ServiceError for VectorError {
    fn code(&self) -> ErrorCode {
        match self {
            VectorError::Invalid(_) | VectorError::Dimension { .. } => ErrorCode::Internal,
            VectorError::Unavailable(_) => ErrorCode::Unavailable,
            VectorError::Backend(_) => ErrorCode::Internal,
        }
    }
}

impl ServiceError for BlobError {
    fn code(&self) -> ErrorCode {
        match self {
            BlobError::NotFound(_) => ErrorCode::NotFound,
            BlobError::InvalidKey(_) => ErrorCode::Internal,
            BlobError::TooLarge { .. } => ErrorCode::InvalidArgument,
            BlobError::Stream(_) => ErrorCode::InvalidArgument,
            BlobError::Unavailable(_) => ErrorCode::Unavailable,
            BlobError::Full(_) => ErrorCode::ResourceExhausted,
            BlobError::Backend(_) => ErrorCode::Internal,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        matches!(self, BlobError::Full(_)).then_some(STORAGE_FULL_RETRY_AFTER)
    }
}

impl ServiceError for EmbedError {
    fn code(&self) -> ErrorCode {
        match self {
            EmbedError::Unavailable(_) | EmbedError::Timeout => ErrorCode::Unavailable,
            EmbedError::Config(_) | EmbedError::BadResponse(_) | EmbedError::Backend(_) => ErrorCode::Internal,
        }
    }
}

impl ServiceError for LlmError {
    fn code(&self) -> ErrorCode {
        match self {
            LlmError::Unsupported(_) => ErrorCode::FailedPrecondition,
            LlmError::Config(_) | LlmError::Auth(_) => ErrorCode::FailedPrecondition,
            LlmError::RateLimited { .. } => ErrorCode::ResourceExhausted,
            LlmError::Timeout => ErrorCode::Timeout,
            LlmError::Unavailable(_) => ErrorCode::Unavailable,
            LlmError::BadResponse(_) => ErrorCode::Internal,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after } => *retry_after,
            _ => None,
        }
    }
}

macro_rules! into_api_error {
    ($($error:ty),+) => {
        $(
            impl From<$error> for thinkus_common::ApiError {
                fn from(error: $error) -> Self {
                    let mut api = thinkus_common::ApiError::new(error.code(), error.to_string());
                    api.retry_after = error.retry_after();
                    api
                }
            }
        )+
    };
}

into_api_error!(StoreError, VectorError, BlobError, EmbedError, LlmError);
