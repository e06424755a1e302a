package mysql

import (
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, s := range []string{"mysql-bin.000001:4", "mysql-bin.000003:1234", "binlog.999999:4294967295", "a.b.1234567:0"} {
		base, l, err := ParsePosition(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := FormatPosition(base, l); got != s {
			t.Errorf("round trip %s -> %v -> %s", s, l, got)
		}
	}
	a, _ := Position("mysql-bin.000002", 4294967295)
	b, _ := Position("mysql-bin.000003", 4)
	if !(a < b) {
		t.Errorf("positions in a later file must order after: %v !< %v", a, b)
	}
	if l, _ := Position("mysql-bin.000003", 1234); l != change.LSN(3<<32|1234) {
		t.Errorf("Position = %v", l)
	}
	for _, bad := range []string{"mysql-bin.000003", "mysql-bin:4", "mysql-bin.x:4", "mysql-bin.000003:-1", "mysql-bin.000003:4294967296"} {
		if _, _, err := ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) succeeded", bad)
		}
	}
}

// TestPositionEpoch: a position of a later epoch orders after every
// position of an earlier one, whatever its file and offset, and is written
// with its epoch; its file is the server's.
func TestPositionEpoch(t *testing.T) {
	late, _ := Position("mysql-bin.16777215", 4294967295)
	early, _ := Position("mysql-bin.000001", 4)
	next := inEpoch(early, 1)
	if !(next > late) || epochOf(next) != 1 || binlogPos(next) != early {
		t.Errorf("epoch 1 position %v: not after %v, or not %v in epoch 1", next, late, early)
	}
	if got := FormatPosition("mysql-bin", next); got != "mysql-bin.000001:4 (epoch 1)" {
		t.Errorf("FormatPosition = %q", got)
	}
	if _, err := Position("mysql-bin.16777216", 4); err == nil {
		t.Error("a file number past the epoch bits was accepted")
	}
}
