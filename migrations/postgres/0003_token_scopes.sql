-- Token lifecycle: a scope (upload: create runs and captures, what a CI job
-- needs; admin: also edit, delete, re-analyze), an optional expiry, and when
-- the token was last used. Tokens created before this migration keep the
-- power they had (admin). Revoking a token deletes its row.
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE tokens ADD COLUMN expires_at BIGINT;
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT;
