package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"
)

// A backfill's instances as recorded are also kept packed in one value,
// in "batch_backfill_packed": a restarted engine decodes it instead of reading
// hundreds of thousands of rows through the driver (about a microsecond a
// column), and reads whole only the rows updated since (the "updated"
// flag the store's UPDATEs set, and a trigger any other's: migration 014).
// The rows stay the record that everything else lists and updates; the
// value never changes once written.
//
// The form (version 1), every integer a varint:
//
//	version byte, first instance id, instance count,
//	string count, then each string's length and bytes,
//	per instance: task, biz time, end, scheduled, group, seq, order,
//	  mode, resource group, state, reason, dependency count, dependencies,
//	and last the CRC-32C of all before it (4 bytes, big-endian)
//
// Strings are indexes into the table; the biz time is microseconds since
// the previous instance's (the first's since the epoch), the end and the
// scheduled time microseconds from the biz time; dependencies are
// instance indexes, ascending, the first relative to the instance's own
// and each next one relative to the one before.

const packedVersion = 1

// maxPacked bounds a packed value (some ten million instances): a larger
// backfill is not packed, its rows read as they are, well short of the
// stores' limit on one value (1 GB).
const maxPacked = 256 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// packedEncoder packs a new backfill's instances, in order, as they are
// written. A backfill with an instance that has run, or whose attempt is
// not 0, is not packed (ok false): its rows are read as they are.
type packedEncoder struct {
	ok      bool
	strings map[string]uint64
	table   []byte // the string table, without its count
	body    []byte
	prevBiz int64
	n       int
}

func newPackedEncoder() *packedEncoder {
	return &packedEncoder{ok: true, strings: map[string]uint64{}}
}

func (e *packedEncoder) str(s string) {
	i, found := e.strings[s]
	if !found {
		i = uint64(len(e.strings))
		e.strings[s] = i
		e.table = binary.AppendUvarint(e.table, uint64(len(s)))
		e.table = append(e.table, s...)
	}
	e.body = binary.AppendUvarint(e.body, i)
}

func micros(t time.Time) int64 { return normTime(t).UnixMicro() }

// add packs instance i (c, prepared) with its upstream indexes deps,
// ascending and without duplicates.
func (e *packedEncoder) add(i int, c *BatchInstance, deps []int) {
	if !e.ok {
		return
	}
	if c.HasRun() || c.Attempt != 0 || i != e.n || len(e.table)+len(e.body) > maxPacked {
		e.ok = false
		e.body, e.table, e.strings = nil, nil, nil
		return
	}
	e.n++
	biz := micros(c.BizTime)
	e.str(c.Task)
	e.body = binary.AppendVarint(e.body, biz-e.prevBiz)
	e.body = binary.AppendVarint(e.body, micros(c.BizEnd)-biz)
	e.body = binary.AppendVarint(e.body, micros(c.Scheduled)-biz)
	e.prevBiz = biz
	e.body = binary.AppendVarint(e.body, int64(c.Group))
	e.body = binary.AppendVarint(e.body, int64(c.Seq))
	e.body = binary.AppendVarint(e.body, int64(c.Order))
	e.str(c.Mode)
	e.str(c.ResourceGroup)
	e.str(c.State)
	e.str(c.Reason)
	e.body = binary.AppendUvarint(e.body, uint64(len(deps)))
	prev := i
	for k, d := range deps {
		if k == 0 {
			e.body = binary.AppendVarint(e.body, int64(d-i))
		} else {
			e.body = binary.AppendUvarint(e.body, uint64(d-prev))
		}
		prev = d
	}
}

// value is the packed form of the instances added, the first's id being
// first; nil when they cannot be packed.
func (e *packedEncoder) value(first int64) []byte {
	if !e.ok {
		return nil
	}
	out := make([]byte, 0, 1+4*binary.MaxVarintLen64+len(e.table)+len(e.body)+4)
	out = append(out, packedVersion)
	out = binary.AppendUvarint(out, uint64(first))
	out = binary.AppendUvarint(out, uint64(e.n))
	out = binary.AppendUvarint(out, uint64(len(e.strings)))
	out = append(out, e.table...)
	out = append(out, e.body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
}

// packedDecoder unpacks a value packedEncoder made, an instance at a
// time. It trusts nothing in it: a damaged value is an error, never a
// panic or an allocation out of proportion to its length.
type packedDecoder struct {
	buf     []byte
	first   int64
	count   int
	strings []string
	next    int // the index of the next instance
	prevBiz int64
}

// ErrPackedDamaged marks a backfill's packed instances that do not
// decode, or disagree with its rows: its rows are what to read then.
var ErrPackedDamaged = errors.New("packed instances damaged")

// damaged is an error of ErrPackedDamaged.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrPackedDamaged}, args...)...)
}

