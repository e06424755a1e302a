-- Single instances: one instance covering a task's cycles from "biz_time"
-- to "biz_end". The planner's history and the succeeded/running policies
-- look for the ones that overlap a backfill's dates; they are few, so a
-- partial index finds them without reading every instance of the task.
CREATE INDEX "batch_instances_span_idx" ON "batch_instances" ("task", "biz_time") WHERE "biz_end" > "biz_time";
