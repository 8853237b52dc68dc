//! The artifact service: tool outputs stored whole, compacts injected instead, partial reads.
//! Not built yet: every RPC answers UNIMPLEMENTED.

use thinkus_proto::artifact::artifact_service_server::{ArtifactService, ArtifactServiceServer};

/// The gRPC service; its RPCs answer UNIMPLEMENTED until the artifact service lands.
#[derive(Debug, Default)]
pub struct ArtifactGrpc;

#[tonic::async_trait]
impl ArtifactService for ArtifactGrpc {}

impl ArtifactGrpc {
    pub fn into_server(self) -> ArtifactServiceServer<Self> {
        ArtifactServiceServer::new(self)
    }
}
