-- Tenancy (PostgreSQL): every row names the tenant of its owner, and every key that names a
-- user names the tenant first, so the same user id in two tenants is two people. Rows written
-- before this migration belong to the default tenant ('default', thinkus_common::model::
-- DEFAULT_TENANT); the column keeps no default afterwards, so no new row lands in a tenant by
-- accident. Keep in step with ../sqlite.

ALTER TABLE memories ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE memories ALTER COLUMN tenant_id DROP DEFAULT;
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
ALTER TABLE memory_changes ALTER COLUMN tenant_id DROP DEFAULT;
DROP INDEX idx_memory_changes_memory;
CREATE INDEX idx_memory_changes_memory ON memory_changes (tenant_id, user_id, memory_id, at);

ALTER TABLE idempotency ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE idempotency ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE idempotency DROP CONSTRAINT idempotency_pkey, ADD PRIMARY KEY (tenant_id, user_id, request_key);
CREATE INDEX idx_idempotency_created ON idempotency (created_at);

ALTER TABLE candidates ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE candidates ALTER COLUMN tenant_id DROP DEFAULT;
DROP INDEX idx_candidates_user;
DROP INDEX idx_candidates_key;
CREATE INDEX idx_candidates_user ON candidates (tenant_id, user_id, status, created_at);
CREATE INDEX idx_candidates_key ON candidates (tenant_id, user_id, content_key, status);

ALTER TABLE user_plans ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE user_plans ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE user_plans DROP CONSTRAINT user_plans_pkey, ADD PRIMARY KEY (tenant_id, user_id);

ALTER TABLE artifacts ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE artifacts ALTER COLUMN tenant_id DROP DEFAULT;
DROP INDEX idx_artifacts_user_session;
DROP INDEX idx_artifacts_user_project;
DROP INDEX idx_artifacts_hash;
CREATE INDEX idx_artifacts_user_session ON artifacts (tenant_id, user_id, session_id, created_at);
CREATE INDEX idx_artifacts_user_project ON artifacts (tenant_id, user_id, project_id, created_at);
CREATE INDEX idx_artifacts_hash ON artifacts (tenant_id, user_id, session_id, sha256);

ALTER TABLE sessions ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sessions ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE sessions DROP CONSTRAINT sessions_pkey, ADD PRIMARY KEY (tenant_id, user_id, session_id);

ALTER TABLE session_messages ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE session_messages ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE session_messages DROP CONSTRAINT session_messages_pkey,
    ADD PRIMARY KEY (tenant_id, user_id, session_id, idx);
CREATE INDEX idx_session_messages_created ON session_messages (created_at);

ALTER TABLE session_summaries ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE session_summaries ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE session_summaries DROP CONSTRAINT session_summaries_user_id_session_id_key,
    ADD CONSTRAINT session_summaries_owner_session_key UNIQUE (tenant_id, user_id, session_id);
DROP INDEX idx_summaries_user_project;
CREATE INDEX idx_summaries_user_project ON session_summaries (tenant_id, user_id, project_id, updated_at);

ALTER TABLE jobs ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE jobs ALTER COLUMN tenant_id DROP DEFAULT;
DROP INDEX idx_jobs_user;
CREATE INDEX idx_jobs_user ON jobs (tenant_id, user_id, created_at);
