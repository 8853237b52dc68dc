//! The gateway's ports over the artifact and summary services' APIs (in process or gRPC).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use thinkus_artifact::ArtifactApi;
use thinkus_artifact::api::NewArtifact;
use thinkus_common::ApiError;
use thinkus_common::model::{Language, Message, Scope};
use thinkus_common::text::terms;
use thinkus_summary::SummaryApi;
use thinkus_summary::api::RecordRequest;

use crate::api::ToolCall;
use crate::extras::{ArtifactPort, LastSummary, RelevantArtifact, StoredOutput, SummaryPort};

/// The artifact service as the gateway's port.
pub struct Artifacts(pub Arc<dyn ArtifactApi>);

/// How much of an artifact's description the message's terms cover, from 0 to 1 (1 when the
/// message names the artifact), and how many terms they share.
fn overlap(message_terms: &BTreeSet<String>, message: &str, id: &str, description: &str) -> (f64, usize) {
    if message.contains(id) {
        return (1.0, usize::MAX);
    }
    if message_terms.is_empty() {
        return (0.0, 0);
    }
    let described: BTreeSet<String> = terms(description).into_iter().collect();
    let shared = message_terms.intersection(&described).count();
    (shared as f64 / message_terms.len() as f64, shared)
}

/// Terms an artifact of an earlier session must share with the message (one shared word is
/// too common a coincidence across a project's outputs).
const EARLIER_SESSION_SHARED_TERMS: usize = 2;

#[async_trait]
impl ArtifactPort for Artifacts {
    async fn relevant(
        &self,
        scope: &Scope,
        message: &str,
        limit: usize,
        language: Language,
    ) -> Result<Vec<RelevantArtifact>, ApiError> {
        if scope.session_id.is_none() || limit == 0 {
            return Ok(Vec::new());
        }
        // A project's tool outputs outlive their session: the earlier sessions' (any role's, as
        // the project's memories are) are found by what they hold, not only the session's.
        let listed: Vec<(bool, _)> = self
            .0
            .list_near(scope.clone(), limit)
            .await?
            .into_iter()
            .map(|artifact| (artifact.0.scope.session_id == scope.session_id, artifact))
            .collect();
        let message_terms: BTreeSet<String> = terms(message).into_iter().collect();
        let mut found: Vec<RelevantArtifact> = listed
            .into_iter()
            .filter_map(|(this_session, (info, compact))| {
                let description = format!(
                    "{} {} {} {}",
                    info.path.clone().unwrap_or_default(),
                    info.tool_name.clone().unwrap_or_default(),
                    compact.type_label,
                    compact.summary
                );
                let (score, shared) = overlap(&message_terms, message, &info.id, &description);
                let enough = if this_session {
                    shared > 0
                } else {
                    shared >= EARLIER_SESSION_SHARED_TERMS
                };
                enough.then(|| RelevantArtifact {
                    id: info.id.clone(),
                    text: compact.rendered.clone(),
                    score,
                    reason: match (this_session, language) {
                        (true, Language::Zh) => format!("本会话的产物，与消息的词重合度{score:.2}"),
                        (true, Language::En) => {
                            format!("an artifact of this session; term overlap with the message {score:.2}")
                        }
                        (false, Language::Zh) => format!("本项目之前会话的产物，与消息的词重合度{score:.2}"),
                        (false, Language::En) => format!(
                            "an artifact of an earlier session of the project; term overlap with the message {score:.2}"
                        ),
                    },
                })
            })
            .collect();
        found.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(found)
    }

    async fn store_tool_output(&self, scope: &Scope, call: ToolCall) -> Result<StoredOutput, ApiError> {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let stored = self
            .0
            .create(
                NewArtifact {
                    scope: scope.clone(),
                    tool_call_id: some(&call.id),
                    tool_name: some(&call.name),
                    mime_type: some(&call.mime_type),
                    path: some(&call.path),
                    ..Default::default()
                },
                Bytes::from(call.output),
            )
            .await?;
        Ok(StoredOutput {
            artifact_id: stored.artifact.id.clone(),
            compact: thinkus_artifact::convert::compact_to_proto(&stored.compact),
        })
    }
}

/// The summary service as the gateway's port.
pub struct Summaries(pub Arc<dyn SummaryApi>);

#[async_trait]
impl SummaryPort for Summaries {
    async fn last_summary(
        &self,
        scope: &Scope,
        budget_tokens: u32,
        language: Language,
        now: DateTime<Utc>,
    ) -> Result<Option<LastSummary>, ApiError> {
        if budget_tokens == 0 {
            return Ok(None);
        }
        let Some((previous, rendered)) = self
            .0
            .previous_rendered(scope.clone(), now, budget_tokens, language)
            .await?
        else {
            return Ok(None);
        };
        let session_id = previous.scope.session_id.clone().unwrap_or_default();
        Ok(Some(LastSummary {
            id: previous.id,
            session_id,
            text: rendered.markdown,
            at: previous.updated_at,
        }))
    }

    async fn record(&self, scope: &Scope, messages: Vec<Message>, job_id: Option<&str>) -> Result<(), ApiError> {
        self.0
            .record(RecordRequest {
                scope: scope.clone(),
                messages,
                phase_completed: false,
                job_id: job_id.map(str::to_string),
            })
            .await?;
        Ok(())
    }

    async fn end(&self, scope: &Scope) -> Result<(), ApiError> {
        self.0.end_session(scope.clone()).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_shared_terms_and_names() {
        let message = "the build log shows which test failed?";
        let message_terms: BTreeSet<String> = terms(message).into_iter().collect();
        let log = overlap(
            &message_terms,
            message,
            "art_1",
            "cargo-test.log log 120 lines, 3 errors, test failed",
        );
        let unrelated = overlap(
            &message_terms,
            message,
            "art_2",
            "design.md Markdown heading outline: colours",
        );
        assert!(log.0 > unrelated.0, "{log:?} {unrelated:?}");
        assert!(log.1 >= 3, "log, test, failed: {log:?}");
        assert_eq!(unrelated, (0.0, 0));
        assert_eq!(overlap(&message_terms, "look at art_9 please", "art_9", "").0, 1.0);
    }
}
