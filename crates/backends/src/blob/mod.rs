//! The blob store: artifact contents, whole. Two implementations: [`local::LocalBlobStore`]
//! (a folder, the embedded default) and [`s3::S3BlobStore`] (any S3-compatible service through
//! aws-sdk-s3). Keys are relative paths of `[A-Za-z0-9._/-]` segments, never `..`.

pub mod local;
pub mod s3;

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

/// Errors of a blob store.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob {0:?} not found")]
    NotFound(String),
    #[error("invalid blob key {0:?}")]
    InvalidKey(String),
    #[error("content larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the content stream failed: {0}")]
    Stream(String),
    #[error("blob store unavailable: {0}")]
    Unavailable(String),
    /// The store's disk is full (a folder's file system): nothing was written.
    #[error("the blob store's storage is full: {0}")]
    Full(String),
    #[error("blob store error: {0}")]
    Backend(String),
}

/// A stream of content chunks.
pub type ByteStream = BoxStream<'static, Result<Bytes, BlobError>>;

/// A blob store backend.
#[async_trait]
pub trait BlobStore: Send + Sync + Debug {
    /// A short name for logs and metrics ("local", "s3").
    fn name(&self) -> &'static str;

    /// Checks that the store answers (the folder exists and is writable, the bucket exists).
    async fn check(&self) -> Result<(), BlobError>;

    /// Writes a whole blob, replacing any previous one.
    async fn put(&self, key: &str, data: Bytes) -> Result<(), BlobError>;

    /// Writes a blob from a stream of chunks, failing with `TooLarge` as soon as more than
    /// `max_bytes` arrive (nothing is left behind then). Returns the size written.
    async fn put_stream(&self, key: &str, stream: ByteStream, max_bytes: u64) -> Result<u64, BlobError>;

    /// Reads a whole blob.
    async fn get(&self, key: &str) -> Result<Bytes, BlobError>;

    /// Reads bytes `start..end` (end exclusive, clamped to the size).
    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, BlobError>;

    /// Reads a blob as a stream of chunks of about `chunk_size` bytes.
    async fn get_stream(&self, key: &str, chunk_size: usize) -> Result<ByteStream, BlobError>;

    /// The size of a blob, or `None` if it does not exist.
    async fn size(&self, key: &str) -> Result<Option<u64>, BlobError>;

    /// Moves a blob to another key (replacing it).
    async fn rename(&self, from: &str, to: &str) -> Result<(), BlobError>;

    /// Deletes a blob; a missing blob is not an error.
    async fn delete(&self, key: &str) -> Result<(), BlobError>;

    /// Keys under a prefix, sorted.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError>;
}

/// Checks a key: non-empty relative segments of `[A-Za-z0-9._-]`, no `.` or `..` segment.
pub fn check_key(key: &str) -> Result<(), BlobError> {
    let valid = !key.is_empty()
        && key.len() <= 1024
        && key.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if valid {
        Ok(())
    } else {
        Err(BlobError::InvalidKey(key.to_string()))
    }
}

/// The chunk size used when a caller asks for chunks of 0 bytes.
pub(crate) const DEFAULT_CHUNK_SIZE: usize = 64 * 1024;

/// The largest chunk handed out by `get_stream`, so a careless `chunk_size` cannot allocate
/// unbounded memory.
pub(crate) const MAX_CHUNK_SIZE: usize = 64 * 1024 * 1024;

/// Checks a listing prefix: empty, or complete key segments optionally followed by the start of
/// one more segment (`users/u1/`, `users/u1/ab`), so that no prefix can name a path outside the
/// store.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), BlobError> {
    let (folder, partial) = match prefix.rfind('/') {
        Some(slash) => (Some(&prefix[..slash]), &prefix[slash + 1..]),
        None => (None, prefix),
    };
    let folder_ok = folder.is_none_or(|folder| check_key(folder).is_ok());
    let partial_ok = partial
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if folder_ok && partial_ok && prefix.len() <= 1024 {
        Ok(())
    } else {
        Err(BlobError::InvalidKey(prefix.to_string()))
    }
}

/// Clamps a requested chunk size to something allocatable.
pub(crate) fn effective_chunk_size(chunk_size: usize) -> usize {
    if chunk_size == 0 {
        DEFAULT_CHUNK_SIZE
    } else {
        chunk_size.min(MAX_CHUNK_SIZE)
    }
}

/// Turns an error yielded by a caller's content stream into [`BlobError::Stream`].
pub(crate) fn into_stream_error(err: BlobError) -> BlobError {
    match err {
        BlobError::Stream(message) => BlobError::Stream(message),
        other => BlobError::Stream(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_escape() {
        assert!(check_key("users/u1/ab12.bin").is_ok());
        for bad in ["", "/abs", "a//b", "a/../b", "..", "a/./b", "a b", "a\\b", "ü"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
