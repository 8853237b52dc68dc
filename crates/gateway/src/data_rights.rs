//! Data rights of a user through the gateway (issue 17): `EraseUser` spans two services. The
//! artifact service removes the user's artifacts and their blobs (it owns the blob store),
//! then the knowledge manager erases everything else the database and the vector index hold
//! and records the erasure, counting the artifacts with the rest. The export is the knowledge
//! manager's alone (`KnowledgeApi::export_user`): every table is in the one shared database.

use thinkus_common::model::{Owner, Scope};
use thinkus_common::{ApiError, ErrorCode};
use thinkus_knowledge_manager::api::Erasure;

use crate::service::Gateway;

/// Artifacts listed per round while erasing.
const ARTIFACT_PAGE: usize = 100;

impl Gateway {
    /// Erases everything `owner` holds (see the module). `actor` names who asked, for the
    /// erasure's record. Erasing an erased user answers zero counts and records nothing.
    pub async fn erase(&self, owner: &Owner, actor: &str) -> Result<Erasure, ApiError> {
        let mut artifacts = 0u64;
        if let Some(api) = &self.upstreams.artifact_api {
            let scope = Scope {
                tenant_id: owner.tenant_id.clone(),
                user_id: owner.user_id.clone(),
                ..Scope::default()
            };
            loop {
                let page = api
                    .list(thinkus_artifact::api::ListRequest {
                        scope: scope.clone(),
                        limit: ARTIFACT_PAGE,
                        offset: 0,
                    })
                    .await?;
                let mut progressed = false;
                for (info, _) in &page {
                    match api.delete(scope.clone(), info.id.clone()).await {
                        Ok(()) => {
                            artifacts += 1;
                            progressed = true;
                        }
                        // Removed meanwhile (an expiry sweep, a concurrent erasure).
                        Err(err) if err.code == ErrorCode::NotFound => progressed = true,
                        Err(err) => return Err(err),
                    }
                }
                if page.len() < ARTIFACT_PAGE || !progressed {
                    break;
                }
            }
        }
        self.upstreams
            .knowledge
            .erase_user(owner.clone(), actor.to_string(), artifacts)
            .await
    }
}
