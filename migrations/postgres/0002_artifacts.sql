-- Analysis artifacts: the named outputs of an analysis job, one row per
-- (run, rank, name). The summary stays in traces.summary (read far more
-- than written, served as stored text); other artifacts live in the blob
-- store under runs/{run}/artifacts/{rank}/{name}.v{analyzer_version}.
-- Rows go with their run (ON DELETE CASCADE, plus the explicit delete in
-- Db::delete_run, which also returns the blob keys to remove).
CREATE TABLE artifacts (
    run_id           TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    rank             BIGINT NOT NULL,
    name             TEXT NOT NULL,          -- summary|timeline
    blob_key         TEXT,                   -- NULL when kept in the database
    bytes            BIGINT NOT NULL,
    analyzer_version BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    PRIMARY KEY (run_id, rank, name)
);
