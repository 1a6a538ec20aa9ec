-- The queue in partitions (docs/decisions/postgres.md, postgres-partitions), as
-- many as ENGAGE_QUEUE_PARTITIONS says when the database is made (64 by default),
-- each with the sequence number its appliers have applied through and the server
-- holding its lease; the servers applying, each seen within the last seconds. The
-- jobs queued before are split into partitions by the server that migrates, in
-- Rust (it must decode them), in this same transaction; it then makes `part`
-- required and drops the one cursor, so that a server of an earlier version can
-- neither queue nor apply a job here (it answers 503 until it is upgraded).
CREATE TABLE queue_parts (
    part        integer PRIMARY KEY,
    applied     bigint NOT NULL DEFAULT 0,
    holder      text,
    lease_until timestamptz
);

CREATE TABLE queue_appliers (
    holder text PRIMARY KEY,
    seen   timestamptz NOT NULL
);

ALTER TABLE queue ADD COLUMN part integer;
CREATE INDEX queue_part_seq ON queue (part, seq);
