//! [`ArtifactGrpcClient`]: the artifact service over gRPC, behind the same [`ArtifactApi`] as
//! the service itself (in process, a node holds the [`crate::ArtifactService`] as
//! `Arc<dyn ArtifactApi>`).

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::future::BoxFuture;
use thinkus_common::ApiError;
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

/// Calls an artifact service that runs in another process.
#[derive(Clone)]
pub struct ArtifactGrpcClient {
    client: ArtifactServiceClient<ClientChannel>,
}

impl ArtifactGrpcClient {
    pub fn new(channel: ClientChannel, max_message_bytes: usize) -> Self {
        Self {
            client: ArtifactServiceClient::new(channel)
                .max_decoding_message_size(max_message_bytes)
                .max_encoding_message_size(max_message_bytes),
        }
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
impl ArtifactApi for ArtifactGrpcClient {
    async fn create(&self, header: NewArtifact, content: Bytes) -> Result<StoredArtifact, ApiError> {
        let response = self
            .client
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

    async fn upload(&self, header: NewArtifact, content: ContentStream) -> Result<StoredArtifact, ApiError> {
        grpc_upload(self.client.clone(), header, content).await
    }

    async fn get(
        &self,
        scope: Scope,
        artifact_id: String,
        language: Option<Language>,
    ) -> Result<(ArtifactInfo, Compact), ApiError> {
        let response = self
            .client
            .clone()
            .get_artifact(convert::get_to_proto(&scope, artifact_id, language))
            .await?;
        convert::get_from_response(response.get_ref())
    }

    async fn read(&self, request: ReadRequest) -> Result<ReadResult, ApiError> {
        let response = self
            .client
            .clone()
            .read_artifact(convert::read_to_proto(&request))
            .await?;
        Ok(convert::read_result_from_proto(response.into_inner()))
    }

    async fn download(&self, scope: Scope, artifact_id: String) -> Result<ContentStream, ApiError> {
        let stream = self
            .client
            .clone()
            .download_artifact(convert::download_to_proto(&scope, artifact_id))
            .await?
            .into_inner();
        Ok(stream
            .map(|item| {
                item.map(|message| Bytes::from(message.chunk))
                    .map_err(|status| ApiError::from_status(&status))
            })
            .boxed())
    }

    async fn list(&self, request: ListRequest) -> Result<Vec<(ArtifactInfo, Compact)>, ApiError> {
        let response = self
            .client
            .clone()
            .list_artifacts(convert::list_to_proto(&request))
            .await?;
        convert::list_from_response(response.get_ref())
    }

    async fn delete(&self, scope: Scope, artifact_id: String) -> Result<(), ApiError> {
        self.client
            .clone()
            .delete_artifact(convert::delete_to_proto(&scope, artifact_id))
            .await?;
        Ok(())
    }

    async fn purge_expired(&self, owner: Option<Owner>, now: Option<DateTime<Utc>>) -> Result<PurgeResult, ApiError> {
        let response = self
            .client
            .clone()
            .purge_expired(convert::purge_to_proto(owner, now))
            .await?;
        Ok(convert::purge_result_from_proto(response.get_ref()))
    }
}
