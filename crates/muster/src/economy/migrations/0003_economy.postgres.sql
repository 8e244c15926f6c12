-- Wallets, item stacks, and the ledger recording every change to them (crates/muster/src/economy).
-- Balances and counts never go below zero; BIGINT keeps them at most 2^63-1.
CREATE TABLE wallets (
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    currency TEXT NOT NULL,
    amount BIGINT NOT NULL CONSTRAINT wallets_amount_not_negative CHECK (amount >= 0),
    PRIMARY KEY (user_id, currency)
);

-- One row per stack: 1,000,000 of an item is one row with count 1000000.
CREATE TABLE inventory (
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    count BIGINT NOT NULL CONSTRAINT inventory_count_not_negative CHECK (count >= 0),
    properties TEXT NOT NULL DEFAULT '{}',
    update_time_ms BIGINT NOT NULL,
    PRIMARY KEY (user_id, item_id)
);

-- Append-only. `changes` holds the deltas, `balances` what the touched balances became (both
-- JSON: {"wallet":{"coins":-10},"items":{"sword":1}}). An idempotency key is used once per user.
CREATE TABLE ledger (
    id BIGSERIAL PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    changes TEXT NOT NULL,
    balances TEXT NOT NULL,
    reason TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    idempotency_key TEXT,
    create_time_ms BIGINT NOT NULL
);
CREATE INDEX ledger_user_id ON ledger (user_id, id);
CREATE UNIQUE INDEX ledger_idempotency_key ON ledger (user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
