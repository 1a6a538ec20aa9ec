-- The one schema of Engage, applied by host-native at start-up and by
-- `wrangler d1 migrations apply` at the edge. SQLite dialect (D1 accepts it).

-- Versioned JSON documents, one table for all kinds (see core/src/store.rs: Table).
CREATE TABLE IF NOT EXISTS docs (
    tbl     INTEGER NOT NULL,
    key     TEXT    NOT NULL,
    version INTEGER NOT NULL,
    value   BLOB    NOT NULL,
    PRIMARY KEY (tbl, key)
);

-- The durable queue of accepted /users/track jobs: appended at the end, read from
-- the front, so acknowledging a request is one sequential write.
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job BLOB NOT NULL
);

-- Jobs with seq <= applied are applied; committed atomically with their effects.
CREATE TABLE IF NOT EXISTS queue_cursor (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    applied INTEGER NOT NULL
);
INSERT OR IGNORE INTO queue_cursor (id, applied) VALUES (1, 0);
