-- Thinkus Memory, initial schema (PostgreSQL). Times are milliseconds since the epoch; lists and
-- maps are JSON text. Keep in step with ../sqlite.

CREATE TABLE memories (
    id                   TEXT PRIMARY KEY,
    user_id              TEXT NOT NULL,
    role_id              TEXT NOT NULL,
    project_id           TEXT,
    session_id           TEXT,
    memory_type          TEXT NOT NULL,
    content              TEXT NOT NULL,
    summary              TEXT NOT NULL,
    importance           BIGINT NOT NULL,
    confidence           DOUBLE PRECISION NOT NULL,
    freshness            DOUBLE PRECISION NOT NULL,
    evidence_count       BIGINT NOT NULL,
    visibility           TEXT NOT NULL,
    status               TEXT NOT NULL,
    superseded_by        TEXT,
    source               TEXT NOT NULL,
    tags                 TEXT NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    last_accessed_at     BIGINT,
    access_count         BIGINT NOT NULL DEFAULT 0,
    context              TEXT NOT NULL DEFAULT '',
    related_decision_ids TEXT NOT NULL DEFAULT '[]',
    artifact_refs        TEXT NOT NULL DEFAULT '[]',
    language             TEXT NOT NULL,
    speaker              TEXT,
    occurred_at          BIGINT NOT NULL,
    subject              TEXT,
    iteration_id         TEXT,
    external_id          TEXT,
    version              BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX idx_memories_user_role ON memories (user_id, role_id, status);
CREATE INDEX idx_memories_user_project ON memories (user_id, project_id, status);
CREATE INDEX idx_memories_user_occurred ON memories (user_id, occurred_at);
CREATE INDEX idx_memories_user_subject ON memories (user_id, subject) WHERE subject IS NOT NULL;
CREATE UNIQUE INDEX idx_memories_external ON memories (user_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX idx_memories_status ON memories (status);

CREATE TABLE memory_changes (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    memory_id   TEXT NOT NULL,
    kind        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    reason      TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT,
    at          BIGINT NOT NULL
);
CREATE INDEX idx_memory_changes_memory ON memory_changes (user_id, memory_id, at);

CREATE TABLE idempotency (
    user_id     TEXT NOT NULL,
    request_key TEXT NOT NULL,
    response    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, request_key)
);

CREATE TABLE candidates (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL,
    role_id        TEXT NOT NULL,
    project_id     TEXT,
    session_id     TEXT,
    draft          TEXT NOT NULL,
    reason         TEXT NOT NULL,
    score          DOUBLE PRECISION NOT NULL,
    evidence_count BIGINT NOT NULL,
    status         TEXT NOT NULL,
    content_key    TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    decided_at     BIGINT,
    memory_id      TEXT
);
CREATE INDEX idx_candidates_user ON candidates (user_id, status, created_at);
CREATE INDEX idx_candidates_key ON candidates (user_id, content_key, status);

CREATE TABLE user_plans (
    user_id    TEXT PRIMARY KEY,
    plan       TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE artifacts (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    role_id      TEXT,
    project_id   TEXT,
    session_id   TEXT NOT NULL,
    tool_call_id TEXT,
    tool_name    TEXT,
    mime_type    TEXT NOT NULL,
    size_bytes   BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    blob_key     TEXT NOT NULL,
    path         TEXT,
    line_count   BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    language     TEXT NOT NULL,
    compact      TEXT NOT NULL,
    metadata     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT
);
CREATE INDEX idx_artifacts_user_session ON artifacts (user_id, session_id, created_at);
CREATE INDEX idx_artifacts_user_project ON artifacts (user_id, project_id, created_at);
CREATE INDEX idx_artifacts_hash ON artifacts (user_id, session_id, sha256);
CREATE INDEX idx_artifacts_blob ON artifacts (blob_key);
CREATE INDEX idx_artifacts_expires ON artifacts (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE sessions (
    user_id           TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    role_id           TEXT NOT NULL,
    project_id        TEXT,
    message_count     BIGINT NOT NULL,
    last_message_at   BIGINT NOT NULL,
    summarized_until  BIGINT NOT NULL DEFAULT -1,
    ended             BIGINT NOT NULL DEFAULT 0,
    summary_requested BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX idx_sessions_pending ON sessions (last_message_at);

CREATE TABLE session_messages (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    idx        BIGINT NOT NULL,
    role       TEXT NOT NULL,
    speaker    TEXT,
    content    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, session_id, idx)
);

CREATE TABLE session_summaries (
    id               TEXT PRIMARY KEY,
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
    trajectory_start BIGINT NOT NULL,
    trajectory_end   BIGINT NOT NULL,
    language         TEXT NOT NULL,
    engine           TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (user_id, session_id)
);
CREATE INDEX idx_summaries_user_project ON session_summaries (user_id, project_id, updated_at);

CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    session_id   TEXT,
    payload      TEXT NOT NULL,
    status       TEXT NOT NULL,
    attempts     BIGINT NOT NULL,
    max_attempts BIGINT NOT NULL,
    last_error   TEXT,
    run_after    BIGINT NOT NULL,
    lease_until  BIGINT,
    dedupe_key   TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX idx_jobs_due ON jobs (status, run_after);
CREATE INDEX idx_jobs_user ON jobs (user_id, created_at);
CREATE UNIQUE INDEX idx_jobs_dedupe ON jobs (dedupe_key) WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running');
