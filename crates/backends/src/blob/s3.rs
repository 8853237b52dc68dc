//! The blob store in any S3-compatible service (AWS S3, SeaweedFS, MinIO, Ceph RGW…) through
//! aws-sdk-s3.
//!
//! It is named by a URI `s3://bucket/optional/prefix?endpoint=…&region=…&path_style=true`; keys
//! live under the prefix. Credentials come from the standard AWS chain (environment variables,
//! profiles, web identity for Kubernetes IRSA, container and instance metadata) unless
//! `access_key_env=VAR&secret_key_env=VAR` name other environment variables holding static keys.
//!
//! Streams are uploaded as multipart uploads of parts of at least 5 MiB, holding one part in
//! memory at a time; content smaller than one part goes up as a single PutObject. Nothing is
//! visible under the key until the upload completes, and a failed or cancelled upload is
//! aborted. A bucket lifecycle rule `AbortIncompleteMultipartUpload` is still worth having for
//! uploads cut off by a crash, which nothing can abort.

use std::fmt;

use async_trait::async_trait;
use aws_credential_types::Credentials;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream as S3Body;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use super::{BlobError, BlobStore, ByteStream, check_key, check_prefix, effective_chunk_size, into_stream_error};

/// The smallest part S3 accepts in a multipart upload (except the last one).
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

/// The part size used unless [`S3BlobStore::with_part_size`] says otherwise.
pub const DEFAULT_PART_SIZE: usize = 8 * 1024 * 1024;

/// The largest part S3 accepts.
const MAX_PART_SIZE: usize = 5 * 1024 * 1024 * 1024;

/// The most parts one multipart upload may have.
const MAX_PARTS: u64 = 10_000;

/// How many parts of one size an upload sends before doubling the part size.
const PARTS_PER_SIZE: usize = 1_000;

/// The region used when neither the URI nor the AWS configuration names one; S3-compatible
/// services mostly ignore it, but SigV4 needs some region to sign with.
const FALLBACK_REGION: &str = "us-east-1";

/// Where the S3 client gets its credentials.
#[derive(Clone, PartialEq, Eq)]
pub enum S3Credentials {
    /// The standard AWS chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, profiles, web
    /// identity (Kubernetes IRSA), container and instance metadata.
    DefaultChain,
    /// Static keys read, when connecting, from the environment variables with these names.
    Environment {
        access_key_var: String,
        secret_key_var: String,
    },
    /// Static keys given directly.
    Static {
        access_key_id: String,
        secret_access_key: String,
    },
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DefaultChain => f.write_str("DefaultChain"),
            Self::Environment {
                access_key_var,
                secret_key_var,
            } => f
                .debug_struct("Environment")
                .field("access_key_var", access_key_var)
                .field("secret_key_var", secret_key_var)
                .finish(),
            Self::Static { access_key_id, .. } => f
                .debug_struct("Static")
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &"** redacted **")
                .finish(),
        }
    }
}

/// What an [`S3BlobStore`] connects to, as parsed from its URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// The bucket.
    pub bucket: String,
    /// The key prefix without a trailing slash; empty for the whole bucket.
    pub prefix: String,
    /// The service's URL (`http://127.0.0.1:8333`); `None` for AWS itself.
    pub endpoint: Option<String>,
    /// The signing region; `None` for the AWS configuration's, or `us-east-1` without one.
    pub region: Option<String>,
    /// Whether the bucket goes in the path (`host/bucket/key`) rather than the host name, as
    /// most self-hosted services need.
    pub path_style: bool,
    /// Where the credentials come from.
    pub credentials: S3Credentials,
}

