//! [`ArtifactClient`]: the artifact service in this process, or over gRPC.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::future::BoxFuture;
use thinkus_common::ApiError;
use thinkus_common::convert::{scope_to_proto, timestamp_opt};
use thinkus_common::grpc::ClientChannel;
use thinkus_common::model::{Language, Owner, Scope};
use thinkus_proto::artifact as pb;
use thinkus_proto::artifact::artifact_service_client::ArtifactServiceClient;
use thinkus_proto::artifact::upload_artifact_request::Part;

use crate::api::{
    ArtifactApi, ArtifactInfo, Compact, ContentStream, ListRequest, NewArtifact, PurgeResult, ReadRequest, ReadResult,
    StoredArtifact,
};
use crate::convert;
use tokio::sync::oneshot;

/// The largest chunk the client sends per upload message.
const UPLOAD_CHUNK_BYTES: usize = 1024 * 1024;

/// Calls the artifact service wherever it runs.
#[derive(Clone)]
pub enum ArtifactClient {
    Local(Arc<dyn ArtifactApi>),
    Grpc(ArtifactServiceClient<ClientChannel>),
}

impl ArtifactClient {
    pub fn grpc(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self::Grpc(
            ArtifactServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        )
    }
}

/// Splits chunks larger than one upload message.
fn split(chunk: Bytes) -> Vec<Bytes> {
    let mut parts = Vec::with_capacity(chunk.len() / UPLOAD_CHUNK_BYTES + 1);
    let mut rest = chunk;
    while rest.len() > UPLOAD_CHUNK_BYTES {
        parts.push(rest.split_to(UPLOAD_CHUNK_BYTES));
    }
    parts.push(rest);
    parts
}

/// An upload over gRPC. A failing source must abort the call, not end it: an ended stream would
/// store a truncated content. On error the stream stops yielding and the call is dropped.
fn grpc_upload(
    mut client: ArtifactServiceClient<ClientChannel>,
    header: NewArtifact,
    content: ContentStream,
) -> BoxFuture<'static, Result<StoredArtifact, ApiError>> {
    Box::pin(async move {
        let (failed_tx, failed_rx) = oneshot::channel::<ApiError>();
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::UploadArtifactRequest>(4);
        let first = pb::UploadArtifactRequest {
            part: Some(Part::Header(convert::header_to_proto(&header))),
        };
        // A pump feeds the request stream. On a source error it keeps the stream open (holding
        // its sender until the call is dropped) so the server never sees a clean end.
        tokio::spawn(pump(first, content, tx, failed_tx));
        tokio::select! {
            response = client.upload_artifact(tokio_stream::wrappers::ReceiverStream::new(rx)) => {
                let response = response?.into_inner();
                convert::stored_from_proto(response.artifact.as_ref(), response.compact.as_ref(), response.deduplicated)
            }
            Ok(err) = failed_rx => Err(err),
        }
    })
}

