-- Several nodes on one PostgreSQL metadata store (docs/cluster.md). A node
-- records itself in "nodes" and renews its heartbeat; what one node at a
-- time may do (run a stream, lead the batch engine) is a row of "leases",
-- held until "expires_at" and renewed with the heartbeat. "epoch" grows by
-- one at each change of holder: destinations and the batch engine's writes
-- refuse an older epoch (fencing). Times are the metadata server's, so
-- nodes' clocks need not agree. Keep in step with ../sqlite/011_cluster.sql.
CREATE TABLE "nodes" (
    "name"         TEXT PRIMARY KEY,
    "host"         TEXT NOT NULL,
    "pid"          BIGINT NOT NULL,
    "api"          TEXT NOT NULL,
    "config_hash"  TEXT NOT NULL,
    "started_at"   TIMESTAMPTZ NOT NULL,
    "heartbeat_at" TIMESTAMPTZ NOT NULL,
    "expires_at"   TIMESTAMPTZ NOT NULL
);
CREATE TABLE "leases" (
    "name"        TEXT PRIMARY KEY,
    "node"        TEXT NOT NULL,
    "epoch"       BIGINT NOT NULL,
    "acquired_at" TIMESTAMPTZ NOT NULL,
    "expires_at"  TIMESTAMPTZ NOT NULL
);
CREATE INDEX "leases_node" ON "leases" ("node");