impl S3Settings {
    /// Parses `s3://bucket/optional/prefix?endpoint=URL&region=R&path_style=true` with the
    /// optional pair `access_key_env=VAR&secret_key_env=VAR`. Query values may be
    /// percent-encoded. Unknown parameters are refused so that a typo does not go unnoticed.
    pub fn from_uri(uri: &str) -> Result<Self, BlobError> {
        let invalid = |why: String| BlobError::Backend(format!("invalid S3 URI {uri:?}: {why}"));
        let rest = uri
            .strip_prefix("s3://")
            .ok_or_else(|| invalid("it must start with s3://".into()))?;
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = location.split_once('/').unwrap_or((location, ""));
        let valid_bucket = !bucket.is_empty()
            && bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !valid_bucket {
            return Err(invalid(format!("{bucket:?} is not a bucket name")));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() && check_key(prefix).is_err() {
            return Err(invalid(format!(
                "the prefix {prefix:?} must be segments of [A-Za-z0-9._-]"
            )));
        }

        let mut settings = Self {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint: None,
            region: None,
            path_style: false,
            credentials: S3Credentials::DefaultChain,
        };
        let (mut access_key_var, mut secret_key_var) = (None, None);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value =
                percent_decode(value).ok_or_else(|| invalid(format!("{name} is not valid percent-encoded UTF-8")))?;
            match name {
                "endpoint" => {
                    if !(value.starts_with("http://") || value.starts_with("https://")) {
                        return Err(invalid(format!("the endpoint {value:?} must be an http(s) URL")));
                    }
                    settings.endpoint = Some(value);
                }
                "region" if !value.is_empty() => settings.region = Some(value),
                "path_style" => {
                    settings.path_style = match value.as_str() {
                        "true" | "1" | "yes" | "" => true,
                        "false" | "0" | "no" => false,
                        other => return Err(invalid(format!("path_style={other:?} is not a boolean"))),
                    }
                }
                "access_key_env" if !value.is_empty() => access_key_var = Some(value),
                "secret_key_env" if !value.is_empty() => secret_key_var = Some(value),
                other => {
                    return Err(invalid(format!(
                        "unknown or empty parameter {other:?} (known: endpoint, region, path_style, \
                         access_key_env, secret_key_env)"
                    )));
                }
            }
        }
        settings.credentials = match (access_key_var, secret_key_var) {
            (None, None) => S3Credentials::DefaultChain,
            (Some(access_key_var), Some(secret_key_var)) => S3Credentials::Environment {
                access_key_var,
                secret_key_var,
            },
            _ => return Err(invalid("access_key_env and secret_key_env go together".into())),
        };
        Ok(settings)
    }
}

/// A blob store in an S3 bucket.
#[derive(Clone)]
pub struct S3BlobStore {
    client: Client,
    bucket: String,
    /// Empty, or the prefix with a trailing slash.
    prefix: String,
    part_size: usize,
}

impl fmt::Debug for S3BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3BlobStore")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("part_size", &self.part_size)
            .finish_non_exhaustive()
    }
}

impl S3BlobStore {
    /// Connects to the store named by an `s3://` URI (see [`S3Settings::from_uri`]). Nothing is
    /// sent yet: [`BlobStore::check`] tells whether the bucket answers.
    pub async fn connect(uri: &str) -> Result<Self, BlobError> {
        Self::from_settings(S3Settings::from_uri(uri)?).await
    }

