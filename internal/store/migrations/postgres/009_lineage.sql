-- Proposals to re-run the past cycles of a task whose rows backfills
-- changed (docs/lineage.md): one pending proposal per task gathers the
-- changes until it is submitted as a batch backfill (by tidemark once due,
-- when "auto", or by a person) or dismissed. lineage_handled lists the
-- stream backfills whose changed dates went into proposals, so a restart
-- hands none over twice. Keep in step with ../sqlite/009_lineage.sql.
CREATE TABLE "lineage_proposals" (
    "id"                BIGSERIAL PRIMARY KEY,
    "task"              TEXT NOT NULL,
    "state"             TEXT NOT NULL,
    "auto"              BOOLEAN NOT NULL,
    "times"             TEXT NOT NULL,
    "causes"            TEXT NOT NULL,
    "note"              TEXT NOT NULL DEFAULT '',
    "created_at"        TIMESTAMPTZ NOT NULL,
    "updated_at"        TIMESTAMPTZ NOT NULL,
    "due_at"            TIMESTAMPTZ NOT NULL,
    "batch_backfill_id" BIGINT NOT NULL DEFAULT 0,
    "decided_by"        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX "lineage_proposals_task" ON "lineage_proposals" ("task", "state");
CREATE TABLE "lineage_handled" (
    "backfill_id" BIGINT PRIMARY KEY,
    "at"          TIMESTAMPTZ NOT NULL
);
