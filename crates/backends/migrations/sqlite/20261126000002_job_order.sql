-- The queue runs a user's jobs of one kind in the order they were queued: a job is claimed only
-- when no earlier job of its user and kind is pending or running (JobStore::claim). This index
-- answers that question from the unfinished jobs alone. Keep in step with ../postgres.
CREATE INDEX idx_jobs_unfinished ON jobs (tenant_id, user_id, kind, created_at) WHERE status IN ('pending', 'running');