async fn pump(
    first: pb::UploadArtifactRequest,
    mut content: ContentStream,
    tx: tokio::sync::mpsc::Sender<pb::UploadArtifactRequest>,
    failed: oneshot::Sender<ApiError>,
) {
    if tx.send(first).await.is_err() {
        return;
    }
    while let Some(item) = content.next().await {
        match item {
            Ok(chunk) => {
                for part in split(chunk) {
                    let message = pb::UploadArtifactRequest {
                        part: Some(Part::Chunk(part.to_vec())),
                    };
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            }
            Err(err) => {
                let _ = failed.send(err);
                tx.closed().await;
                return;
            }
        }
    }
}

#[async_trait]
impl ArtifactApi for ArtifactClient {
    async fn create(&self, header: NewArtifact, content: Bytes) -> Result<StoredArtifact, ApiError> {
        match self {
            Self::Local(api) => api.create(header, content).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .create_artifact(pb::CreateArtifactRequest {
                        header: Some(convert::header_to_proto(&header)),
                        content: content.to_vec(),
                    })
                    .await?
                    .into_inner();
                convert::stored_from_proto(
                    response.artifact.as_ref(),
                    response.compact.as_ref(),
                    response.deduplicated,
                )
            }
        }
    }

    async fn upload(&self, header: NewArtifact, content: ContentStream) -> Result<StoredArtifact, ApiError> {
        match self {
            Self::Local(api) => api.upload(header, content).await,
            Self::Grpc(client) => grpc_upload(client.clone(), header, content).await,
        }
    }

    async fn get(
        &self,
        scope: Scope,
        artifact_id: String,
        language: Option<Language>,
    ) -> Result<(ArtifactInfo, Compact), ApiError> {
        match self {
            Self::Local(api) => api.get(scope, artifact_id, language).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .get_artifact(pb::GetArtifactRequest {
                        scope: Some(scope_to_proto(&scope)),
                        artifact_id,
                        language: language.map(|l| l.as_str().to_string()).unwrap_or_default(),
                    })
                    .await?
                    .into_inner();
                let compact = convert::compact_from_proto(response.compact.as_ref())?;
                let artifact = convert::artifact_from_proto(response.artifact.as_ref(), compact.language)?;
                Ok((artifact, compact))
            }
        }
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadResult, ApiError> {
        match self {
            Self::Local(api) => api.read(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .read_artifact(convert::read_to_proto(&request))
                    .await?
                    .into_inner();
                Ok(convert::read_result_from_proto(response))
            }
        }
    }

    async fn download(&self, scope: Scope, artifact_id: String) -> Result<ContentStream, ApiError> {
        match self {
            Self::Local(api) => api.download(scope, artifact_id).await,
            Self::Grpc(client) => {
                let stream = client
                    .clone()
                    .download_artifact(pb::DownloadArtifactRequest {
                        scope: Some(scope_to_proto(&scope)),
                        artifact_id,
                    })
                    .await?
                    .into_inner();
                Ok(stream
                    .map(|item| {
                        item.map(|message| Bytes::from(message.chunk))
                            .map_err(|status| ApiError::from_status(&status))
                    })
                    .boxed())
            }
        }
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        match self {
            Self::Local(api) => api.list(request).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .list_artifacts(pb::ListArtifactsRequest {
                        scope: Some(scope_to_proto(&request.scope)),
                        page: Some(thinkus_proto::common::PageRequest {
                            page_size: request.limit.min(500) as i32,
                            page_token: if request.offset == 0 {
                                String::new()
                            } else {
                                format!("o{}", request.offset)
                            },
                        }),
                    })
                    .await?
                    .into_inner();
                if response.artifacts.len() != response.compacts.len() {
                    return Err(ApiError::internal("the artifact service answered mismatched lists"));
                }
                response
                    .artifacts
                    .iter()
                    .zip(&response.compacts)
                    .map(|(artifact, compact)| {
                        let compact = convert::compact_from_proto(Some(compact))?;
                        Ok((convert::artifact_from_proto(Some(artifact), compact.language)?, compact))
                    })
                    .collect()
            }
        }
    }

    async fn delete(&self, scope: Scope, artifact_id: String) -> Result<(), ApiError> {
        match self {
            Self::Local(api) => api.delete(scope, artifact_id).await,
            Self::Grpc(client) => {
                client
                    .clone()
                    .delete_artifact(pb::DeleteArtifactRequest {
                        scope: Some(scope_to_proto(&scope)),
                        artifact_id,
                    })
                    .await?;
                Ok(())
            }
        }
    }

    async fn purge_expired(&self, owner: Option<Owner>, now: Option<DateTime<Utc>>) -> Result<PurgeResult, ApiError> {
        match self {
            Self::Local(api) => api.purge_expired(owner, now).await,
            Self::Grpc(client) => {
                let response = client
                    .clone()
                    .purge_expired(pb::PurgeExpiredRequest {
                        scope: owner.map(|owner| thinkus_proto::common::Scope {
                            tenant_id: owner.tenant_id,
                            user_id: owner.user_id,
                            ..Default::default()
                        }),
                        now: timestamp_opt(now),
                    })
                    .await?
                    .into_inner();
                Ok(PurgeResult {
                    removed: response.removed.max(0) as u64,
                    blobs_removed: response.blobs_removed.max(0) as u64,
                })
            }
        }
    }
}
