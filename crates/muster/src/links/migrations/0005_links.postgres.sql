-- Invite links (crate::links). A link is never deleted, only disabled, so a code is never
-- reused for another URL and click counts keep their link.
CREATE TABLE links (
    code TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    -- Who created it: "user:<uuid>", "key" (the API key) or "public".
    owner TEXT NOT NULL,
    -- A plain link (no slug, expiry, visit limit or fallback): the owner's next request for the
    -- same URL gets this code again.
    reusable BOOLEAN NOT NULL,
    ios_url TEXT,
    android_url TEXT,
    desktop_url TEXT,
    expires_at_ms BIGINT,
    max_visits BIGINT,
    -- Visits taken against max_visits (kept for links with a limit only; every visit of every
    -- link is in link_clicks).
    visits BIGINT NOT NULL DEFAULT 0,
    disabled_at_ms BIGINT,
    create_time_ms BIGINT NOT NULL
);
-- The reverse index: one reusable link per owner and URL, enforced by the database (URLs are
-- capped at 2500 bytes, so an entry fits a B-tree page).
CREATE UNIQUE INDEX links_reusable ON links (owner, url) WHERE reusable;
-- Clicks per link per day (UTC days since 1970-01-01). Keyed by day first: the counts written
-- every second all belong to today, so they land in a few pages at the end of the tree instead
-- of one page per link all over it. A link's history is read day by day (day IN (...)).
CREATE TABLE link_clicks (
    day INTEGER NOT NULL,
    code TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (day, code)
);
