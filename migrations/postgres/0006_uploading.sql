-- A multipart upload's run exists while its files still arrive, so each
-- rank is analyzed as soon as it is stored (`POST /api/runs` with several
-- files). Until the last file is stored the run is `uploading`: left out of
-- the runs list, never marked done (the cross-rank summary waits for every
-- rank), and deleted with its blobs if the upload fails.
ALTER TABLE runs ADD COLUMN uploading BIGINT NOT NULL DEFAULT 0;
