-- A stream backfill records, when it becomes active, the source's estimate
-- of the rows it will read (0: unknown). Keep in step with
-- ../sqlite/003_estimate.sql.
ALTER TABLE "backfills" ADD COLUMN "rows_estimate" BIGINT NOT NULL DEFAULT 0;
