-- Where each identifier entry's profile is: the rowid of the profile's row in `docs`
-- when the entry was last written by host-native (NULL: not known; D1 leaves it so).
-- Only a hint: a reader checks that the row it finds there holds that profile, and
-- reads it by key otherwise. Read by rowid, a profile is one B-tree descent instead
-- of two (the key's index, then the table): see docs/performance.md.
ALTER TABLE idents ADD COLUMN at INTEGER;

-- Entries written before this migration point at their profiles (tbl 3) at once:
-- a profile's key is its entry's workspace (up to the first U+001F) and service id.
UPDATE idents SET at = (
    SELECT rowid FROM docs
    WHERE tbl = 3 AND key = substr(idents.key, 1, instr(idents.key, char(31))) || CAST(idents.value AS TEXT)
);
