-- Several objects initiated together form one run: one id, one record,
-- completed when every member backfill is. Each backfill records the verify
-- that ended it. Keep in step with ../postgres/004_runs_verify.sql.
CREATE TABLE "backfill_runs" (
    "id"         INTEGER PRIMARY KEY AUTOINCREMENT,
    "stream"     TEXT NOT NULL,
    "started_by" TEXT NOT NULL,
    "created_at" TEXT NOT NULL
);

ALTER TABLE "backfills" ADD COLUMN "run_id" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "backfills" ADD COLUMN "verify" TEXT NOT NULL DEFAULT '{}';
CREATE INDEX "backfills_run_idx" ON "backfills" ("run_id") WHERE "run_id" <> 0;
