package mysql

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// Chunk is a run of rows read in key order inside one consistent
// snapshot, with the binlog position of that snapshot.
type Chunk struct {
	Rows []change.Row
	// Position is the snapshot's binlog position: every transaction whose
	// commit is in the binlog before it is visible in Rows, and none after
	// it is (binlog_snapshot_file/binlog_snapshot_position, read inside
	// the snapshot's transaction).
	Position change.LSN
	// File is the binlog file Position falls in, for messages.
	File  string
	Bytes int64
	// Table is the shape the rows were read in: the table's columns in
	// the snapshot (snapshotShape).
	Table *change.Table
}

// SeesCommit reports whether the transaction whose commit event ends at
// commit (a change.Txn's CommitLSN) is reflected in the chunk's rows: the
// snapshot holds exactly the transactions ending at or before Position.
func (c Chunk) SeesCommit(commit change.LSN) bool { return commit <= c.Position }

// ReadOptions bound a chunk read.
type ReadOptions struct {
	After change.Key // exclusive lower bound; nil for the first chunk
	Upto  change.Key // inclusive upper bound; nil for none
	Limit int        // 0 for no limit
	// Filter is the condition the rows must match (nil for none), rendered
	// by filterSQL.
	Filter *rowfilter.Filter
	// Columns names the non-key columns to read (nil: all); the others are
	// Unchanged in the rows read.
	Columns []string
}

// ErrNoSnapshotPosition is returned by ReadChunk on a server that does not
// report its consistent snapshot's binlog position (MySQL, or MariaDB
// without a binlog).
var ErrNoSnapshotPosition = errors.New("the server does not report the binlog position of a consistent snapshot")

// ReadChunk reads up to Limit rows with key in (After, Upto], in key
// order, inside `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`,
// with the snapshot's binlog position read inside the same transaction
// (MariaDB's binlog_snapshot_file and binlog_snapshot_position). The
// transaction is always rolled back; it takes no lock beyond what a
// SELECT takes.
func (s *Source) ReadChunk(ctx context.Context, t *change.Table, opt ReadOptions) (Chunk, error) {
	var chunk Chunk
	err := s.with(ctx, func(c *client.Conn) error {
		for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
			if _, err := c.Execute(q); err != nil {
				return err
			}
		}
		err := func() (err error) {
			if chunk.File, chunk.Position, err = snapshotPosition(c); err != nil {
				return err
			}
			if chunk.Table, err = s.snapshotShape(c, t, chunk.Position); err != nil {
				return err
			}
			chunk.Rows, chunk.Bytes, err = readRows(c, chunk.Table, opt)
			return err
		}()
		if _, rerr := c.Execute("ROLLBACK"); rerr != nil && err == nil {
			err = rerr
		}
		return err
	})
	var myErr *gomysql.MyError
	if opt.Filter != nil && errors.As(err, &myErr) && !transientCode(myErr.Code) {
		// The statement checked before the backfill started fails on a
		// row: retrying reads the same row again.
		return Chunk{}, &source.PermanentError{Err: fmt.Errorf("read chunk of %s: %w", quoteTable(t.ID), err),
			Hint: "the filter fails on a row of the table; initiate the backfill again with a filter that holds for every row"}
	}
	if err != nil {
		return Chunk{}, fmt.Errorf("read chunk of %s: %w", quoteTable(t.ID), err)
	}
	return chunk, nil
}

// readRows runs the chunk's query on t's columns.
func readRows(c *client.Conn, t *change.Table, opt ReadOptions) ([]change.Row, int64, error) {
	r, err := newRowReader(t)
	if err != nil {
		return nil, 0, err
	}
	r.expect = opt.Limit
	if r.picked, err = pickColumns(t, opt.Columns); err != nil {
		return nil, 0, err
	}
	sql, args, err := chunkQuery(t, opt, r.picked)
	if err != nil {
		return nil, 0, err
	}
	return r.selectRows(c, sql, args...)
}

func snapshotPosition(c *client.Conn) (string, change.LSN, error) {
	r, err := query(c, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return "", 0, fmt.Errorf("read the snapshot's binlog position: %w", err)
	}
	var file, pos string
	for i := range r.RowNumber() {
		switch strings.ToLower(getString(r, i, 0)) {
		case "binlog_snapshot_file":
			file = getString(r, i, 1)
		case "binlog_snapshot_position":
			pos = getString(r, i, 1)
		}
	}
	off, err := strconv.ParseUint(pos, 10, 32)
	if file == "" || err != nil {
		return "", 0, fmt.Errorf("%w (binlog_snapshot_file %q, binlog_snapshot_position %q): tidemark backfills from MariaDB with the binary log on", ErrNoSnapshotPosition, file, pos)
	}
	l, err := Position(file, uint32(off))
	return file, l, err
}

