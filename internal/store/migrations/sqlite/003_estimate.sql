-- A stream backfill records, when it becomes active, the source's estimate
-- of the rows it will read (0: unknown). Keep in step with
-- ../postgres/003_estimate.sql.
ALTER TABLE "backfills" ADD COLUMN "rows_estimate" INTEGER NOT NULL DEFAULT 0;
