-- The record that a user's data was erased (EraseUser): who asked, when, and how many rows of
-- each kind were removed. It holds no content of the user's: the tenant and user id say whose
-- data it was, `counts` is a JSON object of numbers. Keep in step with ../postgres.
CREATE TABLE erasures (
    id        TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    actor     TEXT NOT NULL,
    at        BIGINT NOT NULL,
    counts    TEXT NOT NULL
);
CREATE INDEX idx_erasures_owner ON erasures (tenant_id, user_id, at);
