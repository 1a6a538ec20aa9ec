-- Rate-limit counters that the servers sharing the database count together: one row
-- per key (workspace and limit bucket) and fixed window (its start, in seconds
-- since the epoch), forgotten after `expires` (seconds). PostgreSQL only: SQLite
-- and D1 have one process (or isolate) counting in memory.
CREATE TABLE IF NOT EXISTS rate_windows (
    key     text   COLLATE "C" NOT NULL,
    start   bigint NOT NULL,
    n       bigint NOT NULL,
    expires bigint NOT NULL,
    PRIMARY KEY (key, start)
);
