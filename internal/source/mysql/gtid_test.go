package mysql

import (
	"context"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/tidemark/tidemark/internal/change"
)

// TestGTIDNotation covers both flavours' GTIDs without a server: MySQL 8
// is not packaged here, so its GTID event is built by hand.
func TestGTIDNotation(t *testing.T) {
	out := make(chan change.Event, 10)
	r := &binlogReader{src: &Source{}, out: out, file: "mysql-bin.000007", readers: map[change.TableID]*eventTable{}}
	ctx := context.Background()
	sid := uuid.MustParse("3e11fa47-71ca-11e1-9e33-c80aa9429562")
	events := []replication.Event{
		&replication.GTIDEvent{SID: sid[:], GNO: 23},
		&replication.XIDEvent{XID: 9},
	}
	for _, e := range events {
		if err := r.handle(ctx, &replication.BinlogEvent{Header: &replication.EventHeader{LogPos: 1234}, Event: e}); err != nil {
			t.Fatal(err)
		}
	}
	if r.gtid != "3e11fa47-71ca-11e1-9e33-c80aa9429562:23" {
		t.Errorf("MySQL GTID %q", r.gtid)
	}
	// A transaction without streamed changes is progress, not a Txn.
	if ev := <-out; ev.Txn != nil || ev.Progress != change.LSN(7<<32|1234) {
		t.Errorf("event %+v, want progress at mysql-bin.000007:1234", ev)
	}
	e := &replication.MariadbGTIDEvent{GTID: gomysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: 42}}
	if err := r.handle(ctx, &replication.BinlogEvent{Header: &replication.EventHeader{}, Event: e}); err != nil {
		t.Fatal(err)
	}
	if r.gtid != "0-1-42" || r.txn == nil {
		t.Errorf("MariaDB GTID %q, transaction open %v", r.gtid, r.txn != nil)
	}
}
