-- The names of the users each queued job names (a hash of each identifier's index
-- key, `track::partition::name`), so that a request finds the queued jobs that may
-- concern its users with one indexed lookup, instead of every server indexing the
-- whole queue in memory (docs/decisions/postgres.md, postgres-read-your-writes).
-- A job without names (queued before this, or by a server of an earlier version)
-- may name anyone: requests read it whatever users they name. The index's list of
-- entries not yet merged is kept to its least (64 kB): every lookup reads all of
-- it, and at the default 4 MB a lookup took 40-60 ms during a backlog; merging into
-- the index at each insert instead (fastupdate off) halved the acknowledgements.
ALTER TABLE queue ADD COLUMN names bigint[];
CREATE INDEX queue_names ON queue USING gin (names) WITH (gin_pending_list_limit = 64);
CREATE INDEX queue_unnamed ON queue (seq) WHERE names IS NULL;