    /// Connects with parsed settings.
    pub async fn from_settings(settings: S3Settings) -> Result<Self, BlobError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        match &settings.credentials {
            S3Credentials::DefaultChain => {}
            S3Credentials::Environment {
                access_key_var,
                secret_key_var,
            } => {
                let access_key_id = read_env(access_key_var, "access_key_env")?;
                let secret_access_key = read_env(secret_key_var, "secret_key_env")?;
                loader = loader.credentials_provider(Credentials::new(
                    access_key_id,
                    secret_access_key,
                    None,
                    None,
                    "thinkus-uri-env",
                ));
            }
            S3Credentials::Static {
                access_key_id,
                secret_access_key,
            } => {
                loader = loader.credentials_provider(Credentials::new(
                    access_key_id.clone(),
                    secret_access_key.clone(),
                    None,
                    None,
                    "thinkus-static",
                ));
            }
        }
        let sdk_config = loader.load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&sdk_config).force_path_style(settings.path_style);
        if sdk_config.region().is_none() {
            config = config.region(Region::from_static(FALLBACK_REGION));
        }
        if let Some(endpoint) = &settings.endpoint {
            config = config.endpoint_url(endpoint.clone());
        }
        let client = Client::from_conf(config.build());
        tracing::debug!(
            bucket = %settings.bucket,
            prefix = %settings.prefix,
            endpoint = settings.endpoint.as_deref().unwrap_or("aws"),
            "s3 blob store configured"
        );
        Self::from_client(client, &settings.bucket, &settings.prefix)
    }

    /// Wraps a client built elsewhere; `prefix` is empty or key segments (without a trailing
    /// slash).
    pub fn from_client(client: Client, bucket: &str, prefix: &str) -> Result<Self, BlobError> {
        let prefix = prefix.trim_matches('/');
        let prefix = if prefix.is_empty() {
            String::new()
        } else {
            check_key(prefix)?;
            format!("{prefix}/")
        };
        Ok(Self {
            client,
            bucket: bucket.to_string(),
            prefix,
            part_size: DEFAULT_PART_SIZE,
        })
    }

    /// Sets the multipart part size, clamped to S3's limits (5 MiB to 5 GiB).
    #[must_use]
    pub fn with_part_size(mut self, part_size: usize) -> Self {
        self.part_size = part_size.clamp(MIN_PART_SIZE, MAX_PART_SIZE);
        self
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix, empty or ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The underlying client, for what the trait does not cover (lifecycle rules, audits).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The S3 key of a checked blob key.
    fn object_key(&self, key: &str) -> Result<String, BlobError> {
        check_key(key)?;
        Ok(format!("{}{key}", self.prefix))
    }

    /// The size of part `index` (from 0): the configured size for the first 1,000 parts, then
    /// doubling every 1,000 parts, so that small uploads hold one small part in memory while
    /// S3's 10,000 parts still reach several TiB (about 4.9 TiB from 5 MiB parts, 8 TiB from
    /// 8 MiB ones).
    fn part_size_at(&self, index: usize) -> usize {
        let doublings = (index / PARTS_PER_SIZE).min(16) as u32;
        self.part_size.saturating_mul(1 << doublings).min(MAX_PART_SIZE)
    }

    /// Maps an SDK error about `key` to a [`BlobError`].
    fn sdk_error<E>(&self, err: SdkError<E>, key: &str, action: &str) -> BlobError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|response| response.status().as_u16());
        let subject = if key.is_empty() {
            format!("{action} bucket {}", self.bucket)
        } else {
            format!("{action} {key:?} in bucket {}", self.bucket)
        };
        match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
                return BlobError::Unavailable(format!("{subject}: {}", error_chain(&err)));
            }
            SdkError::ConstructionFailure(_) | SdkError::ResponseError(_) => {
                return BlobError::Backend(format!("{subject}: {}", error_chain(&err)));
            }
            _ => {}
        }
        // The service's own code and message say more than the SDK's wrapping of them.
        let status_text = status.map_or_else(|| "unknown status".to_string(), |status| format!("HTTP {status}"));
        let message = err.message().map(|message| format!(": {message}")).unwrap_or_default();
        let detail = match err.code() {
            Some(code) => format!("{code}{message} ({status_text})"),
            None => format!("{status_text}{message}"),
        };
        match (err.code(), status) {
            (Some("NoSuchBucket"), _) => BlobError::Unavailable(format!("bucket {} does not exist", self.bucket)),
            (Some("NoSuchKey" | "NotFound"), _) | (_, Some(404)) => BlobError::NotFound(key.to_string()),
            (Some("SlowDown" | "ServiceUnavailable" | "InternalError" | "RequestTimeout"), _) | (_, Some(500..)) => {
                BlobError::Unavailable(format!("{subject}: {detail}"))
            }
            _ => BlobError::Backend(format!("{subject}: {detail}")),
        }
    }

    /// Writes a whole object with one PutObject.
    async fn put_object(&self, key: &str, object_key: &str, data: Bytes) -> Result<(), BlobError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key)
            .body(S3Body::from(data))
            .send()
            .await
            .map_err(|err| self.sdk_error(err, key, "writing"))?;
        Ok(())
    }

    /// Starts a multipart upload.
    async fn start_upload(&self, key: &str, object_key: &str) -> Result<MultipartUpload, BlobError> {
        let output = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(object_key)
            .send()
            .await
            .map_err(|err| self.sdk_error(err, key, "starting an upload of"))?;
        let upload_id = output
            .upload_id()
            .ok_or_else(|| BlobError::Backend(format!("the service gave no upload id for {key:?}")))?;
        tracing::debug!(key, upload_id, "s3 multipart upload started");
        Ok(MultipartUpload {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            object_key: object_key.to_string(),
            upload_id: upload_id.to_string(),
            parts: Vec::new(),
            finished: false,
        })
    }

    /// Reads `stream` into parts, uploading each full one, and returns the total size with the
    /// rest that did not fill a part. The multipart upload is started with the first full part.
    async fn feed_parts(
        &self,
        key: &str,
        object_key: &str,
        stream: &mut ByteStream,
        max_bytes: u64,
        upload: &mut Option<MultipartUpload>,
    ) -> Result<(u64, Bytes), BlobError> {
        let part_size =
            |upload: &Option<MultipartUpload>| self.part_size_at(upload.as_ref().map_or(0, |u| u.parts.len()));
        let mut pending = BytesMut::new();
        let mut total: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let mut chunk = chunk.map_err(into_stream_error)?;
            total = total.saturating_add(chunk.len() as u64);
            if total > max_bytes {
                return Err(BlobError::TooLarge { limit: max_bytes });
            }
            // Whole parts inside a large chunk go up without being copied.
            while pending.is_empty() && chunk.len() >= part_size(upload) {
                let part = chunk.split_to(part_size(upload));
                self.upload_part(key, object_key, upload, part).await?;
            }
            pending.extend_from_slice(&chunk);
            while pending.len() >= part_size(upload) {
                let part = pending.split_to(part_size(upload)).freeze();
                self.upload_part(key, object_key, upload, part).await?;
            }
        }
        Ok((total, pending.freeze()))
    }

    /// Uploads one part, starting the multipart upload if it is the first.
    async fn upload_part(
        &self,
        key: &str,
        object_key: &str,
        upload: &mut Option<MultipartUpload>,
        part: Bytes,
    ) -> Result<(), BlobError> {
        let upload = match upload {
            Some(upload) => upload,
            None => upload.insert(self.start_upload(key, object_key).await?),
        };
        upload.send_part(self, key, part).await
    }
}

