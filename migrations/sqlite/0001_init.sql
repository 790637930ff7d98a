-- Kinetoscope schema (SQLite). Times are Unix milliseconds; JSON is TEXT.
-- Keep in step with ../postgres/0001_init.sql: the queries are shared.

CREATE TABLE runs (
    id            TEXT PRIMARY KEY,          -- 128 random bits, base64url
    name          TEXT NOT NULL,
    tags          TEXT NOT NULL DEFAULT '[]',   -- JSON array of strings
    note          TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    status        TEXT NOT NULL,             -- queued|capturing|analyzing|done|failed
    stage         TEXT NOT NULL DEFAULT '',  -- progress in words
    error         TEXT,
    source        TEXT NOT NULL DEFAULT 'upload',  -- upload|capture
    options       TEXT NOT NULL DEFAULT '{}',      -- analysis options JSON
    capture       TEXT,                      -- capture request JSON
    cross_summary TEXT,                      -- RanksSummary JSON (multi-rank runs)
    headline      TEXT                       -- small JSON for the runs list (devices, steps, top finding)
);
CREATE INDEX runs_created ON runs (created_at);

CREATE TABLE traces (
    run_id           TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    rank             BIGINT NOT NULL,
    file_name        TEXT NOT NULL,
    blob_key         TEXT NOT NULL,
    bytes            BIGINT NOT NULL,
    sha256           TEXT NOT NULL,
    encoding         TEXT NOT NULL,          -- json|gzip|zstd
    status           TEXT NOT NULL,          -- queued|analyzing|done|failed
    error            TEXT,
    progress_bytes   BIGINT NOT NULL DEFAULT 0,
    analyzer_version BIGINT,
    summary          TEXT,                   -- Summary JSON
    analyses         BIGINT NOT NULL DEFAULT 0,  -- completed analyses (exactly-once checks)
    analyzed_at      BIGINT,
    PRIMARY KEY (run_id, rank)
);

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT NOT NULL,              -- analyze|capture
    run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    rank         BIGINT NOT NULL DEFAULT 0,
    state        TEXT NOT NULL,              -- queued|running|done|failed
    attempts     BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL DEFAULT 5,
    run_after    BIGINT NOT NULL,
    lease_until  BIGINT,
    worker       TEXT,
    error        TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX jobs_claim ON jobs (state, run_after);
-- At most one live job per (kind, run, rank): re-enqueueing is idempotent.
CREATE UNIQUE INDEX jobs_live ON jobs (kind, run_id, rank) WHERE state IN ('queued', 'running');

CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,         -- sha256 hex of the token
    created_at BIGINT NOT NULL
);
