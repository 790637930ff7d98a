-- Baselines by name: `PATCH /api/runs/{id}` with `baseline_of` makes a run
-- the current baseline of a name (one run per name; a run may be the
-- baseline of several names). Deleting the run deletes its baselines.
CREATE TABLE baselines (
    name    TEXT PRIMARY KEY,
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    set_at  BIGINT NOT NULL
);
CREATE INDEX baselines_run ON baselines (run_id);

-- Upload groups: the ranks of one profiling cycle, uploaded one file at a
-- time by separate processes (`POST /api/runs?group=KEY&rank=N`), gather
-- into one run. The first upload of a key claims it (an upsert, so two
-- ranks arriving together agree on one run); a key older than the
-- grouping window starts a new run.
CREATE TABLE run_groups (
    group_key  TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