#[async_trait]
impl BlobStore for S3BlobStore {
    fn name(&self) -> &'static str {
        "s3"
    }

    async fn check(&self) -> Result<(), BlobError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(err) => Err(match self.sdk_error(err, "", "checking") {
                BlobError::NotFound(_) => BlobError::Unavailable(format!("bucket {} does not exist", self.bucket)),
                other => other,
            }),
        }
    }

    async fn put(&self, key: &str, data: Bytes) -> Result<(), BlobError> {
        let object_key = self.object_key(key)?;
        if data.len() <= self.part_size {
            return self.put_object(key, &object_key, data).await;
        }
        let size = data.len() as u64;
        self.put_stream(key, futures::stream::iter([Ok(data)]).boxed(), size)
            .await
            .map(|_| ())
    }

    async fn put_stream(&self, key: &str, mut stream: ByteStream, max_bytes: u64) -> Result<u64, BlobError> {
        let object_key = self.object_key(key)?;
        let mut upload = None;
        let fed = self
            .feed_parts(key, &object_key, &mut stream, max_bytes, &mut upload)
            .await;
        let result = match (fed, upload.as_mut()) {
            (Ok((total, rest)), None) => self.put_object(key, &object_key, rest).await.map(|()| total),
            (Ok((total, rest)), Some(upload)) => {
                let sent = if rest.is_empty() {
                    Ok(())
                } else {
                    upload.send_part(self, key, rest).await
                };
                match sent {
                    Ok(()) => upload.complete(self, key).await.map(|()| total),
                    Err(err) => Err(err),
                }
            }
            (Err(err), _) => Err(err),
        };
        if result.is_err()
            && let Some(upload) = upload.as_mut()
        {
            upload.abort().await;
        }
        result
    }

    async fn get(&self, key: &str) -> Result<Bytes, BlobError> {
        let object_key = self.object_key(key)?;
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
            .map_err(|err| self.sdk_error(err, key, "reading"))?;
        let body = output.body.collect().await.map_err(|err| body_error(key, err))?;
        Ok(body.into_bytes())
    }

    async fn get_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, BlobError> {
        let object_key = self.object_key(key)?;
        // Offsets past i64::MAX are past the end of any object, and some services (SeaweedFS)
        // misread such numbers in a Range header.
        if start >= end || start > i64::MAX as u64 {
            // An empty range still tells a missing blob from an existing one.
            return match self.size(key).await? {
                Some(_) => Ok(Bytes::new()),
                None => Err(BlobError::NotFound(key.to_string())),
            };
        }
        let response = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .range(if end - 1 > i64::MAX as u64 {
                format!("bytes={start}-")
            } else {
                format!("bytes={start}-{}", end - 1)
            })
            .send()
            .await;
        let output = match response {
            Ok(output) => output,
            // 416: the range starts at or past the end, which clamps to nothing.
            Err(err)
                if err.raw_response().map(|response| response.status().as_u16()) == Some(416)
                    || err.code() == Some("InvalidRange") =>
            {
                return Ok(Bytes::new());
            }
            Err(err) => return Err(self.sdk_error(err, key, "reading")),
        };
        let ranged = output.content_range().is_some();
        let data = output
            .body
            .collect()
            .await
            .map_err(|err| body_error(key, err))?
            .into_bytes();
        if ranged {
            Ok(data)
        } else {
            // A service that ignores Range sends the whole object; cut the range out of it.
            let size = data.len() as u64;
            let (from, to) = (start.min(size), end.min(size));
            Ok(data.slice(from as usize..to as usize))
        }
    }

    async fn get_stream(&self, key: &str, chunk_size: usize) -> Result<ByteStream, BlobError> {
        let object_key = self.object_key(key)?;
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
            .map_err(|err| self.sdk_error(err, key, "reading"))?;
        let chunk_size = effective_chunk_size(chunk_size);
        let key = key.to_string();
        let state = (output.body, BytesMut::new(), false, key);
        let stream = futures::stream::try_unfold(state, move |(mut body, mut pending, mut ended, key)| async move {
            // The service's frames have their own sizes; regroup them into chunks of `chunk_size`.
            loop {
                if pending.len() >= chunk_size || (ended && !pending.is_empty()) {
                    let take = chunk_size.min(pending.len());
                    let chunk = pending.split_to(take).freeze();
                    return Ok(Some((chunk, (body, pending, ended, key))));
                }
                if ended {
                    return Ok(None);
                }
                match body.try_next().await.map_err(|err| body_error(&key, err))? {
                    Some(frame) => pending.extend_from_slice(&frame),
                    None => ended = true,
                }
            }
        });
        Ok(stream.boxed())
    }

    async fn size(&self, key: &str) -> Result<Option<u64>, BlobError> {
        let object_key = self.object_key(key)?;
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
        {
            Ok(output) => {
                let length = output
                    .content_length()
                    .ok_or_else(|| BlobError::Backend(format!("the service gave no size for {key:?}")))?;
                u64::try_from(length)
                    .map(Some)
                    .map_err(|_| BlobError::Backend(format!("the service gave a negative size for {key:?}")))
            }
            Err(err) => match self.sdk_error(err, key, "inspecting") {
                BlobError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), BlobError> {
        let source = self.object_key(from)?;
        let target = self.object_key(to)?;
        if source == target {
            // S3 refuses to copy an object onto itself, and deleting after it would lose it.
            return match self.size(from).await? {
                Some(_) => Ok(()),
                None => Err(BlobError::NotFound(from.to_string())),
            };
        }
        // Keys are limited to [A-Za-z0-9._/-], which needs no URL encoding in the copy source.
        self.client
            .copy_object()
            .bucket(&self.bucket)
            .key(&target)
            .copy_source(format!("{}/{source}", self.bucket))
            .send()
            .await
            .map_err(|err| self.sdk_error(err, from, "copying"))?;
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(&source)
            .send()
            .await
            .map_err(|err| self.sdk_error(err, from, "deleting the renamed"))?;
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), BlobError> {
        let object_key = self.object_key(key)?;
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&object_key)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(err) => match self.sdk_error(err, key, "deleting") {
                BlobError::NotFound(_) => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        check_prefix(prefix)?;
        let full_prefix = format!("{}{prefix}", self.prefix);
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .set_prefix((!full_prefix.is_empty()).then_some(full_prefix))
            .into_paginator()
            .send();
        let mut keys = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|err| self.sdk_error(err, prefix, "listing"))?;
            let found = page
                .contents()
                .iter()
                .filter_map(|object| object.key()?.strip_prefix(&self.prefix))
                // Objects written by other tools (folder markers like `a/`) are not blobs.
                .filter(|key| check_key(key).is_ok())
                .map(str::to_string);
            keys.extend(found);
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}

/// A multipart upload in progress. Dropping it unfinished (a cancelled `put_stream`) aborts it
/// in the background so the service frees the parts.
struct MultipartUpload {
    client: Client,
    bucket: String,
    object_key: String,
    upload_id: String,
    parts: Vec<CompletedPart>,
    finished: bool,
}

impl MultipartUpload {
    /// Uploads the next part.
    async fn send_part(&mut self, store: &S3BlobStore, key: &str, part: Bytes) -> Result<(), BlobError> {
        let number = i32::try_from(self.parts.len() + 1)
            .ok()
            .filter(|number| u64::from(number.unsigned_abs()) <= MAX_PARTS)
            .ok_or_else(|| BlobError::Backend(format!("{key:?} needs more than {MAX_PARTS} parts")))?;
        let output = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.object_key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .body(S3Body::from(part))
            .send()
            .await
            .map_err(|err| store.sdk_error(err, key, "uploading a part of"))?;
        let e_tag = output
            .e_tag()
            .ok_or_else(|| BlobError::Backend(format!("the service gave no ETag for part {number} of {key:?}")))?;
        self.parts
            .push(CompletedPart::builder().e_tag(e_tag).part_number(number).build());
        Ok(())
    }

    /// Completes the upload, which makes the object appear whole.
    async fn complete(&mut self, store: &S3BlobStore, key: &str) -> Result<(), BlobError> {
        let parts = CompletedMultipartUpload::builder()
            .set_parts(Some(self.parts.clone()))
            .build();
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.object_key)
            .upload_id(&self.upload_id)
            .multipart_upload(parts)
            .send()
            .await
            .map_err(|err| store.sdk_error(err, key, "completing the upload of"))?;
        self.finished = true;
        tracing::debug!(key, parts = self.parts.len(), "s3 multipart upload completed");
        Ok(())
    }

    /// Aborts the upload; a failure is only logged, as the caller is already reporting an error.
    async fn abort(&mut self) {
        self.finished = true;
        if let Err(err) = abort_upload(&self.client, &self.bucket, &self.object_key, &self.upload_id).await {
            tracing::warn!(key = %self.object_key, upload_id = %self.upload_id, error = %error_chain(&err), "cannot abort an s3 multipart upload");
        }
    }
}

