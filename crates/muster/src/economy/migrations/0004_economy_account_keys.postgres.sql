-- Nothing to change on PostgreSQL: its economy tables key accounts by the 16-byte `uuid` type,
-- already as compact as an integer key for its indexes. The SQLite engine's migration 0004 moves
-- its 36-character text ids to integer keys; the two engines keep one numbering of versions.
SELECT 1;
