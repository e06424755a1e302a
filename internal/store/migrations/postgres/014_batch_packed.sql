-- A backfill's instances as recorded, in one value of a table of its own
-- (internal/store/batch_packed.go; the backfill's own row, updated as it
-- runs, stays small): a restart decodes it instead of reading every
-- instance's row, and reads whole only the rows changed since. "updated"
-- marks those: the store's own UPDATEs set it, and the trigger sets it on
-- any other (an operator's in psql, say); a partial index finds them
-- (SQLite has none). The value is packed already; it is stored without
-- compression. Keep in step with ../sqlite/014_batch_packed.sql.
CREATE TABLE "batch_backfill_packed" (
    "backfill_id" BIGINT PRIMARY KEY REFERENCES "batch_backfills" ("id"),
    "value"       BYTEA NOT NULL
);
ALTER TABLE "batch_backfill_packed" ALTER COLUMN "value" SET STORAGE EXTERNAL;
ALTER TABLE "batch_instances" ADD COLUMN "updated" BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX "batch_instances_updated_idx" ON "batch_instances" ("backfill_id", "id") WHERE "updated";
CREATE FUNCTION "tidemark_batch_instance_updated"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW."updated" := true;
    RETURN NEW;
END
$$;
CREATE TRIGGER "batch_instances_updated" BEFORE UPDATE ON "batch_instances"
    FOR EACH ROW WHEN (NOT NEW."updated") EXECUTE FUNCTION "tidemark_batch_instance_updated"();
-- Dependencies or instances removed or changed by hand leave the packed
-- value behind them: it is dropped, and a restart reads the rows.
CREATE FUNCTION "tidemark_batch_packed_drop"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'batch_instances' THEN
        DELETE FROM "batch_backfill_packed" WHERE "backfill_id" = OLD."backfill_id";
    ELSE
        DELETE FROM "batch_backfill_packed" WHERE "backfill_id" IN
            (SELECT "backfill_id" FROM "batch_instances" WHERE "id" = OLD."instance_id");
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM "batch_backfill_packed" WHERE "backfill_id" IN
                (SELECT "backfill_id" FROM "batch_instances" WHERE "id" = NEW."instance_id");
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER "batch_instances_packed_drop" AFTER DELETE ON "batch_instances"
    FOR EACH ROW EXECUTE FUNCTION "tidemark_batch_packed_drop"();
CREATE TRIGGER "batch_instance_deps_packed_drop" AFTER UPDATE OR DELETE ON "batch_instance_deps"
    FOR EACH ROW EXECUTE FUNCTION "tidemark_batch_packed_drop"();
