-- Matchmaker tickets name their user, so a cluster holds each user to
-- matchmaker.max_tickets_per_user across every node. (Tickets from before have the nil id: they
-- count for nobody.)
ALTER TABLE matchmaker_tickets
    ADD COLUMN user_id UUID NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000';
CREATE INDEX matchmaker_tickets_user ON matchmaker_tickets (user_id);
