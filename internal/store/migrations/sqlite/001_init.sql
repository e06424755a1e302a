-- Initial metadata schema (SQLite). Keep in step with ../postgres/001_init.sql:
-- same tables, columns and indexes; only the column types differ.
-- Times are UTC RFC 3339 text with nine fractional digits, so they sort as text.

CREATE TABLE "streams" (
    "name"       TEXT NOT NULL PRIMARY KEY,
    "state"      TEXT NOT NULL,
    "reason"     TEXT NOT NULL DEFAULT '',
    "updated_at" TEXT NOT NULL
) STRICT;

CREATE TABLE "objects" (
    "stream"      TEXT NOT NULL,
    "schema_name" TEXT NOT NULL,
    "table_name"  TEXT NOT NULL,
    "status"      TEXT NOT NULL DEFAULT '',
    "reason"      TEXT NOT NULL DEFAULT '',
    "loaded"      INTEGER NOT NULL DEFAULT 0 CHECK ("loaded" IN (0, 1)),
    "backfill_id" INTEGER NOT NULL DEFAULT 0,
    "columns"     TEXT NOT NULL DEFAULT '[]',
    "updated_at"  TEXT NOT NULL,
    PRIMARY KEY ("stream", "schema_name", "table_name")
) STRICT;

CREATE TABLE "backfills" (
    "id"               INTEGER PRIMARY KEY AUTOINCREMENT,
    "stream"           TEXT NOT NULL,
    "schema_name"      TEXT NOT NULL,
    "table_name"       TEXT NOT NULL,
    "started_by"       TEXT NOT NULL,
    "options"          TEXT NOT NULL DEFAULT '{}',
    "status"           TEXT NOT NULL,
    "error"            TEXT NOT NULL DEFAULT '',
    "created_at"       TEXT NOT NULL,
    "started_at"       TEXT,
    "finished_at"      TEXT,
    "loaded_at"        TEXT,
    "rows_read"        INTEGER NOT NULL DEFAULT 0,
    "rows_written"     INTEGER NOT NULL DEFAULT 0,
    "rows_removed"     INTEGER NOT NULL DEFAULT 0,
    "bytes"            INTEGER NOT NULL DEFAULT 0,
    "chunks"           INTEGER NOT NULL DEFAULT 0,
    "window_conflicts" INTEGER NOT NULL DEFAULT 0,
    "retries"          INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX "backfills_object_idx" ON "backfills" ("stream", "schema_name", "table_name", "id");
CREATE INDEX "backfills_created_at_idx" ON "backfills" ("created_at");
CREATE INDEX "backfills_status_idx" ON "backfills" ("status", "id");

CREATE TABLE "counters" (
    "stream"           TEXT NOT NULL,
    "schema_name"      TEXT NOT NULL,
    "table_name"       TEXT NOT NULL,
    "day"              TEXT NOT NULL, -- UTC day, YYYY-MM-DD
    "events_processed" INTEGER NOT NULL DEFAULT 0,
    "events_loaded"    INTEGER NOT NULL DEFAULT 0,
    "bytes_processed"  INTEGER NOT NULL DEFAULT 0,
    "bytes_loaded"     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY ("stream", "schema_name", "table_name", "day")
) STRICT;

CREATE INDEX "counters_day_idx" ON "counters" ("day");
