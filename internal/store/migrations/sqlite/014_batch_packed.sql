-- A backfill's instances as recorded, in one value of a table of its own
-- (internal/store/batch_packed.go; SQLite rewrites a whole row, blob and
-- all, whenever one of its columns changes): a restart decodes it instead
-- of reading every instance's row, and reads whole only the rows changed
-- since. "updated"
-- marks those: the store's own UPDATEs set it, and the trigger sets it on
-- any other (an operator's in sqlite3, say). Unlike PostgreSQL's, no
-- partial index finds them: SQLite maintains one on every UPDATE that sets
-- "updated", which made dispatch 2.3 times slower; a restart's scan of the
-- backfill's rows for them costs a few tenths of a second instead. Keep in
-- step with ../postgres/014_batch_packed.sql.
CREATE TABLE "batch_backfill_packed" (
    "backfill_id" INTEGER PRIMARY KEY REFERENCES "batch_backfills" ("id"),
    "value"       BLOB NOT NULL
);
ALTER TABLE "batch_instances" ADD COLUMN "updated" INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER "batch_instances_updated" AFTER UPDATE ON "batch_instances"
    FOR EACH ROW WHEN NOT NEW."updated"
BEGIN
    UPDATE "batch_instances" SET "updated" = 1 WHERE "id" = NEW."id";
END;
-- Dependencies or instances removed or changed by hand leave the packed
-- value behind them: it is dropped, and a restart reads the rows.
CREATE TRIGGER "batch_instances_packed_drop" AFTER DELETE ON "batch_instances"
    FOR EACH ROW
BEGIN
    DELETE FROM "batch_backfill_packed" WHERE "backfill_id" = OLD."backfill_id";
END;
CREATE TRIGGER "batch_instance_deps_packed_drop_update" AFTER UPDATE ON "batch_instance_deps"
    FOR EACH ROW
BEGIN
    DELETE FROM "batch_backfill_packed" WHERE "backfill_id" IN
        (SELECT "backfill_id" FROM "batch_instances" WHERE "id" IN (OLD."instance_id", NEW."instance_id"));
END;
CREATE TRIGGER "batch_instance_deps_packed_drop_delete" AFTER DELETE ON "batch_instance_deps"
    FOR EACH ROW
BEGIN
    DELETE FROM "batch_backfill_packed" WHERE "backfill_id" IN
        (SELECT "backfill_id" FROM "batch_instances" WHERE "id" = OLD."instance_id");
END;
