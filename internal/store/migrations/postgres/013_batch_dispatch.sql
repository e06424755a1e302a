-- The attempts a cluster's batch leader has claimed, waiting for a node to
-- run them (docs/cluster.md): a node with a free slot takes rows whose
-- "node" is null with FOR UPDATE SKIP LOCKED, records itself and its worker
-- lease's epoch, runs the attempt and writes how it ended into "result";
-- the leader records the end in the instance and deletes the row. "spec"
-- is what to run, without secrets: connections go by name, and the
-- daemon's variables a task inherits by name, each node filling in its
-- own. "stop" asks the running node to end the attempt. A lone daemon
-- runs its attempts itself and never writes here. Keep in step with
-- ../sqlite/013_batch_dispatch.sql.
CREATE TABLE "batch_dispatch" (
    "instance_id" BIGINT PRIMARY KEY REFERENCES "batch_instances" ("id") ON DELETE CASCADE,
    "attempt"     INT NOT NULL,
    "spec"        TEXT NOT NULL,
    "queued_at"   TIMESTAMPTZ NOT NULL DEFAULT now(),
    "node"        TEXT,
    "epoch"       BIGINT,
    "claimed_at"  TIMESTAMPTZ,
    "stop"        BOOLEAN NOT NULL DEFAULT false,
    "result"      TEXT
);
CREATE INDEX "batch_dispatch_queued" ON "batch_dispatch" ("queued_at", "instance_id") WHERE "node" IS NULL;
CREATE INDEX "batch_dispatch_node" ON "batch_dispatch" ("node") WHERE "node" IS NOT NULL;
