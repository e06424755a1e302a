-- Late data (docs/lineage.md): values of date columns in rows that live
-- changes touched while older than their read's late_after, waiting to be
-- handed to proposals (which deletes them, in the same transaction). One
-- row per value until then. Keep in step with ../postgres/010_late_dates.sql.
CREATE TABLE "late_dates" (
    "id"          INTEGER PRIMARY KEY AUTOINCREMENT,
    "stream"      TEXT NOT NULL,
    "object"      TEXT NOT NULL,
    "column_name" TEXT NOT NULL,
    "value"       TEXT NOT NULL,
    "at"          TEXT NOT NULL,
    UNIQUE ("stream", "object", "column_name", "value")
) STRICT;
