-- Revocation is final: a revoked token keeps its row, marked with when it
-- was revoked, so `token list` shows it and a server that ever had a token
-- never counts as having none (which once reopened writes to everyone).
-- A new token may reuse a revoked one's name.
ALTER TABLE tokens ADD COLUMN revoked_at BIGINT;
