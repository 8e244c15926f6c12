-- Matchmaker tickets name their user, so a cluster holds each user to
-- matchmaker.max_tickets_per_user across every node.
ALTER TABLE matchmaker_tickets ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
CREATE INDEX matchmaker_tickets_user ON matchmaker_tickets (user_id);
