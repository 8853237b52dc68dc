//! The standing context of a role (seed 004 section 10.4, "固定注入：BOSS.md + Profile"): what
//! goes into every context whatever the message asks, even when no memory is needed for it.
//! One indexed query of the user's cross-project memories of four types, and the pending
//! conflicts: cheap enough for every turn.

use thinkus_backends::filter::{Layers, MemoryFilter, Reader};
use thinkus_backends::sql::{MemoryOrder, MemoryQuery};
use thinkus_common::ApiError;
use thinkus_common::model::{Memory, MemorySource, MemoryStatus, MemoryType, Scope};
use thinkus_common::text::detect_language_of;

use crate::api::Standing;
use crate::service::KnowledgeManager;

/// Rules: limits and feedback the user set for the work. Profile: who the user is and likes.
pub const RULE_TYPES: [MemoryType; 2] = [MemoryType::Constraint, MemoryType::Feedback];
pub const PROFILE_TYPES: [MemoryType; 2] = [MemoryType::UserPreference, MemoryType::Fact];

/// Whether a memory is a standing rule or profile fact: active, cross-project (it holds in every
/// project), of a rule or profile type, and given by the user rather than guessed by an
/// executive.
pub fn is_standing(memory: &Memory) -> bool {
    memory.status == MemoryStatus::Active
        && memory.scope.project_id.is_none()
        && (RULE_TYPES.contains(&memory.memory_type) || PROFILE_TYPES.contains(&memory.memory_type))
        && memory.source != MemorySource::Inference
}

/// Most important first: importance, then confidence, then evidence, then the newest.
pub fn rank(memories: &mut [Memory]) {
    memories.sort_by(|a, b| {
        b.importance
            .cmp(&a.importance)
            .then(b.confidence.total_cmp(&a.confidence))
            .then(b.evidence_count.cmp(&a.evidence_count))
            .then(b.occurred_at.cmp(&a.occurred_at))
    });
}

pub(crate) async fn standing(km: &KnowledgeManager, scope: &Scope, limit: usize) -> Result<Standing, ApiError> {
    if scope.role_id.trim().is_empty() {
        return Err(ApiError::invalid("scope.role_id", "is required"));
    }
    let query = MemoryQuery {
        filter: MemoryFilter {
            reader: Some(Reader {
                role_id: scope.role_id.clone(),
                project_id: None,
                layers: Layers::CrossProject,
            }),
            types: RULE_TYPES.iter().chain(PROFILE_TYPES.iter()).copied().collect(),
            ..MemoryFilter::user(&scope.owner())
        },
        order: MemoryOrder::Newest,
        limit: 500,
        ..Default::default()
    };
    let mut memories: Vec<Memory> = km
        .store
        .list_memories(&query)
        .await?
        .into_iter()
        .filter(is_standing)
        .collect();
    rank(&mut memories);
    memories.truncate(limit);
    let language = detect_language_of(memories.iter().map(|m| m.content.as_str()));
    let (rules, profile) = memories.into_iter().partition(|m| RULE_TYPES.contains(&m.memory_type));
    Ok(Standing {
        rules,
        profile,
        conflicts: crate::conflicts::list(km, scope, 20).await?,
        language,
    })
}
