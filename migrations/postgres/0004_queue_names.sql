-- The names of the users each queued job names (a hash of each identifier's index
-- key, `track::partition::name`), so that a request finds the queued jobs that may
-- concern its users with one indexed lookup, instead of every server indexing the
-- whole queue in memory (docs/decisions/postgres.md, postgres-queue-names).
-- A job without names (queued before this, or by a server of an earlier version)
-- may name anyone: requests read it whatever users they name. The index's list of
-- entries not yet merged is kept to 1 MB: every lookup reads all of it (at the
-- default 4 MB a read during a backlog took up to 0.5 s), and every insert that
-- fills it merges it (at 64 kB acknowledging fell by a fifth; merged at each
-- insert, fastupdate off, by half). docs/performance.md has the runs.
ALTER TABLE queue ADD COLUMN names bigint[];
CREATE INDEX queue_names ON queue USING gin (names) WITH (gin_pending_list_limit = 1024);
CREATE INDEX queue_unnamed ON queue (seq) WHERE names IS NULL;
