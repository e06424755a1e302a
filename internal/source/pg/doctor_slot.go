package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

// room is how many of a server-wide resource are in use, its maximum, and
// how many more the stream needs.
type room struct {
	used, max, need int
}

// roomCheck judges a resource: FAIL when the stream's need does not fit.
func roomCheck(name, what, setting string, r room, fix string) Check {
	detail := fmt.Sprintf("%d of %s = %d in use", r.used, setting, r.max)
	if r.need == 0 {
		detail += fmt.Sprintf("; the stream's %s is among them", what)
	} else {
		detail += fmt.Sprintf("; the stream needs %d more", r.need)
	}
	if r.used+r.need > r.max {
		return fail(name, detail, fmt.Sprintf("ALTER SYSTEM SET %s = %d; then restart PostgreSQL", setting, r.used+r.need)+fix)
	}
	return ok(name, detail)
}

func (src *sourceCheck) slotsRoom(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var r room
	var exists bool
	err := src.conn.QueryRow(ctx, `
		SELECT current_setting('max_replication_slots')::int,
		       (SELECT count(*) FROM pg_replication_slots)::int,
		       EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, src.s.Source.Slot).Scan(&r.max, &r.used, &exists)
	if err != nil {
		return fail(src.name("replication slots"), "cannot count replication slots: "+errText(err), "")
	}
	if !exists {
		r.need = 1
	}
	return roomCheck(src.name("replication slots"), "slot", "max_replication_slots", r,
		"; or drop slots nothing uses (SELECT slot_name, active FROM pg_replication_slots; then SELECT pg_drop_replication_slot('name');)")
}

func (src *sourceCheck) walSendersRoom(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var r room
	var active, exists bool
	err := src.conn.QueryRow(ctx, `
		SELECT current_setting('max_wal_senders')::int,
		       (SELECT count(*) FROM pg_stat_replication)::int,
		       COALESCE((SELECT active FROM pg_replication_slots WHERE slot_name = $1), false),
		       EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, src.s.Source.Slot).Scan(&r.max, &r.used, &active, &exists)
	if err != nil {
		return fail(src.name("wal senders"), "cannot count WAL senders: "+errText(err), "")
	}
	switch {
	case !exists && src.s.Backfill.Mode == config.BackfillAutomatic && src.s.Backfill.SnapshotMaxHold > 0:
		// The first start's initial load: the connection that exports its
		// snapshot, and the stream's own as the load ends.
		r.need = 2
	case !active:
		r.need = 1
	}
	fix := ""
	if r.need == 2 {
		fix = "; or set backfill.snapshot_max_hold: 0 (the initial load then reads beside the stream)"
	}
	return roomCheck(src.name("wal senders"), "WAL sender", "max_wal_senders", r, fix)
}

// checkpoint is the position the destination committed for the stream.
type checkpoint struct {
	known    bool // false when the destination could not be read
	position change.LSN
}

// slotRow is the replication slot as pg_replication_slots shows it.
type slotRow struct {
	slotType, plugin, database, walStatus string
	active                                bool
	retained                              *int64 // nil before the slot reserved WAL
	currentDB                             string
}

// slot checks the replication slot, and the WAL it retains.
func (src *sourceCheck) slot(ctx context.Context, cp checkpoint) []Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var r slotRow
	err := src.conn.QueryRow(ctx, `
		SELECT slot_type, COALESCE(plugin, ''), COALESCE(database::text, ''), COALESCE(wal_status, ''), active,
		       pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
		                       restart_lsn)::bigint,
		       current_database()::text
		FROM pg_replication_slots WHERE slot_name = $1`, src.s.Source.Slot).Scan(
		&r.slotType, &r.plugin, &r.database, &r.walStatus, &r.active, &r.retained, &r.currentDB)
	if errors.Is(err, pgx.ErrNoRows) {
		return []Check{missingSlot(src.name("slot"), src.s.Source.Slot, src.s.Name, cp)}
	}
	if err != nil {
		return []Check{fail(src.name("slot"), fmt.Sprintf("cannot read replication slot %s: %s", src.s.Source.Slot, errText(err)), "")}
	}
	out := []Check{judgeSlot(src.name("slot"), src.s.Source.Slot, src.s.Name, src.key, r)}
	if out[0].Status != Fail && r.retained != nil {
		out = append(out, retainedCheck(src.name("retained WAL"), src.s.Source.Slot, src.s.Name, src.key, *r.retained, src.s.Source.WALWarnBytes))
	}
	return out
}

