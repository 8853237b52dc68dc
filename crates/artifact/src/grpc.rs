//! The gRPC adapter: authenticates, validates and converts, then calls the domain API.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use thinkus_common::ApiError;
use thinkus_common::auth::principal;
use thinkus_common::convert::{ScopeRules, datetime_opt, language_from_proto, page_from_proto, scope_from_proto};
use thinkus_common::model::Scope;
use thinkus_proto::artifact as pb;
use thinkus_proto::artifact::artifact_service_server::{ArtifactService as ArtifactRpc, ArtifactServiceServer};
use thinkus_proto::artifact::upload_artifact_request::Part;
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status, Streaming};

use crate::api::{ArtifactApi, ContentStream, ListRequest};
use crate::convert;

/// Serves [`ArtifactApi`] over gRPC.
pub struct ArtifactGrpc {
    api: Arc<dyn ArtifactApi>,
}

impl ArtifactGrpc {
    pub fn new(api: Arc<dyn ArtifactApi>) -> Self {
        Self { api }
    }

    /// The tonic service, with message size limits (uploads and downloads larger than one
    /// message stream in chunks).
    pub fn into_server(self, max_message_bytes: usize) -> ArtifactServiceServer<Self> {
        ArtifactServiceServer::new(self)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes)
    }
}

/// Validates the scope and checks the caller may act for its user.
fn scoped<T>(request: &Request<T>, scope: Option<&thinkus_proto::common::Scope>) -> Result<Scope, Status> {
    let principal = principal(request)?;
    let mut scope = scope_from_proto(scope, "scope", ScopeRules::USER)?;
    principal.authorize(&mut scope)?;
    Ok(scope)
}

#[tonic::async_trait]
impl ArtifactRpc for ArtifactGrpc {
    async fn create_artifact(
        &self,
        request: Request<pb::CreateArtifactRequest>,
    ) -> Result<Response<pb::CreateArtifactResponse>, Status> {
        let principal = principal(&request)?;
        let mut header = convert::header_from_proto(request.get_ref().header.as_ref())?;
        principal.authorize(&mut header.scope)?;
        let content = Bytes::from(request.into_inner().content);
        let stored = self.api.create(header, content).await?;
        Ok(Response::new(convert::create_response(&stored)))
    }

    async fn upload_artifact(
        &self,
        request: Request<Streaming<pb::UploadArtifactRequest>>,
    ) -> Result<Response<pb::UploadArtifactResponse>, Status> {
        let principal = principal(&request)?;
        let mut messages = request.into_inner();
        let mut header = match messages.message().await? {
            Some(pb::UploadArtifactRequest {
                part: Some(Part::Header(header)),
            }) => convert::header_from_proto(Some(&header))?,
            Some(_) => {
                return Err(Status::from(ApiError::invalid(
                    "header",
                    "the first message must carry the header",
                )));
            }
            None => return Err(Status::from(ApiError::invalid("header", "the upload stream is empty"))),
        };
        principal.authorize(&mut header.scope)?;
        let content: ContentStream = messages
            .filter_map(|item| async move {
                match item {
                    Ok(pb::UploadArtifactRequest {
                        part: Some(Part::Chunk(chunk)),
                    }) => Some(Ok(Bytes::from(chunk))),
                    Ok(pb::UploadArtifactRequest {
                        part: Some(Part::Header(_)),
                    }) => Some(Err(ApiError::invalid(
                        "header",
                        "only the first message may carry the header",
                    ))),
                    Ok(pb::UploadArtifactRequest { part: None }) => None,
                    Err(err) => Some(Err(ApiError::invalid(
                        "chunk",
                        format!("the upload stream failed: {}", err.message()),
                    ))),
                }
            })
            .boxed();
        let stored = self.api.upload(header, content).await?;
        Ok(Response::new(convert::upload_response(&stored)))
    }

    async fn get_artifact(
        &self,
        request: Request<pb::GetArtifactRequest>,
    ) -> Result<Response<pb::GetArtifactResponse>, Status> {
        let scope = scoped(&request, request.get_ref().scope.as_ref())?;
        let message = request.get_ref();
        let language = language_from_proto(&message.language, "language")?;
        let (artifact, compact) = self.api.get(scope, message.artifact_id.clone(), language).await?;
        Ok(Response::new(convert::get_response(&artifact, &compact)))
    }

    async fn read_artifact(
        &self,
        request: Request<pb::ReadArtifactRequest>,
    ) -> Result<Response<pb::ReadArtifactResponse>, Status> {
        let principal = principal(&request)?;
        let mut read = convert::read_from_proto(request.get_ref())?;
        principal.authorize(&mut read.scope)?;
        let result = self.api.read(read).await?;
        Ok(Response::new(convert::read_result_to_proto(&result)))
    }

    async fn download_artifact(
        &self,
        request: Request<pb::DownloadArtifactRequest>,
    ) -> Result<Response<BoxStream<pb::DownloadArtifactResponse>>, Status> {
        let scope = scoped(&request, request.get_ref().scope.as_ref())?;
        let stream = self.api.download(scope, request.get_ref().artifact_id.clone()).await?;
        let stream = stream.map(|item| {
            item.map(|chunk| pb::DownloadArtifactResponse { chunk: chunk.to_vec() })
                .map_err(Status::from)
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_artifacts(
        &self,
        request: Request<pb::ListArtifactsRequest>,
    ) -> Result<Response<pb::ListArtifactsResponse>, Status> {
        let scope = scoped(&request, request.get_ref().scope.as_ref())?;
        let (limit, offset) = page_from_proto(request.get_ref().page.as_ref(), "page")?;
        let listed = self.api.list(ListRequest { scope, limit, offset }).await?;
        Ok(Response::new(convert::list_response(&listed, limit, offset)))
    }

    async fn delete_artifact(
        &self,
        request: Request<pb::DeleteArtifactRequest>,
    ) -> Result<Response<pb::DeleteArtifactResponse>, Status> {
        let scope = scoped(&request, request.get_ref().scope.as_ref())?;
        self.api.delete(scope, request.get_ref().artifact_id.clone()).await?;
        Ok(Response::new(pb::DeleteArtifactResponse {}))
    }

    async fn purge_expired(
        &self,
        request: Request<pb::PurgeExpiredRequest>,
    ) -> Result<Response<pb::PurgeExpiredResponse>, Status> {
        let principal = principal(&request)?;
        let message = request.get_ref();
        let owner = match message.scope.as_ref().filter(|s| !s.user_id.is_empty()) {
            Some(scope) => {
                let mut scope = scope_from_proto(Some(scope), "scope", ScopeRules::USER)?;
                principal.authorize(&mut scope)?;
                Some(scope.owner())
            }
            None => {
                principal.require_admin("purging artifacts")?;
                if !principal.any_tenant {
                    return Err(Status::from(ApiError::permission_denied(
                        "purging every tenant's expired artifacts needs a service key; name a user to purge theirs",
                    )));
                }
                None
            }
        };
        let now = datetime_opt(message.now.as_ref(), "now")?;
        let result = self.api.purge_expired(owner, now).await?;
        Ok(Response::new(convert::purge_result_to_proto(&result)))
    }
}
