-- Several nodes need a PostgreSQL metadata store (docs/cluster.md); a
-- SQLite store keeps one daemon. The tables exist so that both dialects
-- share one schema. Keep in step with ../postgres/011_cluster.sql.
CREATE TABLE "nodes" (
    "name"         TEXT PRIMARY KEY,
    "host"         TEXT NOT NULL,
    "pid"          INTEGER NOT NULL,
    "api"          TEXT NOT NULL,
    "config_hash"  TEXT NOT NULL,
    "started_at"   TEXT NOT NULL,
    "heartbeat_at" TEXT NOT NULL,
    "expires_at"   TEXT NOT NULL
) STRICT;
CREATE TABLE "leases" (
    "name"        TEXT PRIMARY KEY,
    "node"        TEXT NOT NULL,
    "epoch"       INTEGER NOT NULL,
    "acquired_at" TEXT NOT NULL,
    "expires_at"  TEXT NOT NULL
) STRICT;
CREATE INDEX "leases_node" ON "leases" ("node");
