-- An operator's view of one player (the console's account page, an account's export): the
-- player's chat messages across channels, newest first, and their storage objects across
-- collections, in (collection, key) order, compared byte by byte as SQLite compares them.
CREATE INDEX channel_messages_sender_seq ON channel_messages (sender_id, seq);
CREATE INDEX storage_owner_collections ON storage (user_id, collection COLLATE "C", key COLLATE "C");
