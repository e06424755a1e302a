package pg

import "testing"

func TestSnapshotVisible(t *testing.T) {
	s, err := ParseSnapshot("100:110:103,107")
	if err != nil {
		t.Fatal(err)
	}
	for xid, want := range map[uint64]bool{99: true, 100: true, 103: false, 105: true, 107: false, 109: true, 110: false, 200: false} {
		if got := s.Visible(xid); got != want {
			t.Errorf("Visible(%d) = %v, want %v", xid, got, want)
		}
	}
}

func TestSnapshotWiden(t *testing.T) {
	epoch := uint64(3) << 32
	cases := []struct {
		xmax uint64
		xid  uint32
		want uint64
	}{
		{xmax: epoch + 1000, xid: 999, want: epoch + 999},
		{xmax: epoch + 1000, xid: 1500, want: epoch + 1500},
		{xmax: epoch + 5, xid: 0xFFFFFFF0, want: epoch - 16}, // just before the wrap
		{xmax: epoch - 5, xid: 3, want: epoch + 3},           // just after it
		{xmax: 10, xid: 0xFFFFFFF0, want: 0xFFFFFFF0},        // epoch 0 cannot go below zero
	}
	for _, c := range cases {
		s := Snapshot{Xmin: c.xmax, Xmax: c.xmax}
		if got := s.Widen(c.xid); got != c.want {
			t.Errorf("Widen(%d) with xmax %d = %d, want %d", c.xid, c.xmax, got, c.want)
		}
	}
}

func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"1:1:", "100:110:103,107", "5:3:", "a:b:c", "1:2:3", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSnapshot(in)
		if err != nil {
			return
		}
		again, err := ParseSnapshot(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("round trip of %q: %v %q", in, err, again.String())
		}
	})
}