// resetFix is the way out of a lost slot.
func resetFix(stream string) string {
	return fmt.Sprintf("tidemark stream reset %s  (with the daemon running: re-creates the slot and backfills every object)", stream)
}

// missingSlot judges a slot that does not exist: expected before the first
// start, a loss when the destination holds a position.
func missingSlot(name, slot, stream string, cp checkpoint) Check {
	switch {
	case !cp.known:
		return warn(name, fmt.Sprintf("replication slot %s does not exist, and the destination's checkpoint could not be read to tell whether the stream ran before", slot),
			"fix the destination first; if the stream never ran, tidemark creates the slot at first start")
	case cp.position > 0:
		return fail(name, fmt.Sprintf("replication slot %s is gone, but the destination's checkpoint is at %s: changes since then may be lost", slot, cp.position),
			resetFix(stream))
	}
	return ok(name, fmt.Sprintf("replication slot %s does not exist yet: tidemark creates it at first start", slot))
}

// judgeSlot judges an existing slot.
func judgeSlot(name, slot, stream, key string, r slotRow) Check {
	other := fmt.Sprintf("set %s.source.slot to a name not in use, or drop the slot if nothing else uses it: SELECT pg_drop_replication_slot(%s);", key, literal(slot))
	switch {
	case r.slotType != "logical":
		return fail(name, fmt.Sprintf("replication slot %s is a %s slot; tidemark needs a logical one", slot, r.slotType), other)
	case r.database != r.currentDB:
		return fail(name, fmt.Sprintf("replication slot %s belongs to database %s, not %s", slot, r.database, r.currentDB), other)
	case r.plugin != "pgoutput":
		return fail(name, fmt.Sprintf("replication slot %s uses plugin %s; tidemark needs pgoutput", slot, r.plugin), other)
	case r.walStatus == "lost":
		return fail(name, fmt.Sprintf("replication slot %s is invalidated (wal_status lost): the WAL it needed was removed, so changes were missed", slot),
			resetFix(stream))
	case r.walStatus == "unreserved":
		return warn(name, fmt.Sprintf("replication slot %s holds more WAL than max_slot_wal_keep_size allows (wal_status unreserved): it is lost at the next checkpoint unless the stream catches up", slot),
			fmt.Sprintf("start or resume the stream now (tidemark run; tidemark stream resume %s), or raise max_slot_wal_keep_size (ALTER SYSTEM SET max_slot_wal_keep_size = '…'; SELECT pg_reload_conf();)", stream))
	}
	state := "inactive"
	if r.active {
		state = "active"
	}
	return ok(name, fmt.Sprintf("replication slot %s: logical, pgoutput, wal_status %s, %s", slot, r.walStatus, state))
}

// retainedCheck compares the WAL the slot holds back with wal_warn_bytes.
func retainedCheck(name, slot, stream, key string, retained, warnBytes int64) Check {
	detail := fmt.Sprintf("replication slot %s retains %s of WAL", slot, bytesText(retained))
	if warnBytes <= 0 {
		return ok(name, detail+" (source.wal_warn_bytes is 0: no limit)")
	}
	if retained > warnBytes {
		return warn(name, fmt.Sprintf("%s, above %s.source.wal_warn_bytes (%s): the source's disk fills while the stream lags", detail, key, bytesText(warnBytes)),
			fmt.Sprintf("start or resume the stream (tidemark run; tidemark stream resume %s) so it confirms its position; if the stream is abandoned, drop the slot: SELECT pg_drop_replication_slot(%s); if this much is expected, raise %s.source.wal_warn_bytes",
				stream, literal(slot), key))
	}
	return ok(name, fmt.Sprintf("%s (warns above %s)", detail, bytesText(warnBytes)))
}

// literal quotes a string for SQL.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
