-- The matchmaker of a cluster (crate::matches::shared_matchmaker): every node adds its players'
-- tickets here, and the one node holding the 'matchmaker' lease groups them. Unused by a single
-- node, which keeps its tickets in memory.
CREATE TABLE matchmaker_tickets (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    -- The node the ticket's session is on, and that node's run (Unix ms at its start): a node
    -- that restarts drops the tickets of its previous run.
    node TEXT NOT NULL,
    incarnation BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    -- The ticket itself (presence, query, counts, properties) as JSON, read by the pass.
    body TEXT NOT NULL
);
CREATE INDEX matchmaker_tickets_session ON matchmaker_tickets (session_id);
CREATE INDEX matchmaker_tickets_node ON matchmaker_tickets (node);
-- Leases: one holder at a time per name, until expires_at_ms (the database's clock, so the
-- nodes' clocks do not matter). epoch grows at every change of holder: a fencing token.
CREATE TABLE cluster_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