var errPackedShort = damaged("cut short")

func (d *packedDecoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		return 0, errPackedShort
	}
	d.buf = d.buf[n:]
	return v, nil
}

func (d *packedDecoder) varint() (int64, error) {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		return 0, errPackedShort
	}
	d.buf = d.buf[n:]
	return v, nil
}

// countOf reads a count of items of at least least bytes each, bounded
// by what the value has left.
func (d *packedDecoder) countOf(what string, least int) (int, error) {
	v, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if v > uint64(len(d.buf)/least) {
		return 0, damaged("%d %s in %d bytes", v, what, len(d.buf))
	}
	return int(v), nil
}

func (d *packedDecoder) str() (string, error) {
	i, err := d.uvarint()
	if err != nil {
		return "", err
	}
	if i >= uint64(len(d.strings)) {
		return "", damaged("string %d of %d", i, len(d.strings))
	}
	return d.strings[i], nil
}

// newPackedDecoder reads the head and string table of value.
func newPackedDecoder(value []byte) (*packedDecoder, error) {
	if len(value) < 5 || value[0] != packedVersion {
		return nil, damaged("not of version 1")
	}
	end := len(value) - 4
	if crc32.Checksum(value[:end], crcTable) != binary.BigEndian.Uint32(value[end:]) {
		return nil, damaged("checksum differs")
	}
	d := &packedDecoder{buf: value[1:end]}
	first, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if first == 0 || first > 1<<62 {
		return nil, damaged("first id %d", first)
	}
	d.first = int64(first)
	// An instance takes 12 bytes at least.
	if d.count, err = d.countOf("instances", 12); err != nil {
		return nil, err
	}
	n, err := d.countOf("strings", 1)
	if err != nil {
		return nil, err
	}
	d.strings = make([]string, n)
	for k := range d.strings {
		l, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if l > uint64(len(d.buf)) {
			return nil, errPackedShort
		}
		d.strings[k] = string(d.buf[:l])
		d.buf = d.buf[l:]
	}
	return d, nil
}

// more says whether an instance is left.
func (d *packedDecoder) more() bool { return d.next < d.count }

// instance decodes the next instance into *c, its deps appended to
// *deps (c.Deps a slice of them).
func (d *packedDecoder) instance(c *BatchInstance, deps *[]int64) error {
	i := d.next
	d.next++
	*c = BatchInstance{ID: d.first + int64(i)}
	var err error
	if c.Task, err = d.str(); err != nil {
		return err
	}
	// Six signed numbers (times, group, seq, order), then four strings.
	var v [6]int64
	for k := range v {
		if v[k], err = d.varint(); err != nil {
			return err
		}
	}
	biz := d.prevBiz + v[0]
	d.prevBiz = biz
	c.BizTime = time.UnixMicro(biz).UTC()
	c.BizEnd = time.UnixMicro(biz + v[1]).UTC()
	c.Scheduled = time.UnixMicro(biz + v[2]).UTC()
	c.Group, c.Seq, c.Order = int(v[3]), int(v[4]), int(v[5])
	if c.Mode, err = d.str(); err != nil {
		return err
	}
	if c.ResourceGroup, err = d.str(); err != nil {
		return err
	}
	if c.State, err = d.str(); err != nil {
		return err
	}
	if c.Reason, err = d.str(); err != nil {
		return err
	}
	n, err := d.countOf("dependencies", 1)
	if err != nil {
		return err
	}
	start := len(*deps)
	prev := int64(i)
	for k := range n {
		var dep int64
		if k == 0 {
			v, err := d.varint()
			if err != nil {
				return err
			}
			dep = int64(i) + v
		} else {
			v, err := d.uvarint()
			if err != nil {
				return err
			}
			if v == 0 || v > uint64(d.count) {
				return damaged("instance %d: dependencies not ascending", i)
			}
			dep = prev + int64(v)
		}
		if dep < 0 || dep >= int64(d.count) || dep == int64(i) {
			return damaged("instance %d depends on %d of %d", i, dep, d.count)
		}
		*deps = append(*deps, d.first+dep)
		prev = dep
	}
	if n > 0 {
		c.Deps = slices.Clip((*deps)[start:])
	}
	return nil
}