// chunkQuery renders the keyset query: the filter as its own
// parenthesized condition, key bounds as row comparisons, all with bound
// parameters, rows in key order; the picked columns only (nil: all).
func chunkQuery(t *change.Table, opt ReadOptions, picked []int) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	if opt.Filter != nil {
		cond, fargs, err := filterSQL(opt.Filter, t)
		if err != nil {
			// A column renamed or dropped since the backfill was asked.
			return "", nil, &source.PermanentError{Err: err, Hint: "initiate the backfill again with a filter on the table's columns"}
		}
		where, args = append(where, "("+cond+")"), fargs
	}
	for _, b := range []struct {
		key change.Key
		op  string
	}{{opt.After, ">"}, {opt.Upto, "<="}} {
		if b.key == nil {
			continue
		}
		params, bargs, err := keyParams(t, b.key)
		if err != nil {
			return "", nil, err
		}
		args = append(args, bargs...)
		where = append(where, "("+keyList(t)+") "+b.op+" "+params)
	}
	sql := "SELECT " + pickedList(t, picked) + " FROM " + quoteTable(t.ID)
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY " + keyList(t)
	if opt.Limit > 0 {
		sql += " LIMIT " + strconv.Itoa(opt.Limit)
	}
	return sql, args, nil
}

// keyParams renders a key as a row of typed parameters, "(?, ?)", with
// their arguments.
func keyParams(t *change.Table, key change.Key) (string, []any, error) {
	if len(key) != len(t.Key) {
		return "", nil, fmt.Errorf("key bound has %d values, the key %d columns", len(key), len(t.Key))
	}
	exprs := make([]string, len(key))
	args := make([]any, len(key))
	for i, v := range key {
		var err error
		if exprs[i], args[i], err = keyParam(t.Columns[t.Key[i]], v); err != nil {
			return "", nil, err
		}
	}
	return "(" + strings.Join(exprs, ", ") + ")", args, nil
}

// keyParam turns a key value (PostgreSQL text, as the codec wrote it) back
// into a parameter the server compares with the column as it compares two
// column values: numbers as numbers (a string would be compared as a
// double, losing digits past 2^53), decimals as decimals, text in the
// column's character set and collation, bytes as bytes.
func keyParam(c change.Column, v change.Value) (string, any, error) {
	if v.Null {
		return "", nil, fmt.Errorf("key column %s is NULL in a bound", quoteIdent(c.Name))
	}
	k, err := codecFor(c)
	if err != nil {
		return "", nil, err
	}
	s := v.Text
	switch k.kind {
	case kindInt:
		if k.unsigned {
			n, err := strconv.ParseUint(s, 10, 64)
			return "?", n, err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return "?", n, err
	case kindDecimal:
		return "CAST(? AS DECIMAL(65,30))", s, nil
	case kindFloat4, kindFloat8:
		f, err := strconv.ParseFloat(s, 64)
		return "?", f, err
	case kindBit:
		n, err := strconv.ParseUint(s, 2, 64)
		return "?", n, err
	case kindBytes, kindBinary, kindGeometry:
		b, err := hex.DecodeString(strings.TrimPrefix(s, `\x`))
		return "?", b, err
	case kindDate, kindDatetime, kindTimestamp:
		if s == "-infinity" {
			return "?", "0000-00-00 00:00:00", nil
		}
		return "?", strings.TrimSuffix(s, "+00"), nil
	case kindEnum:
		// An enum compares with a number by its index, the order ORDER BY
		// sorts it in; compared with a string it would go by label.
		if i := slices.Index(k.labels, s); i >= 0 {
			return "?", int64(i + 1), nil
		}
		if s == "" {
			return "?", int64(0), nil
		}
		return "", nil, fmt.Errorf("key column %s: %q is none of the enum's labels", quoteIdent(c.Name), s)
	case kindSet:
		mask, err := setMask(k.labels, s)
		return "?", mask, err
	case kindText, kindChar, kindJSON:
		// In the column's character set and collation, so that comparing
		// two parameters (InRange) goes as comparing with the column.
		if c.Collation == "" {
			break
		}
		if strings.Trim(c.Collation, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return "", nil, fmt.Errorf("key column %s: unexpected collation name %q", quoteIdent(c.Name), c.Collation)
		}
		cs, _, _ := strings.Cut(c.Collation, "_")
		return "CONVERT(? USING " + cs + ") COLLATE " + c.Collation, s, nil
	}
	return "?", s, nil
}

// setMask is the bitmask of a set value's labels, the number the set
// compares and sorts as.
func setMask(labels []string, s string) (uint64, error) {
	var mask uint64
	if s == "" {
		return 0, nil
	}
	for l := range strings.SplitSeq(s, ",") {
		i := slices.Index(labels, l)
		if i < 0 {
			return 0, fmt.Errorf("%q is none of the set's labels", l)
		}
		mask |= 1 << i
	}
	return mask, nil
}
