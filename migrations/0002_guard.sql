-- Commit guards for stores without interactive transactions (D1). A commit is one
-- batch; each expectation is an `INSERT INTO guard (ok) SELECT 0 WHERE <it fails>`
-- placed before the write it protects. A failing expectation inserts ok = 0, the
-- CHECK aborts the statement and the whole batch rolls back; a holding one inserts
-- nothing, so the table is always empty. The native host applies this too (unused
-- there: SQLite transactions check expectations in code) so both schemas stay equal.
CREATE TABLE IF NOT EXISTS guard (
    ok INTEGER NOT NULL CONSTRAINT expectation_failed CHECK (ok = 1)
);
