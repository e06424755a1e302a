package doctor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

func TestClockCheck(t *testing.T) {
	t.Parallel()
	local := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		server time.Time
		want   Status
		detail string
	}{
		{local, OK, "0s ahead of"},
		{local.Add(1500 * time.Millisecond), OK, "1.5s ahead of"},
		{local.Add(-2 * time.Second), OK, "2s behind"},
		{local.Add(2001 * time.Millisecond), Warn, "2.001s ahead of"},
		{local.Add(-time.Minute), Warn, "1m0s behind"},
	} {
		c := clockCheck("clock", tc.server, local, 3*time.Millisecond)
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Detail, "round trip 3ms") {
			t.Errorf("server at %s: %+v, want %s with %q", tc.server.Sub(local), c, tc.want, tc.detail)
		}
		if (c.Status == Warn) != strings.Contains(c.Fix, "NTP") {
			t.Errorf("server at %s: fix %q", tc.server.Sub(local), c.Fix)
		}
	}
}

func TestDiskCheck(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		avail, total uint64
		want         Status
	}{
		{10 * gib, 100 * gib, OK},
		{5 * gib, 100 * gib, OK},
		{4 * gib, 100 * gib, Warn},  // under 5%
		{gib - 1, 2 * gib, Warn},    // under 1 GiB
		{gib, 10 * gib, OK},         // exactly both bounds
		{2 * gib, 1000 * gib, Warn}, // 0.2%
	} {
		c := diskCheck("disk", "/data", tc.avail, tc.total)
		if c.Status != tc.want || !strings.Contains(c.Detail, "/data") {
			t.Errorf("%d of %d free: %+v, want %s", tc.avail, tc.total, c, tc.want)
		}
	}
}

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

func TestPasswordsScrubbed(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Metadata: "postgres://meta:MetaSecret1@db/meta",
		Streams: []config.Stream{{
			Source:      config.Source{DSN: "postgres://u:Src%40Secret@db/shop?sslmode=disable"},
			Destination: config.Destination{DSN: "postgres://u@db/x?password=DestSecret"},
		}},
		Connections: []config.Connection{{DSN: "host=db user=u password='Conn Secret'"}, {DSN: "postgres://u:abc@db/x"}},
	}
	secrets := passwords(cfg)
	text := "MetaSecret1 Src@Secret DestSecret Conn Secret abc"
	if got := scrub(text, secrets); got != "xxxxx xxxxx xxxxx xxxxx abc" {
		t.Errorf("scrub: %q (passwords %q)", got, secrets)
	}
}

func TestErrText(t *testing.T) {
	t.Parallel()
	err := errors.New("failed to connect to `user=u database=d`:\n\t1.2.3.4:5 (h): refused\n\t1.2.3.4:5 (h): refused\n\t5.6.7.8:5 (h): reset")
	if got, want := errText(err), "failed to connect to `user=u database=d`: 1.2.3.4:5 (h): refused; 5.6.7.8:5 (h): reset"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
