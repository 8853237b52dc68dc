-- What a finished job did, as JSON written by its producer (a learn job: counts per outcome and
-- the memories the quota refused). NULL until it succeeds. Keep in step with ../postgres.
ALTER TABLE jobs ADD COLUMN result TEXT;
