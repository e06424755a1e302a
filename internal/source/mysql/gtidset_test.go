package mysql

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/tidemark/tidemark/internal/change"
)

// TestGTIDStateMariaDB: one GTID per domain, the binlog's last one wins,
// domains written in order.
func TestGTIDStateMariaDB(t *testing.T) {
	g, err := parseGTIDState(gomysql.MariaDBFlavor, " 1-2-7, 0-1-12 ")
	if err != nil {
		t.Fatal(err)
	}
	if got := g.String(); got != "0-1-12,1-2-7" {
		t.Errorf("String %q", got)
	}
	for _, gtid := range []string{"0-1-13", "2-5-1", "0-3-14", ""} {
		if err := g.add(gtid); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.String(); got != "0-3-14,1-2-7,2-5-1" {
		t.Errorf("after adding: %q", got)
	}
	older, _ := parseGTIDState(gomysql.MariaDBFlavor, "0-1-13,1-2-7")
	if !g.contains(older) || older.contains(g) {
		t.Errorf("contains: %s ⊇ %s %v, reverse %v", g, older, g.contains(older), older.contains(g))
	}
	for _, bad := range []string{"0-1", "0-1-x", "a-1-2", "0-1-2,0-3-4", "0-1-2-3", "-1-2", "4294967296-1-2"} {
		if _, err := parseGTIDState(gomysql.MariaDBFlavor, bad); err == nil {
			t.Errorf("parse %q succeeded", bad)
		}
	}
	if empty, err := parseGTIDState(gomysql.MariaDBFlavor, ""); err != nil || empty.String() != "" {
		t.Errorf("empty state: %q, %v", empty, err)
	}
}

// TestGTIDStateMySQL: executed sets with several uuids and intervals,
// merged as transactions are added, in MySQL's notation (lower-case
// uuids in order, adjacent intervals joined, single numbers alone).
func TestGTIDStateMySQL(t *testing.T) {
	const a, b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "8a94f357-aab4-11df-86ab-c80aa9429562"
	g, err := parseGTIDState(gomysql.MySQLFlavor, "8A94F357-AAB4-11DF-86AB-C80AA9429562:1-3:5,\n"+a+":11-18:1-5:7")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.String(), a+":1-5:7:11-18,"+b+":1-3:5"; got != want {
		t.Errorf("String\n%s, want\n%s", got, want)
	}
	for _, gtid := range []string{a + ":6", b + ":4", a + ":19", "00000000-0000-0000-0000-000000000001:9"} {
		if err := g.add(gtid); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := g.String(), "00000000-0000-0000-0000-000000000001:9,"+a+":1-7:11-19,"+b+":1-5"; got != want {
		t.Errorf("after adding\n%s, want\n%s", got, want)
	}
	sub, _ := parseGTIDState(gomysql.MySQLFlavor, a+":2-6:12,"+b+":1-5")
	gap, _ := parseGTIDState(gomysql.MySQLFlavor, a+":7-11")
	if !g.contains(sub) || g.contains(gap) || sub.contains(g) {
		t.Errorf("contains: %s ⊇ %s %v; ⊇ %s %v", g, sub, g.contains(sub), gap, g.contains(gap))
	}
	set, err := g.syncSet()
	if err != nil || set.String() != g.String() {
		t.Errorf("go-mysql's set %v (%v), ours %s", set, err, g)
	}
	for _, bad := range []string{a, a + ":", a + ":0", a + ":5-3", "nope:1-2", a + ":1-x", a + ":-1"} {
		if _, err := parseGTIDState(gomysql.MySQLFlavor, bad); err == nil {
			t.Errorf("parse %q succeeded", bad)
		}
	}
}

// FuzzParseGTIDState: any text either fails to parse or parses to a state
// that writes itself back unchanged (the notation is canonical) and that
// contains itself.
func FuzzParseGTIDState(f *testing.F) {
	for _, s := range []string{"0-1-12,1-2-7", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:11-18", "a:1", "0-1-2,0-3-4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, flavor := range []string{gomysql.MariaDBFlavor, gomysql.MySQLFlavor} {
			g, err := parseGTIDState(flavor, s)
			if err != nil {
				continue
			}
			text := g.String()
			again, err := parseGTIDState(flavor, text)
			if err != nil {
				t.Fatalf("%s: %q parsed, its text %q does not: %v", flavor, s, text, err)
			}
			if again.String() != text || !g.contains(again) || !again.contains(g) {
				t.Fatalf("%s: %q → %q → %q", flavor, s, text, again.String())
			}
		}
	})
}

// TestResumeTokenFromEvents: the binlog reader adds each transaction's
// GTID to its state and sends the state as the resume token: a MySQL
// executed set (an anonymous transaction, GNO 0, adds nothing), and a
// MariaDB GTID read from the event's bytes, not from the decoded field
// go-mysql may already have moved to a later transaction.
func TestResumeTokenFromEvents(t *testing.T) {
	const a = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	sid := uuid.MustParse(a)
	st, _ := parseGTIDState(gomysql.MySQLFlavor, a+":1-5")
	out := make(chan change.Event, 10)
	r := &binlogReader{src: &Source{}, out: out, file: "mysql-bin.000007", state: st, readers: map[change.TableID]*eventTable{}}
	ctx := context.Background()
	feed := func(e replication.Event, h replication.EventHeader, raw []byte) {
		t.Helper()
		r.lastAt = time.Time{} // progress after every transaction
		if err := r.handle(ctx, &replication.BinlogEvent{Header: &h, Event: e, RawData: raw}); err != nil {
			t.Fatal(err)
		}
	}
	feed(&replication.GTIDEvent{SID: sid[:], GNO: 6}, replication.EventHeader{}, nil)
	feed(&replication.XIDEvent{XID: 1}, replication.EventHeader{LogPos: 100}, nil)
	feed(&replication.GTIDEvent{SID: make([]byte, 16), GNO: 0}, replication.EventHeader{}, nil)
	feed(&replication.XIDEvent{XID: 2}, replication.EventHeader{LogPos: 200}, nil)
	for _, want := range []string{a + ":1-6", a + ":1-6"} {
		if ev := <-out; ev.Resume != want {
			t.Errorf("MySQL resume token %q, want %q", ev.Resume, want)
		}
	}

	r.state = newGTIDState(gomysql.MariaDBFlavor)
	raw := make([]byte, replication.EventHeaderSize+13)
	binary.LittleEndian.PutUint64(raw[replication.EventHeaderSize:], 42)
	binary.LittleEndian.PutUint32(raw[replication.EventHeaderSize+8:], 3)
	moved := &replication.MariadbGTIDEvent{GTID: gomysql.MariadbGTID{DomainID: 3, ServerID: 9, SequenceNumber: 57}}
	feed(moved, replication.EventHeader{ServerID: 9}, raw)
	feed(&replication.XIDEvent{XID: 3}, replication.EventHeader{LogPos: 300}, nil)
	if ev := <-out; ev.Resume != "3-9-42" {
		t.Errorf("MariaDB resume token %q, want 3-9-42 (the event's own bytes)", ev.Resume)
	}
}
