//! Recent PrepareTurn traces, kept in memory so that the memory page can show, for a recent
//! turn, which memories its context used and why (seed 001 section 4.1: "AI引用了哪条记忆").
//!
//! Kept per owner (tenant and user: the same user id in two tenants is two people). Bounded: at
//! most `per_user` traces per owner and `total` in all (the oldest go first), each
//! context cut to [`MAX_CONTEXT_CHARS`]. Kept by the process that prepared the turn: with
//! several gateway replicas, a page shows the turns its own replica prepared. Off (nothing kept)
//! unless the page is served.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use thinkus_common::model::{Owner, Scope};

use crate::api::Prepared;

/// The longest context kept per trace, in characters.
pub const MAX_CONTEXT_CHARS: usize = 16 * 1024;

/// One prepared turn: what was asked and what the context held.
#[derive(Debug, Clone)]
pub struct TurnTrace {
    /// "trc_" followed by a UUIDv7.
    pub id: String,
    pub at: DateTime<Utc>,
    pub scope: Scope,
    pub message: String,
    pub prepared: Prepared,
}

struct Inner {
    by_user: HashMap<Owner, VecDeque<Arc<TurnTrace>>>,
    /// (owner, trace id) in the order they were recorded, for the global bound.
    order: VecDeque<(Owner, String)>,
}

/// The recent traces of every user.
pub struct TraceLog {
    per_user: usize,
    total: usize,
    inner: Mutex<Inner>,
}

impl TraceLog {
    pub fn new(per_user: usize, total: usize) -> Self {
        Self {
            per_user: per_user.max(1),
            total: total.max(1),
            inner: Mutex::new(Inner {
                by_user: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    /// Keeps the trace of a turn prepared for `scope` (its tenant resolved) from `message`.
    pub fn record(&self, scope: &Scope, message: &str, now: Option<DateTime<Utc>>, prepared: &Prepared) -> String {
        let mut prepared = prepared.clone();
        if prepared.context.chars().count() > MAX_CONTEXT_CHARS {
            prepared.context = prepared.context.chars().take(MAX_CONTEXT_CHARS).collect::<String>() + "…";
        }
        let trace = Arc::new(TurnTrace {
            id: format!("trc_{}", uuid::Uuid::now_v7().simple()),
            at: now.unwrap_or_else(Utc::now),
            scope: scope.clone(),
            message: message.chars().take(4096).collect(),
            prepared,
        });
        let id = trace.id.clone();
        let user = trace.scope.owner();
        let mut inner = self.inner.lock();
        let traces = inner.by_user.entry(user.clone()).or_default();
        traces.push_front(trace);
        let mut dropped = Vec::new();
        while traces.len() > self.per_user {
            if let Some(old) = traces.pop_back() {
                dropped.push(old.id.clone());
            }
        }
        inner.order.push_back((user, id.clone()));
        if !dropped.is_empty() {
            inner.order.retain(|(_, id)| !dropped.contains(id));
        }
        while inner.order.len() > self.total {
            let Some((user, oldest)) = inner.order.pop_front() else {
                break;
            };
            if let Some(traces) = inner.by_user.get_mut(&user) {
                traces.retain(|t| t.id != oldest);
                if traces.is_empty() {
                    inner.by_user.remove(&user);
                }
            }
        }
        id
    }

    /// An owner's recent traces, newest first, of one role when given.
    pub fn recent(&self, owner: &Owner, role_id: Option<&str>, limit: usize) -> Vec<Arc<TurnTrace>> {
        let inner = self.inner.lock();
        inner
            .by_user
            .get(owner)
            .map(|traces| {
                traces
                    .iter()
                    .filter(|t| role_id.is_none_or(|role| t.scope.role_id == role))
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One trace of an owner; `None` for an unknown id or another owner's.
    pub fn get(&self, owner: &Owner, trace_id: &str) -> Option<Arc<TurnTrace>> {
        let inner = self.inner.lock();
        inner.by_user.get(owner)?.iter().find(|t| t.id == trace_id).cloned()
    }

    /// How many traces are kept in all.
    pub fn len(&self) -> usize {
        self.inner.lock().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use thinkus_common::model::{ControlDecision, Language, NeedMemory, RetrievalMode, TimeRange};

    use super::*;

    fn turn(tenant: &str, user: &str, role: &str) -> (Scope, Prepared) {
        (
            Scope::new(user, role).with_tenant(tenant).with_session("s1"),
            Prepared {
                context: "x".repeat(MAX_CONTEXT_CHARS + 10),
                sections: Vec::new(),
                tokens_used: 10,
                budget_tokens: 2000,
                decision: ControlDecision {
                    need_memory: NeedMemory::No,
                    memory_types: Vec::new(),
                    retrieval_mode: RetrievalMode::Catalog,
                    budget_tokens: 0,
                    time_range: TimeRange::All,
                    reason: String::new(),
                    engine: "rules".into(),
                    signals: Vec::new(),
                    language: Language::En,
                },
                items: Vec::new(),
                timings_ms: BTreeMap::new(),
                degraded: Vec::new(),
            },
        )
    }

    #[test]
    fn traces_are_bounded_per_owner_and_in_all() {
        let log = TraceLog::new(3, 5);
        let alice = Owner::new("acme", "alice");
        for i in 0..4 {
            let (scope, prepared) = turn("acme", "alice", if i % 2 == 0 { "cto" } else { "cfo" });
            log.record(&scope, &format!("a{i}"), None, &prepared);
        }
        let recent = log.recent(&alice, None, 10);
        assert_eq!(
            recent.iter().map(|t| t.message.as_str()).collect::<Vec<_>>(),
            ["a3", "a2", "a1"]
        );
        assert_eq!(log.recent(&alice, Some("cto"), 10).len(), 1, "a0 was dropped");
        assert!(recent[0].prepared.context.chars().count() <= MAX_CONTEXT_CHARS + 1);
        // The same user id in another tenant is another person.
        let (scope, prepared) = turn("globex", "alice", "cto");
        let theirs = log.record(&scope, "g0", None, &prepared);
        assert!(
            log.get(&alice, &theirs).is_none(),
            "another tenant's trace is not found"
        );
        assert_eq!(log.recent(&Owner::new("globex", "alice"), None, 10).len(), 1);
        assert_eq!(log.recent(&alice, None, 10).len(), 3);
        let bob = Owner::new("acme", "bob");
        let mut last = String::new();
        for i in 0..4 {
            let (scope, prepared) = turn("acme", "bob", "cto");
            last = log.record(&scope, &format!("b{i}"), None, &prepared);
        }
        assert_eq!(log.len(), 5);
        assert_eq!(log.recent(&alice, None, 10).len(), 1, "the oldest of all went first");
        assert_eq!(log.recent(&Owner::new("globex", "alice"), None, 10).len(), 1);
        assert!(log.get(&bob, &last).is_some());
        assert!(log.get(&alice, &last).is_none(), "another user's trace is not found");
    }
}