impl Drop for MultipartUpload {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.object_key, upload_id = %self.upload_id, "an s3 multipart upload was left open");
            return;
        };
        let client = self.client.clone();
        let (bucket, object_key, upload_id) = (self.bucket.clone(), self.object_key.clone(), self.upload_id.clone());
        runtime.spawn(async move {
            if let Err(err) = abort_upload(&client, &bucket, &object_key, &upload_id).await {
                tracing::warn!(key = %object_key, upload_id = %upload_id, error = %error_chain(&err), "cannot abort a cancelled s3 multipart upload");
            }
        });
    }
}

async fn abort_upload(
    client: &Client,
    bucket: &str,
    object_key: &str,
    upload_id: &str,
) -> Result<(), SdkError<aws_sdk_s3::operation::abort_multipart_upload::AbortMultipartUploadError>> {
    client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(object_key)
        .upload_id(upload_id)
        .send()
        .await
        .map(|_| ())
}

/// Maps a failure while receiving a body: the connection broke mid-way.
fn body_error(key: &str, err: aws_sdk_s3::primitives::ByteStreamError) -> BlobError {
    BlobError::Unavailable(format!("reading {key:?}: {}", error_chain(&err)))
}

/// An error and its sources as one line, without the SDK's debug dump of the raw response.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // Wrappers often repeat their source's text; keep the line readable.
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

