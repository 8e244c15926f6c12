-- Wallets, item stacks, and the ledger recording every change to them (crates/muster/src/economy).
-- Balances and counts never go below zero; the economy module also keeps them at most 2^63-1.
CREATE TABLE wallets (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    currency TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (user_id, currency)
) WITHOUT ROWID;

-- One row per stack: 1,000,000 of an item is one row with count 1000000.
CREATE TABLE inventory (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    item_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL CHECK (count >= 0),
    properties TEXT NOT NULL DEFAULT '{}',
    update_time_ms BIGINT NOT NULL,
    PRIMARY KEY (user_id, item_id)
) WITHOUT ROWID;

-- Append-only. `changes` holds the deltas, `balances` what the touched balances became (both
-- JSON: {"wallet":{"coins":-10},"items":{"sword":1}}). An idempotency key is used once per user.
CREATE TABLE ledger (
    id INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
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
