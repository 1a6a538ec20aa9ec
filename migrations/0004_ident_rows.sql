-- Where each identifier entry's profile is: the rowid of the profile's row in `docs`
-- when the entry was last written by host-native (NULL: not known). Only a hint: a
-- reader checks that the row it finds there holds that profile, and reads it by key
-- otherwise. Read by rowid, a profile is one B-tree descent instead of two (the
-- key's index, then the table): see docs/performance.md. D1 never reads it, so the
-- edge leaves it NULL; host-native fills it for entries written before this
-- migration (`FILL_IDENT_ROWS` in host-native's `store::sqlite::connection`).
ALTER TABLE idents ADD COLUMN at INTEGER;
