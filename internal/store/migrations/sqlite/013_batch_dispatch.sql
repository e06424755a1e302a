-- The attempts a cluster's batch leader queues for its nodes
-- (docs/cluster.md). A cluster needs a PostgreSQL store, so SQLite never
-- writes here; the table keeps both dialects' schemas in step with
-- ../postgres/013_batch_dispatch.sql.
CREATE TABLE "batch_dispatch" (
    "instance_id" INTEGER PRIMARY KEY REFERENCES "batch_instances" ("id") ON DELETE CASCADE,
    "attempt"     INTEGER NOT NULL,
    "spec"        TEXT NOT NULL,
    "queued_at"   TEXT NOT NULL,
    "node"        TEXT,
    "epoch"       INTEGER,
    "claimed_at"  TEXT,
    "stop"        INTEGER NOT NULL DEFAULT 0,
    "result"      TEXT
);
