//! The summary service: structured session summaries. Not built yet: every RPC answers
//! UNIMPLEMENTED.

use thinkus_proto::summary::summary_service_server::{SummaryService, SummaryServiceServer};

/// The gRPC service; its RPCs answer UNIMPLEMENTED until the summary service lands.
#[derive(Debug, Default)]
pub struct SummaryGrpc;

#[tonic::async_trait]
impl SummaryService for SummaryGrpc {}

impl SummaryGrpc {
    pub fn into_server(self) -> SummaryServiceServer<Self> {
        SummaryServiceServer::new(self)
    }
}
