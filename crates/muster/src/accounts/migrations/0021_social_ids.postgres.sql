-- An account's ids at the identity providers (Apple, Google, Facebook, Facebook Instant Games,
-- Steam, Game Center): each links one account at most.
ALTER TABLE users ADD COLUMN facebook_id TEXT;
ALTER TABLE users ADD COLUMN google_id TEXT;
ALTER TABLE users ADD COLUMN gamecenter_id TEXT;
ALTER TABLE users ADD COLUMN steam_id TEXT;
ALTER TABLE users ADD COLUMN apple_id TEXT;
ALTER TABLE users ADD COLUMN facebook_instant_game_id TEXT;
CREATE UNIQUE INDEX users_facebook_id_key ON users (facebook_id);
CREATE UNIQUE INDEX users_google_id_key ON users (google_id);
CREATE UNIQUE INDEX users_gamecenter_id_key ON users (gamecenter_id);
CREATE UNIQUE INDEX users_steam_id_key ON users (steam_id);
CREATE UNIQUE INDEX users_apple_id_key ON users (apple_id);
CREATE UNIQUE INDEX users_facebook_instant_game_id_key ON users (facebook_instant_game_id);
