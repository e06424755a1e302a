package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomPacked is n random instances, as recorded, with dependency
// lists ascending and without duplicates.
func randomPacked(r *rand.Rand, n int) ([]BatchInstance, [][]int) {
	insts := make([]BatchInstance, n)
	deps := make([][]int, n)
	names := []string{"a", "b ü", "", `q"x`}
	for i := range insts {
		biz := time.UnixMicro(r.Int64N(1<<50) - 1<<49).UTC()
		insts[i] = BatchInstance{Task: names[r.IntN(3)] + "t", BizTime: biz,
			BizEnd: biz.Add(time.Duration(r.Int64N(1<<40)) * time.Microsecond), Scheduled: biz.Add(-time.Duration(r.Int64N(1<<30)) * time.Microsecond),
			Group: r.IntN(1 << 20), Seq: -r.IntN(5), Order: r.IntN(1<<31) - 1<<30,
			Mode: names[r.IntN(4)], ResourceGroup: names[r.IntN(4)], State: InstanceWaiting, Reason: names[r.IntN(4)]}
		for j := range n {
			if j != i && r.IntN(n) < 2 {
				deps[i] = append(deps[i], j)
			}
		}
	}
	return insts, deps
}

// TestPackedRoundTrip: what packedEncoder packs, packedDecoder unpacks
// as it was, ids and dependency ids counted from the first id.
func TestPackedRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 17, 300} {
		insts, deps := randomPacked(r, n)
		enc := newPackedEncoder()
		for i := range insts {
			enc.add(i, &insts[i], deps[i])
		}
		const first = 1 << 40
		d, err := newPackedDecoder(enc.value(first))
		if err != nil {
			t.Fatal(err)
		}
		var buf []int64
		for i := range insts {
			if !d.more() {
				t.Fatalf("n=%d: %d instances decoded", n, i)
			}
			var got BatchInstance
			if err := d.instance(&got, &buf); err != nil {
				t.Fatalf("n=%d, instance %d: %v", n, i, err)
			}
			want := insts[i]
			want.ID = first + int64(i)
			for _, j := range deps[i] {
				want.Deps = append(want.Deps, first+int64(j))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("n=%d, instance %d =\n%+v\nwant\n%+v", n, i, got, want)
			}
		}
		if d.more() {
			t.Fatalf("n=%d: more than %d instances", n, n)
		}
	}
}

// TestPackedChecksum: a value with a bit flipped anywhere is damaged.
func TestPackedChecksum(t *testing.T) {
	insts, deps := randomPacked(rand.New(rand.NewPCG(5, 6)), 20)
	enc := newPackedEncoder()
	for i := range insts {
		enc.add(i, &insts[i], deps[i])
	}
	v := enc.value(1)
	for i := range v {
		bad := slices.Clone(v)
		bad[i] ^= 0x10
		if _, err := newPackedDecoder(bad); !errors.Is(err, ErrPackedDamaged) {
			t.Fatalf("bit flipped in byte %d of %d: %v, want ErrPackedDamaged", i, len(v), err)
		}
	}
}

// TestPackedNotPacked: an instance that has run, or out of turn, leaves
// the backfill unpacked.
func TestPackedNotPacked(t *testing.T) {
	in := BatchInstance{Task: "a", State: InstanceWaiting}
	for name, add := range map[string]func(e *packedEncoder){
		"ran":         func(e *packedEncoder) { ran := in; ran.Error = "x"; e.add(0, &ran, nil) },
		"attempt":     func(e *packedEncoder) { a := in; a.Attempt = 1; e.add(0, &a, nil) },
		"out of turn": func(e *packedEncoder) { e.add(1, &in, nil) },
	} {
		e := newPackedEncoder()
		add(e)
		e.add(0, &in, nil)
		if v := e.value(1); v != nil {
			t.Errorf("%s: packed %d bytes", name, len(v))
		}
	}
}

// FuzzPackedDecoder: a damaged value is an error, never a panic, a
// dependency out of range or an allocation out of proportion.
func FuzzPackedDecoder(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 5} {
		insts, deps := randomPacked(r, n)
		enc := newPackedEncoder()
		for i := range insts {
			enc.add(i, &insts[i], deps[i])
		}
		v := enc.value(7)
		f.Add(v[:len(v)-4])
	}
	f.Add([]byte{1, 1, 200, 200, 200, 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		// The input with its checksum: what gets past it is decoded.
		value := binary.BigEndian.AppendUint32(slices.Clip(body), crc32.Checksum(body, crcTable))
		d, err := newPackedDecoder(value)
		if err != nil {
			return
		}
		if d.count > len(value) {
			t.Fatalf("%d instances claimed by %d bytes", d.count, len(value))
		}
		var deps []int64
		for d.more() {
			var c BatchInstance
			if err := d.instance(&c, &deps); err != nil {
				return
			}
			for _, id := range c.Deps {
				if id < d.first || id >= d.first+int64(d.count) || id == c.ID {
					t.Fatalf("instance %d: dependency %d out of [%d, %d)", c.ID, id, d.first, d.first+int64(d.count))
				}
			}
		}
	})
}

// TestLeanColumns: the lean columns a backfill of instances that have not
// run is written with are the first of every column, in that order, and
// the counts say how many of each there are.
func TestLeanColumns(t *testing.T) {
	lean := strings.Split(batchInstanceLeanCols, ",")
	all := strings.Split(batchInstanceCols, ",")
	if len(lean) != batchInstanceLeanNCols || len(all) != batchInstanceNCols || len(batchInstanceColNames) != batchInstanceNCols {
		t.Fatalf("%d lean columns of %d (counted %d of %d)", len(lean), len(all), batchInstanceLeanNCols, batchInstanceNCols)
	}
	for i, c := range lean {
		if strings.TrimSpace(c) != strings.TrimSpace(all[i]) {
			t.Errorf("lean column %d is %s, column %d is %s", i, c, i, all[i])
		}
	}
}
