-- The schema of migrations/0001_init.sql and 0002_guard.sql in PostgreSQL's
-- dialect, for `engage serve --db postgres://...`. The tables and columns are the
-- same (a test compares them); where the dialects differ:
-- - BLOB is bytea, INTEGER is bigint, keys compare by bytes (COLLATE "C"), as
--   SQLite's BINARY collation does.
-- - The queue's sequence numbers come from `queue_tail`, a row every enqueue
--   updates in its transaction: enqueues that run at once on several servers take
--   turns on that row, so a job is visible only after every job numbered before it
--   (a sequence would let job 11 commit before job 10, and an applier read past 10).
-- - No `guard` table: PostgreSQL transactions check expectations in code.

CREATE TABLE IF NOT EXISTS docs (
    tbl     integer NOT NULL,
    key     text    COLLATE "C" NOT NULL,
    version bigint  NOT NULL,
    value   bytea   NOT NULL,
    PRIMARY KEY (tbl, key)
);

CREATE TABLE IF NOT EXISTS queue (
    seq bigint PRIMARY KEY,
    job bytea  NOT NULL
);

CREATE TABLE IF NOT EXISTS queue_cursor (
    id      integer PRIMARY KEY CHECK (id = 1),
    applied bigint  NOT NULL
);
INSERT INTO queue_cursor (id, applied) VALUES (1, 0) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS queue_tail (
    id   integer PRIMARY KEY CHECK (id = 1),
    tail bigint  NOT NULL
);
INSERT INTO queue_tail (id, tail) VALUES (1, 0) ON CONFLICT DO NOTHING;
