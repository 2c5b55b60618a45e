-- Groups: the processes sharing the database that split a piece of work (a Discord bot's gateway
-- shards) renew a membership each; one that stops renewing drops out when it expires.
CREATE TABLE members (
    grp TEXT NOT NULL,
    member TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (grp, member)
);
