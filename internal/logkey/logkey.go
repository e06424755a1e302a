// Package logkey spells the attributes the daemon's log names things by,
// once for every package, so that a line about a table's backfill says
// backfill_id=7 whichever part of tidemark wrote it and one grep finds them
// all; a batch backfill, a different thing with ids of its own, says
// batch_backfill_id=7. Details that only one line carries (rows_read,
// retry_in) stay plain key-value pairs beside these.
package logkey

import (
	"log/slog"
	"time"
)

// The keys, for code that reads log output (tests, tools).
const (
	StreamKey        = "stream"
	ObjectKey        = "object"
	BackfillKey      = "backfill_id"
	RunKey           = "run_id"
	TaskKey          = "task"
	InstanceKey      = "instance_id"
	BatchBackfillKey = "batch_backfill_id"
	BusinessTimeKey  = "biz_time"
	SlotKey          = "slot"
	ErrKey           = "err"
)

// Stream names a stream.
func Stream(name string) slog.Attr { return slog.String(StreamKey, name) }

// Object names an object of a stream, schema.table.
func Object(name string) slog.Attr { return slog.String(ObjectKey, name) }

// Backfill is the id of a table's backfill.
func Backfill(id int64) slog.Attr { return slog.Int64(BackfillKey, id) }

// Run is the id of a run: several table backfills initiated as one.
func Run(id int64) slog.Attr { return slog.Int64(RunKey, id) }

// Task names a batch task.
func Task(id string) slog.Attr { return slog.String(TaskKey, id) }

// Instance is the id of a batch task's instance.
func Instance(id int64) slog.Attr { return slog.Int64(InstanceKey, id) }

// BatchBackfill is the id of a batch backfill.
func BatchBackfill(id int64) slog.Attr { return slog.Int64(BatchBackfillKey, id) }

// BusinessTime is the business time an instance of a task stands for.
func BusinessTime(t time.Time) slog.Attr { return slog.Time(BusinessTimeKey, t) }

// Slot names a replication slot.
func Slot(name string) slog.Attr { return slog.String(SlotKey, name) }

// Err is the error a line reports.
func Err(err error) slog.Attr { return slog.Any(ErrKey, err) }
