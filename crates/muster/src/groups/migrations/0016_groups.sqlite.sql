-- Groups (Nakama's groups): open (state 0 in Nakama, here open = 1) or closed; edge_count is
-- the members (superadmins, admins, members), kept by every change of membership.
CREATE TABLE groups (
    id TEXT PRIMARY KEY,
    creator_id TEXT NOT NULL,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    avatar_url TEXT NOT NULL DEFAULT '',
    lang_tag TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    open BOOLEAN NOT NULL,
    edge_count INTEGER NOT NULL,
    max_count INTEGER NOT NULL,
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL
);
-- Listing without a name filter: largest groups first.
CREATE INDEX groups_by_size ON groups (edge_count DESC, id);

-- A user's place in a group: 0 superadmin, 1 admin, 2 member, 3 join request, 4 banned.
-- Listed by state, then when the user got there.
CREATE TABLE group_members (
    group_id TEXT NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    state INTEGER NOT NULL,
    position BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_listing ON group_members (group_id, state, position, user_id);
CREATE INDEX group_members_of_user ON group_members (user_id, state, position, group_id);
