-- The values of tracked date columns in the rows a backfill (or repair)
-- changed in the destination: what places those rows on business dates
-- (docs/lineage.md). Written before the destination commits the chunk,
-- so that a crash after its commit loses none. Keep in step with
-- ../sqlite/008_changed_dates.sql.
CREATE TABLE "changed_dates" (
    "stream"      TEXT NOT NULL,
    "backfill_id" BIGINT NOT NULL,
    "object"      TEXT NOT NULL,
    "column_name" TEXT NOT NULL,
    "value"       TEXT NOT NULL,
    "at"          TIMESTAMPTZ NOT NULL,
    PRIMARY KEY ("stream", "backfill_id", "object", "column_name", "value")
);
