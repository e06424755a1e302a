-- The host a running attempt's processes run on (cluster.host, or the host
-- name): a batch leader ends a former leader's orphaned process groups
-- only on its own host (docs/cluster.md). Keep in step with
-- ../postgres/012_instance_host.sql.
ALTER TABLE "batch_instances" ADD COLUMN "host" TEXT NOT NULL DEFAULT '';