/// Reads an environment variable named in the URI, naming the parameter (never the value) when
/// it is missing.
fn read_env(name: &str, parameter: &str) -> Result<String, BlobError> {
    std::env::var(name).map_err(|_| {
        BlobError::Backend(format!(
            "the environment variable {name} named by {parameter} is not set or not UTF-8"
        ))
    })
}

/// Decodes `%XX` escapes; `None` for a broken escape or a result that is not UTF-8.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse() {
        let settings = S3Settings::from_uri(
            "s3://thinkus-test/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A8333&region=eu-west-1&path_style=true",
        )
        .expect("valid uri");
        assert_eq!(
            settings,
            S3Settings {
                bucket: "thinkus-test".into(),
                prefix: "a/b".into(),
                endpoint: Some("http://127.0.0.1:8333".into()),
                region: Some("eu-west-1".into()),
                path_style: true,
                credentials: S3Credentials::DefaultChain,
            }
        );

        let settings = S3Settings::from_uri("s3://b?access_key_env=MY_AK&secret_key_env=MY_SK").expect("valid uri");
        assert_eq!(settings.prefix, "");
        assert!(!settings.path_style);
        assert_eq!(
            settings.credentials,
            S3Credentials::Environment {
                access_key_var: "MY_AK".into(),
                secret_key_var: "MY_SK".into()
            }
        );
    }

    #[test]
    fn bad_uris_are_refused() {
        for bad in [
            "http://b",
            "s3://",
            "s3:///prefix",
            "s3://b/../x",
            "s3://b/a//c",
            "s3://b?endpoint=ftp://x",
            "s3://b?path_style=maybe",
            "s3://b?acces_key_env=X",
            "s3://b?access_key_env=X",
            "s3://b?region=%zz",
        ] {
            let result = S3Settings::from_uri(bad);
            assert!(
                matches!(result, Err(BlobError::Backend(ref message)) if message.contains("invalid S3 URI")),
                "{bad:?} should be refused, got {result:?}"
            );
        }
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let credentials = S3Credentials::Static {
            access_key_id: "AKID".into(),
            secret_access_key: "very-secret".into(),
        };
        let shown = format!("{credentials:?}");
        assert!(shown.contains("AKID") && !shown.contains("very-secret"), "{shown}");
    }

    #[tokio::test]
    async fn a_missing_environment_variable_is_named() {
        let uri = "s3://b?access_key_env=THINKUS_SURELY_UNSET_AK_VAR&secret_key_env=THINKUS_SURELY_UNSET_SK_VAR";
        let err = S3BlobStore::connect(uri).await.expect_err("the variable is not set");
        assert!(err.to_string().contains("THINKUS_SURELY_UNSET_AK_VAR"), "{err}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unavailable() {
        // A port just released by the operating system has no listener, so connecting is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let settings = S3Settings {
            bucket: "b".into(),
            prefix: String::new(),
            endpoint: Some(format!("http://127.0.0.1:{port}")),
            region: Some("us-east-1".into()),
            path_style: true,
            credentials: S3Credentials::Static {
                access_key_id: "a".into(),
                secret_access_key: "b".into(),
            },
        };
        let store = S3BlobStore::from_settings(settings).await.expect("configured");
        let err = store.check().await.expect_err("nothing listens on the port");
        assert!(matches!(err, BlobError::Unavailable(_)), "{err:?}");
        let err = store.get("k").await.expect_err("nothing listens on the port");
        assert!(matches!(err, BlobError::Unavailable(_)), "{err:?}");
    }

    #[test]
    fn parts_stay_within_the_part_count() {
        let store = S3BlobStore {
            client: Client::from_conf(
                aws_sdk_s3::Config::builder()
                    .behavior_version(BehaviorVersion::latest())
                    .region(Region::from_static(FALLBACK_REGION))
                    .build(),
            ),
            bucket: "b".into(),
            prefix: String::new(),
            part_size: DEFAULT_PART_SIZE,
        };
        assert_eq!(store.part_size_at(0), DEFAULT_PART_SIZE);
        assert_eq!(store.part_size_at(999), DEFAULT_PART_SIZE);
        assert_eq!(store.part_size_at(1000), 2 * DEFAULT_PART_SIZE);
        assert_eq!(store.part_size_at(usize::MAX), MAX_PART_SIZE);

        let smallest = store.clone().with_part_size(1);
        assert_eq!(smallest.part_size, MIN_PART_SIZE);
        let capacity: u64 = (0..MAX_PARTS as usize)
            .map(|index| smallest.part_size_at(index) as u64)
            .sum();
        assert!(
            capacity > 4 << 40,
            "10,000 parts from 5 MiB should hold more than 4 TiB, hold {capacity}"
        );
    }
}
