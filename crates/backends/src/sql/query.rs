//! Building queries: SQL with `?` placeholders and its arguments in order ([`Query`]), numbered
//! for PostgreSQL; a memory's columns as arguments; a filter plan ([`crate::filter::Plan`]) and a
//! [`MemoryQuery`] as a WHERE clause. Times are bound as BIGINT milliseconds, lists as JSON text.

use chrono::{DateTime, Utc};
use sqlx::Arguments;
use sqlx::any::AnyArguments;
use thinkus_common::model::{Memory, Owner};

use super::{MemoryQuery, StoreError};
use crate::filter::{Field, Plan};

pub(super) fn ms(time: DateTime<Utc>) -> i64 {
    time.timestamp_millis()
}

pub(super) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serialising plain data cannot fail")
}

/// A bound argument.
#[derive(Debug, Clone)]
pub(super) enum Arg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
    Float(f64),
}

/// A query under construction: SQL with `?` placeholders and its arguments, in order.
#[derive(Debug, Default)]
pub(super) struct Query {
    pub(super) sql: String,
    pub(super) args: Vec<Arg>,
}

impl Query {
    pub(super) fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    pub(super) fn arg(&mut self, arg: Arg) -> &mut Self {
        self.args.push(arg);
        self
    }

    pub(super) fn text(&mut self, value: impl Into<String>) -> &mut Self {
        self.arg(Arg::Text(value.into()))
    }

    /// Binds an owner: its tenant, then its user (for `tenant_id = ? AND user_id = ?`).
    pub(super) fn owner(&mut self, owner: &Owner) -> &mut Self {
        self.text(owner.tenant_id.clone()).text(owner.user_id.clone())
    }

    pub(super) fn int(&mut self, value: i64) -> &mut Self {
        self.arg(Arg::Int(value))
    }

    /// Appends `column IN (?, ?, …)` for the given values.
    pub(super) fn push_in(&mut self, column: &str, values: impl IntoIterator<Item = String>) -> &mut Self {
        let values: Vec<String> = values.into_iter().collect();
        if values.is_empty() {
            self.sql.push_str(" 1 = 0");
            return self;
        }
        self.sql
            .push_str(&format!(" {column} IN ({})", vec!["?"; values.len()].join(", ")));
        for value in values {
            self.args.push(Arg::Text(value));
        }
        self
    }
}

/// Numbers `?` placeholders as `$1, $2, …` for PostgreSQL (outside string literals).
pub(super) fn number_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    let mut in_string = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_string = !in_string;
                out.push(c);
            }
            '?' if !in_string => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

pub(super) fn arguments(args: &[Arg]) -> Result<AnyArguments<'static>, StoreError> {
    let mut out = AnyArguments::default();
    for arg in args {
        let result = match arg.clone() {
            Arg::Text(v) => out.add(v),
            Arg::OptText(v) => out.add(v),
            Arg::Int(v) => out.add(v),
            Arg::OptInt(v) => out.add(v),
            Arg::Float(v) => out.add(v),
        };
        result.map_err(|err| StoreError::Backend(format!("cannot bind an argument: {err}")))?;
    }
    Ok(out)
}

pub(super) const MEMORY_COLUMNS: &str = "id, tenant_id, user_id, role_id, project_id, session_id, memory_type, content, summary, \
    importance, confidence, freshness, evidence_count, visibility, status, superseded_by, source, tags, \
    created_at, updated_at, last_accessed_at, access_count, context, related_decision_ids, artifact_refs, \
    language, speaker, occurred_at, subject, iteration_id, external_id, version";

pub(super) fn memory_args(memory: &Memory) -> Vec<Arg> {
    vec![
        Arg::Text(memory.id.clone()),
        Arg::Text(memory.scope.tenant_id.clone()),
        Arg::Text(memory.scope.user_id.clone()),
        Arg::Text(memory.scope.role_id.clone()),
        Arg::OptText(memory.scope.project_id.clone()),
        Arg::OptText(memory.scope.session_id.clone()),
        Arg::Text(memory.memory_type.as_str().into()),
        Arg::Text(memory.content.clone()),
        Arg::Text(memory.summary.clone()),
        Arg::Int(i64::from(memory.importance)),
        Arg::Float(memory.confidence),
        Arg::Float(memory.freshness),
        Arg::Int(i64::from(memory.evidence_count)),
        Arg::Text(memory.visibility.as_str().into()),
        Arg::Text(memory.status.as_str().into()),
        Arg::OptText(memory.superseded_by.clone()),
        Arg::Text(memory.source.as_str().into()),
        Arg::Text(json(&memory.tags)),
        Arg::Int(ms(memory.created_at)),
        Arg::Int(ms(memory.updated_at)),
        Arg::OptInt(memory.last_accessed_at.map(ms)),
        Arg::Int(memory.access_count as i64),
        Arg::Text(memory.context.clone()),
        Arg::Text(json(&memory.related_decision_ids)),
        Arg::Text(json(&memory.artifact_refs)),
        Arg::Text(memory.language.as_str().into()),
        Arg::OptText(memory.speaker.clone()),
        Arg::Int(ms(memory.occurred_at)),
        Arg::OptText(memory.subject.clone()),
        Arg::OptText(memory.iteration_id.clone()),
        Arg::OptText(memory.external_id.clone()),
    ]
}

