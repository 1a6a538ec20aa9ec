-- The names of the users each queued job names (a hash of each identifier's index
-- key, `track::partition::name`), so that a request finds the queued jobs that may
-- concern its users with one indexed lookup, instead of every server indexing the
-- whole queue in memory (docs/decisions/postgres.md, postgres-read-your-writes).
-- A job without names (queued before this, or by a server of an earlier version)
-- may name anyone: requests read it whatever users they name.
ALTER TABLE queue ADD COLUMN names bigint[];
CREATE INDEX queue_names ON queue USING gin (names);
CREATE INDEX queue_unnamed ON queue (seq) WHERE names IS NULL;
