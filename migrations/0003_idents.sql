-- The identifier index (documents of table 4, `Table::Ident`) in a table of its own,
-- WITHOUT ROWID: its rows are small (a key and a service id), and stored in the key's
-- B-tree a lookup is one descent instead of two (the key's index in `docs`, then the
-- row). Same columns and key as `docs`, so a statement differs only by the name.
CREATE TABLE IF NOT EXISTS idents (
    tbl     INTEGER NOT NULL CHECK (tbl = 4),
    key     TEXT    NOT NULL,
    version INTEGER NOT NULL,
    value   BLOB    NOT NULL,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID;

-- Entries written before this migration move over, versions and all.
INSERT INTO idents (tbl, key, version, value) SELECT tbl, key, version, value FROM docs WHERE tbl = 4 ORDER BY key;
DELETE FROM docs WHERE tbl = 4;
