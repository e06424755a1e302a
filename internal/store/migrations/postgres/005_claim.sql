-- The daemon that claimed the store (one row, id 1), so a second one can
-- name it when it refuses to start. The claim itself is a lock (see
-- claim.go); this row only describes its holder. Keep in step with
-- ../sqlite/005_claim.sql.
CREATE TABLE "daemon_claim" (
    "id"    INTEGER NOT NULL PRIMARY KEY CHECK ("id" = 1),
    "host"  TEXT NOT NULL,
    "pid"   BIGINT NOT NULL,
    "since" TIMESTAMPTZ NOT NULL
);