// ReadBatchBackfillInstances hands page the instances of backfill id in id
// order, up to size at a time, with their Deps, as ListBatchInstances
// would: the recorded instances unpacked from the backfill's packed value,
// and in place of each instance updated since, its row, read whole. It
// reads nothing and reports false when the backfill has no packed value
// (recorded before there were any, or with instances that had run): the
// caller lists its rows instead. A packed value that does not decode, or
// disagrees with the rows, is an error of ErrPackedDamaged. The slice page
// is given is reused for the next page: page keeps what its instances
// hold, not the slice.
func (s *Store) ReadBatchBackfillInstances(ctx context.Context, id int64, size int, page func([]BatchInstance) error) (bool, error) {
	if size <= 0 {
		return false, fmt.Errorf("read the instances of backfill %d: page size %d", id, size)
	}
	found := false
	err := s.batchReadTx(ctx, func(tx *sql.Tx) error {
		var value []byte
		var instances int
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT p."value", b."instances" FROM "batch_backfills" b
			LEFT JOIN "batch_backfill_packed" p ON p."backfill_id" = b."id" WHERE b."id" = ?`), id).Scan(&value, &instances)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("backfill %d: %w", id, ErrNotFound)
		}
		if err != nil || value == nil {
			return err
		}
		found = true
		d, err := newPackedDecoder(value)
		if err != nil {
			return err
		}
		if d.count != instances {
			return damaged("%d, where the backfill has %d", d.count, instances)
		}
		rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT `+batchInstanceCols+` FROM "batch_instances"
			WHERE "backfill_id" = ? AND "updated" ORDER BY "id"`), id)
		if err != nil {
			return fmt.Errorf("read the updated instances: %w", err)
		}
		defer rows.Close()
		u := updatedRows{rows: rows}
		var buf []BatchInstance
		for d.more() {
			if err := d.page(id, size, &buf, &u, page); err != nil {
				return err
			}
		}
		if err := u.advance(); err != nil {
			return err
		}
		if u.row != nil {
			return damaged("updated instance %d is not among the %d packed from %d", u.row.ID, d.count, d.first)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read the instances of backfill %d: %w", id, err)
	}
	return found, nil
}

// updatedRows walks a backfill's updated rows in id order.
type updatedRows struct {
	rows *sql.Rows
	row  *BatchInstance // the next one, nil past the last
	read bool           // row holds the next one (or the end was reached)
}

// advance reads the next row unless the last one is still to be used.
func (u *updatedRows) advance() error {
	if u.read {
		return nil
	}
	u.read = true
	u.row = nil
	if !u.rows.Next() {
		return u.rows.Err()
	}
	b, err := scanBatchInstance(u.rows)
	if err != nil {
		return fmt.Errorf("read the updated instances: %w", err)
	}
	u.row = &b
	return nil
}

// page decodes up to size instances into *buf, each replaced by its
// updated row when it has one (its dependencies kept), and hands them to
// page. The instances' Deps are cut from one new array a page.
func (d *packedDecoder) page(backfill int64, size int, buf *[]BatchInstance, u *updatedRows, page func([]BatchInstance) error) error {
	n := min(size, d.count-d.next)
	if cap(*buf) < n {
		*buf = make([]BatchInstance, n)
	}
	out := (*buf)[:n]
	deps := make([]int64, 0, 2*n) // about two an instance, as planners make them
	for k := range out {
		c := &out[k]
		if err := d.instance(c, &deps); err != nil {
			return err
		}
		c.BackfillID = backfill
		if err := u.advance(); err != nil {
			return err
		}
		if r := u.row; r != nil && r.ID == c.ID {
			if r.Task != c.Task { // the query chose the backfill's rows
				return damaged("updated instance %d is not the one packed (task %q, packed %q)", r.ID, r.Task, c.Task)
			}
			r.Deps = c.Deps
			*c = *r
			u.read = false
		} else if r != nil && r.ID < c.ID {
			return damaged("updated instance %d is not among the %d packed from %d", r.ID, d.count, d.first)
		}
	}
	return page(out)
}
