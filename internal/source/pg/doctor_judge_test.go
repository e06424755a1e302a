package pg

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func TestRetainedCheck(t *testing.T) {
	t.Parallel()
	if c := retainedCheck("wal", "s1", "shop", "streams[0]", 2<<30, 1<<30); c.Status != Warn ||
		!strings.Contains(c.Detail, "2.0 GiB") || !strings.Contains(c.Fix, "pg_drop_replication_slot('s1')") ||
		!strings.Contains(c.Fix, "tidemark stream resume shop") || !strings.Contains(c.Fix, "streams[0].source.wal_warn_bytes") {
		t.Errorf("above the limit: %+v", c)
	}
	if c := retainedCheck("wal", "s1", "shop", "streams[0]", 1<<30, 1<<30); c.Status != OK {
		t.Errorf("at the limit: %+v", c)
	}
	if c := retainedCheck("wal", "s1", "shop", "streams[0]", 100<<30, 0); c.Status != OK || !strings.Contains(c.Detail, "no limit") {
		t.Errorf("no limit: %+v", c)
	}
}

func TestJudgeSlot(t *testing.T) {
	t.Parallel()
	good := slotRow{slotType: "logical", plugin: "pgoutput", database: "shop", currentDB: "shop", walStatus: "reserved"}
	for _, tc := range []struct {
		change func(*slotRow)
		want   Status
		text   string
	}{
		{func(*slotRow) {}, OK, "logical, pgoutput, wal_status reserved, inactive"},
		{func(r *slotRow) { r.walStatus, r.active = "extended", true }, OK, "extended, active"},
		{func(r *slotRow) { r.walStatus = "unreserved" }, Warn, "max_slot_wal_keep_size"},
		{func(r *slotRow) { r.walStatus = "lost" }, Fail, "tidemark stream reset shop"},
		{func(r *slotRow) { r.slotType, r.plugin, r.database = "physical", "", "" }, Fail, "physical"},
		{func(r *slotRow) { r.plugin = "wal2json" }, Fail, "wal2json"},
		{func(r *slotRow) { r.database = "other" }, Fail, "belongs to database other"},
	} {
		r := good
		tc.change(&r)
		c := judgeSlot("slot", "tidemark_shop", "shop", "streams[0]", r)
		if c.Status != tc.want || !strings.Contains(c.Detail+c.Fix, tc.text) {
			t.Errorf("%+v: %+v, want %s with %q", r, c, tc.want, tc.text)
		}
	}
}

func TestMissingSlot(t *testing.T) {
	t.Parallel()
	if c := missingSlot("slot", "s", "shop", checkpoint{known: true}); c.Status != OK {
		t.Errorf("never ran: %+v", c)
	}
	if c := missingSlot("slot", "s", "shop", checkpoint{known: true, position: change.LSN(0x100)}); c.Status != Fail || !strings.Contains(c.Fix, "tidemark stream reset shop") {
		t.Errorf("ran before: %+v", c)
	}
	if c := missingSlot("slot", "s", "shop", checkpoint{}); c.Status != Warn {
		t.Errorf("unknown: %+v", c)
	}
}

func TestRoomCheck(t *testing.T) {
	t.Parallel()
	if c := roomCheck("slots", "slot", "max_replication_slots", room{used: 10, max: 10, need: 1}, ""); c.Status != Fail ||
		!strings.Contains(c.Fix, "ALTER SYSTEM SET max_replication_slots = 11") {
		t.Errorf("full: %+v", c)
	}
	if c := roomCheck("slots", "slot", "max_replication_slots", room{used: 10, max: 10}, ""); c.Status != OK {
		t.Errorf("full, but the stream's slot is among them: %+v", c)
	}
}

func TestGrantSelect(t *testing.T) {
	t.Parallel()
	var missing []tableInfo
	for i := range 12 {
		missing = append(missing, tableInfo{id: change.TableID{Schema: "big", Name: string(rune('a' + i))}, usage: true})
	}
	missing = append(missing,
		tableInfo{id: change.TableID{Schema: `We"ird`, Name: "Mixed Case"}},
		tableInfo{id: change.TableID{Schema: `We"ird`, Name: "ok"}, read: true})
	got := grantSelect(missing, "tide mark")
	want := `GRANT SELECT ON ALL TABLES IN SCHEMA "big" TO "tide mark";
GRANT USAGE ON SCHEMA "We""ird" TO "tide mark";
GRANT SELECT ON "We""ird"."Mixed Case" TO "tide mark";`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
