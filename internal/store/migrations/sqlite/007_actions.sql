-- Every request that changed something through the API (pause, resume,
-- reset, stop, rate changes, reruns, marks…), with who sent it: the audit
-- trail lists them beside the backfills. Keep in step with
-- ../postgres/007_actions.sql.
CREATE TABLE "audit_actions" (
    "id"     INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "at"     TEXT NOT NULL,
    "who"    TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "path"   TEXT NOT NULL,
    "status" INTEGER NOT NULL,
    "detail" TEXT NOT NULL
) STRICT;
CREATE INDEX "audit_actions_at" ON "audit_actions" ("at", "id");
