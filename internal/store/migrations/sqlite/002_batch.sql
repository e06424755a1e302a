-- Batch engine (SQLite): recurring tasks' backfills, their instances and the
-- dependency edges between instances. Keep in step with ../postgres/002_batch.sql.

CREATE TABLE "batch_backfills" (
    "id"          INTEGER PRIMARY KEY AUTOINCREMENT,
    "name"        TEXT NOT NULL,
    "task"        TEXT NOT NULL,
    "started_by"  TEXT NOT NULL,
    "request"     TEXT NOT NULL DEFAULT '', -- JSON as submitted, '' for none
    "state"       TEXT NOT NULL,
    "error"       TEXT NOT NULL DEFAULT '',
    "created_at"  TEXT NOT NULL,
    "run_at"      TEXT NOT NULL,
    "started_at"  TEXT,
    "finished_at" TEXT,
    "instances"   INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX "batch_backfills_task_idx" ON "batch_backfills" ("task", "created_at");
CREATE INDEX "batch_backfills_created_at_idx" ON "batch_backfills" ("created_at");
CREATE INDEX "batch_backfills_state_idx" ON "batch_backfills" ("state", "id");

-- Instance ids are assigned by the store (MAX + 1 under the write lock), so a
-- backfill's instances are inserted in bulk without a RETURNING per row.
CREATE TABLE "batch_instances" (
    "id"             INTEGER PRIMARY KEY,
    "backfill_id"    INTEGER REFERENCES "batch_backfills" ("id"), -- NULL: the recurring schedule
    "task"           TEXT NOT NULL,
    "biz_time"       TEXT NOT NULL,
    "biz_end"        TEXT NOT NULL,
    "scheduled"      TEXT NOT NULL,
    "group"          INTEGER NOT NULL DEFAULT 0,
    "seq"            INTEGER NOT NULL DEFAULT 0,
    "order"          INTEGER NOT NULL DEFAULT 0,
    "mode"           TEXT NOT NULL,
    "resource_group" TEXT NOT NULL DEFAULT '',
    "state"          TEXT NOT NULL,
    "reason"         TEXT NOT NULL DEFAULT '',
    "attempt"        INTEGER NOT NULL DEFAULT 0,
    "next_try"       TEXT,
    "started_at"     TEXT,
    "finished_at"    TEXT,
    "pid"            INTEGER NOT NULL DEFAULT 0,
    "pgid"           INTEGER NOT NULL DEFAULT 0,
    "proc_start"     INTEGER NOT NULL DEFAULT 0, -- uint64 bits
    "sql_tag"        TEXT NOT NULL DEFAULT '',
    "rendered"       TEXT NOT NULL DEFAULT '',
    "outputs"        TEXT NOT NULL DEFAULT '{}', -- JSON object
    "error"          TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX "batch_instances_backfill_idx" ON "batch_instances" ("backfill_id", "id");
CREATE INDEX "batch_instances_task_time_idx" ON "batch_instances" ("task", "biz_time");
CREATE INDEX "batch_instances_state_idx" ON "batch_instances" ("state", "backfill_id");
-- The recurring schedule has one instance per task and business time.
CREATE UNIQUE INDEX "batch_instances_schedule_uniq" ON "batch_instances" ("task", "biz_time") WHERE "backfill_id" IS NULL;
-- At most one instance of a task's cycle runs at a time, schedule and
-- backfills together. (Columns in the other order than the schedule index,
-- so that SQLite's constraint message tells the two apart.)
CREATE UNIQUE INDEX "batch_instances_running_uniq" ON "batch_instances" ("biz_time", "task") WHERE "state" = 'running';

-- "instance_id" waits for "upstream_id". Both are "batch_instances" ids; only
-- the store writes them (checking that they exist), and without foreign keys a
-- backfill's million edges insert several times faster.
CREATE TABLE "batch_instance_deps" (
    "instance_id" INTEGER NOT NULL,
    "upstream_id" INTEGER NOT NULL,
    PRIMARY KEY ("instance_id", "upstream_id")
) STRICT, WITHOUT ROWID;

CREATE INDEX "batch_instance_deps_upstream_idx" ON "batch_instance_deps" ("upstream_id", "instance_id");

CREATE TABLE "batch_instance_logs" (
    "instance_id" INTEGER NOT NULL REFERENCES "batch_instances" ("id"),
    "attempt"     INTEGER NOT NULL,
    "log"         TEXT NOT NULL,
    "updated_at"  TEXT NOT NULL,
    PRIMARY KEY ("instance_id", "attempt")
) STRICT;

-- The recurring scheduler's progress: the last business time it planned.
CREATE TABLE "batch_schedule_cursors" (
    "task"       TEXT NOT NULL PRIMARY KEY,
    "last_time"  TEXT NOT NULL,
    "updated_at" TEXT NOT NULL
) STRICT;