/// The column of a field of a plan.
pub(super) fn column(field: Field) -> &'static str {
    match field {
        Field::Tenant => "tenant_id",
        Field::User => "user_id",
        Field::Role => "role_id",
        Field::Project => "project_id",
        Field::Session => "session_id",
        Field::Type => "memory_type",
        Field::Visibility => "visibility",
        Field::Status => "status",
    }
}

/// Appends a plan (see [`crate::filter`]) as one parenthesised condition.
pub(super) fn push_plan(query: &mut Query, plan: &Plan) {
    match plan {
        Plan::Never => {
            query.push("1 = 0");
        }
        Plan::All(plans) | Plan::Any(plans) => {
            let joint = if matches!(plan, Plan::All(_)) { " AND " } else { " OR " };
            query.push("(");
            for (i, inner) in plans.iter().enumerate() {
                if i > 0 {
                    query.push(joint);
                }
                push_plan(query, inner);
            }
            query.push(")");
        }
        Plan::Is(field, value) => {
            query.push(&format!("{} = ?", column(*field))).text(value.clone());
        }
        Plan::OneOf(field, values) => {
            query.push_in(column(*field), values.iter().cloned());
        }
        Plan::CrossProject(true) => {
            query.push("project_id IS NULL");
        }
        Plan::CrossProject(false) => {
            query.push("project_id IS NOT NULL");
        }
        Plan::OccurredWithin { from_ms, to_ms } => {
            query.push("(1 = 1");
            if let Some(from) = from_ms {
                query.push(" AND occurred_at >= ?").int(*from);
            }
            if let Some(to) = to_ms {
                query.push(" AND occurred_at < ?").int(*to);
            }
            query.push(")");
        }
        Plan::HasTag(tag) => {
            query
                .push("tags LIKE ? ESCAPE '\\'")
                .text(format!("%{}%", like_escape(&json(tag))));
        }
    }
}

/// Escapes LIKE wildcards; patterns use `ESCAPE '\'`.
pub(super) fn like_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

pub(super) fn memory_where(query: &mut Query, q: &MemoryQuery) {
    query.push(" WHERE ");
    push_plan(query, &q.filter.plan());
    if let Some(role) = &q.owner_role {
        query.push(" AND role_id = ?").text(role.clone());
    }
    if !q.exclude_types.is_empty() {
        query.push(" AND NOT");
        query.push_in("memory_type", q.exclude_types.iter().map(|t| t.as_str().to_string()));
    }
    if let Some(subject) = &q.subject {
        query.push(" AND subject = ?").text(subject.clone());
    }
    if let Some(iteration) = &q.iteration_id {
        query.push(" AND iteration_id = ?").text(iteration.clone());
    }
    if let Some(before) = q.created_before {
        query.push(" AND created_at < ?").int(ms(before));
    }
    if let Some(max) = q.max_importance {
        query.push(" AND importance <= ?").int(i64::from(max));
    }
    if let Some(max) = q.max_access_count {
        query.push(" AND access_count <= ?").int(max as i64);
    }
}

pub(super) const ARTIFACT_COLUMNS: &str = "id, tenant_id, user_id, role_id, project_id, session_id, tool_call_id, tool_name, mime_type, \
    size_bytes, sha256, blob_key, path, line_count, kind, language, compact, metadata, created_at, expires_at";

pub(super) const JOB_COLUMNS: &str = "id, kind, tenant_id, user_id, session_id, payload, status, attempts, max_attempts, last_error, \
    run_after, lease_until, dedupe_key, created_at, updated_at, result";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_strings() {
        assert_eq!(
            number_placeholders("SELECT * FROM t WHERE a = ? AND b = '?' AND c IN (?, ?)"),
            "SELECT * FROM t WHERE a = $1 AND b = '?' AND c IN ($2, $3)"
        );
    }
}
