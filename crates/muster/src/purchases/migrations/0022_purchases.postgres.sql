-- Validated in-app purchases (Nakama's `purchase`), one row per store transaction id across the
-- whole database: a receipt stored twice is found, never stored again (`replays` counts the
-- later stores; `seen_before` is `replays > 0`). A purchase outlives its owner's account (its
-- owner becomes NULL), so a replay on a new account is still seen.
CREATE TABLE purchases (
    transaction_id TEXT PRIMARY KEY CHECK (length(transaction_id) > 0),
    user_id UUID REFERENCES users (id) ON DELETE SET NULL,
    store INTEGER NOT NULL,
    product_id TEXT NOT NULL,
    purchase_time_ms BIGINT NOT NULL,
    -- 0: not refunded.
    refund_time_ms BIGINT NOT NULL DEFAULT 0,
    environment INTEGER NOT NULL,
    raw_response TEXT NOT NULL,
    replays BIGINT NOT NULL DEFAULT 0,
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL
);
CREATE INDEX purchases_by_user ON purchases (user_id, purchase_time_ms, transaction_id);
CREATE INDEX purchases_by_time ON purchases (purchase_time_ms, transaction_id);

-- Validated subscriptions (Nakama's `subscription`), one row per original transaction id: each
-- renewal, validation or notification updates it (expiry, refund, latest raw answers).
CREATE TABLE subscriptions (
    original_transaction_id TEXT PRIMARY KEY CHECK (length(original_transaction_id) > 0),
    user_id UUID REFERENCES users (id) ON DELETE SET NULL,
    store INTEGER NOT NULL,
    product_id TEXT NOT NULL,
    purchase_time_ms BIGINT NOT NULL,
    expire_time_ms BIGINT NOT NULL,
    -- 0: not refunded.
    refund_time_ms BIGINT NOT NULL DEFAULT 0,
    environment INTEGER NOT NULL,
    raw_response TEXT NOT NULL DEFAULT '',
    raw_notification TEXT NOT NULL DEFAULT '',
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL
);
CREATE INDEX subscriptions_by_user ON subscriptions (user_id, purchase_time_ms, original_transaction_id);
CREATE INDEX subscriptions_by_product ON subscriptions (user_id, product_id, expire_time_ms);
CREATE INDEX subscriptions_by_time ON subscriptions (purchase_time_ms, original_transaction_id);
