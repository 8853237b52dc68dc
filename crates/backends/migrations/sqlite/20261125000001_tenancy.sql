-- Tenancy (SQLite): every row names the tenant of its owner, and every key that names a user
-- names the tenant first, so the same user id in two tenants is two people. Rows written
-- before this migration belong to the default tenant ('default', thinkus_common::model::
-- DEFAULT_TENANT). Tables whose primary key or unique key holds the user are rebuilt (SQLite
-- cannot change a key in place); the others gain the column. Keep in step with ../postgres.

ALTER TABLE memories ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX idx_memories_user_role;
DROP INDEX idx_memories_user_project;
DROP INDEX idx_memories_user_occurred;
DROP INDEX idx_memories_user_subject;
DROP INDEX idx_memories_external;
CREATE INDEX idx_memories_user_role ON memories (tenant_id, user_id, role_id, status);
CREATE INDEX idx_memories_user_project ON memories (tenant_id, user_id, project_id, status);
CREATE INDEX idx_memories_user_occurred ON memories (tenant_id, user_id, occurred_at);
CREATE INDEX idx_memories_user_subject ON memories (tenant_id, user_id, subject) WHERE subject IS NOT NULL;
CREATE UNIQUE INDEX idx_memories_external ON memories (tenant_id, user_id, external_id) WHERE external_id IS NOT NULL;

ALTER TABLE memory_changes ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX idx_memory_changes_memory;
CREATE INDEX idx_memory_changes_memory ON memory_changes (tenant_id, user_id, memory_id, at);

CREATE TABLE idempotency_tenanted (
    tenant_id   TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    request_key TEXT NOT NULL,
    response    TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id, request_key)
);
INSERT INTO idempotency_tenanted (tenant_id, user_id, request_key, response, created_at)
    SELECT 'default', user_id, request_key, response, created_at FROM idempotency;
DROP TABLE idempotency;
ALTER TABLE idempotency_tenanted RENAME TO idempotency;
CREATE INDEX idx_idempotency_created ON idempotency (created_at);

ALTER TABLE candidates ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX idx_candidates_user;
DROP INDEX idx_candidates_key;
CREATE INDEX idx_candidates_user ON candidates (tenant_id, user_id, status, created_at);
CREATE INDEX idx_candidates_key ON candidates (tenant_id, user_id, content_key, status);

CREATE TABLE user_plans_tenanted (
    tenant_id  TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    plan       TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
INSERT INTO user_plans_tenanted (tenant_id, user_id, plan, updated_at)
    SELECT 'default', user_id, plan, updated_at FROM user_plans;
DROP TABLE user_plans;
ALTER TABLE user_plans_tenanted RENAME TO user_plans;

ALTER TABLE artifacts ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX idx_artifacts_user_session;
DROP INDEX idx_artifacts_user_project;
DROP INDEX idx_artifacts_hash;
CREATE INDEX idx_artifacts_user_session ON artifacts (tenant_id, user_id, session_id, created_at);
CREATE INDEX idx_artifacts_user_project ON artifacts (tenant_id, user_id, project_id, created_at);
CREATE INDEX idx_artifacts_hash ON artifacts (tenant_id, user_id, session_id, sha256);

CREATE TABLE sessions_tenanted (
    tenant_id         TEXT NOT NULL,
    user_id           TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    role_id           TEXT NOT NULL,
    project_id        TEXT,
    message_count     INTEGER NOT NULL,
    last_message_at   INTEGER NOT NULL,
    summarized_until  INTEGER NOT NULL DEFAULT -1,
    ended             INTEGER NOT NULL DEFAULT 0,
    summary_requested INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id, session_id)
);
INSERT INTO sessions_tenanted (tenant_id, user_id, session_id, role_id, project_id, message_count, last_message_at,
                               summarized_until, ended, summary_requested)
    SELECT 'default', user_id, session_id, role_id, project_id, message_count, last_message_at, summarized_until,
           ended, summary_requested
    FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_tenanted RENAME TO sessions;
CREATE INDEX idx_sessions_pending ON sessions (last_message_at);

CREATE TABLE session_messages_tenanted (
    tenant_id  TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    idx        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    speaker    TEXT,
    content    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id, session_id, idx)
);
INSERT INTO session_messages_tenanted (tenant_id, user_id, session_id, idx, role, speaker, content, created_at)
    SELECT 'default', user_id, session_id, idx, role, speaker, content, created_at FROM session_messages;
DROP TABLE session_messages;
ALTER TABLE session_messages_tenanted RENAME TO session_messages;
CREATE INDEX idx_session_messages_created ON session_messages (created_at);

CREATE TABLE session_summaries_tenanted (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    role_id          TEXT NOT NULL,
    project_id       TEXT,
    session_id       TEXT NOT NULL,
    goal             TEXT NOT NULL,
    constraints      TEXT NOT NULL,
    decisions        TEXT NOT NULL,
    progress         TEXT NOT NULL,
    artifacts        TEXT NOT NULL,
    next_actions     TEXT NOT NULL,
    risks            TEXT NOT NULL,
    open_questions   TEXT NOT NULL,
    trajectory_start INTEGER NOT NULL,
    trajectory_end   INTEGER NOT NULL,
    language         TEXT NOT NULL,
    engine           TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (tenant_id, user_id, session_id)
);
INSERT INTO session_summaries_tenanted (id, tenant_id, user_id, role_id, project_id, session_id, goal, constraints,
                                        decisions, progress, artifacts, next_actions, risks, open_questions,
                                        trajectory_start, trajectory_end, language, engine, created_at, updated_at)
    SELECT id, 'default', user_id, role_id, project_id, session_id, goal, constraints, decisions, progress, artifacts,
           next_actions, risks, open_questions, trajectory_start, trajectory_end, language, engine, created_at,
           updated_at
    FROM session_summaries;
DROP TABLE session_summaries;
ALTER TABLE session_summaries_tenanted RENAME TO session_summaries;
CREATE INDEX idx_summaries_user_project ON session_summaries (tenant_id, user_id, project_id, updated_at);

ALTER TABLE jobs ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX idx_jobs_user;
CREATE INDEX idx_jobs_user ON jobs (tenant_id, user_id, created_at);
