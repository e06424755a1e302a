package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// ErrNoKey is returned by Describe for a table without a primary key or a
// unique index over NOT NULL columns, when no key columns were named.
var ErrNoKey = fmt.Errorf("%w: no primary key or unique index over NOT NULL columns", source.ErrNoKey)

// ListTables returns the base tables of the source's database (views,
// sequences and system versioned history are left out), by name.
//
// An ALTER TABLE that copies the table renames it away and the copy in at
// its end, so a listing at that moment lacks it. A table listed before and
// missing now is opened, which waits for the ALTER's metadata lock: when it
// opens, it is listed (a dropped table does not open).
func (s *Source) ListTables(ctx context.Context) ([]change.TableID, error) {
	var ids []change.TableID
	s.listMu.Lock()
	defer s.listMu.Unlock()
	err := s.with(ctx, func(c *client.Conn) error {
		r, err := query(c, `SELECT TABLE_NAME FROM information_schema.TABLES
			WHERE TABLE_SCHEMA = ? AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')
			ORDER BY TABLE_NAME`, s.dsn.Database)
		if err != nil {
			return err
		}
		for i := range r.RowNumber() {
			name, _ := r.GetString(i, 0)
			ids = append(ids, change.TableID{Schema: s.dsn.Database, Name: strings.Clone(name)})
		}
		for id := range s.listed {
			if slices.Contains(ids, id) {
				continue
			}
			ok, err := tableOpens(c, id)
			if err != nil {
				return err
			}
			if ok {
				ids = append(ids, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tables of %s: %w", quoteIdent(s.dsn.Database), err)
	}
	slices.SortFunc(ids, func(a, b change.TableID) int { return strings.Compare(a.Name, b.Name) })
	s.listed = make(map[change.TableID]bool, len(ids))
	for _, id := range ids {
		s.listed[id] = true
	}
	return ids, nil
}

// tableOpens reports whether a table exists, opening it (and so waiting
// for a DDL statement under way on it).
func tableOpens(c *client.Conn, id change.TableID) (bool, error) {
	_, err := c.Execute("SELECT 1 FROM " + quoteTable(id) + " LIMIT 0")
	var myErr *gomysql.MyError
	if errors.As(err, &myErr) && myErr.Code == gomysql.ER_NO_SUCH_TABLE {
		return false, nil
	}
	return err == nil, err
}

// Describe reads a table's columns and row key. The key is keyCols when
// given (from the config), else the primary key, else the first (by name)
// unique index whose columns are all NOT NULL; a table with none fails
// with ErrNoKey and what to do.
func (s *Source) Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error) {
	var t *change.Table
	err := s.with(ctx, func(c *client.Conn) (err error) {
		t, err = describe(c, id, keyCols)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.nums.number(t)
	return t, nil
}

const columnsQuery = `SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, DATA_TYPE, IS_NULLABLE,
	COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''),
	COALESCE(NUMERIC_PRECISION, 0), COALESCE(NUMERIC_SCALE, 0), COALESCE(DATETIME_PRECISION, 0),
	COALESCE(CHARACTER_MAXIMUM_LENGTH, 0),
	EXISTS (SELECT 1 FROM information_schema.CHECK_CONSTRAINTS k
	        WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME
	          AND k.CONSTRAINT_NAME = c.COLUMN_NAME
	          AND k.CHECK_CLAUSE = CONCAT('json_valid(', '` + "`" + `', REPLACE(c.COLUMN_NAME, '` + "`" + `', '` + "``" + `'), '` + "`" + `', ')'))
	FROM information_schema.COLUMNS c
	WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?
	ORDER BY ORDINAL_POSITION`

func describe(c *client.Conn, id change.TableID, keyCols []string) (*change.Table, error) {
	t, err := describeColumns(c, id)
	if err != nil {
		return nil, err
	}
	if len(keyCols) == 0 {
		if keyCols, err = indexKey(c, id); err != nil {
			return nil, err
		}
	}
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("table %s: %w: add a primary key (ALTER TABLE %s ADD PRIMARY KEY (…)) or a unique index over NOT NULL columns, or name the key columns under keys: in the stream's config", quoteTable(id), ErrNoKey, quoteTable(id))
	}
	for _, name := range keyCols {
		i := t.ColumnIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("table %s: key column %q does not exist", quoteTable(id), name)
		}
		t.Key = append(t.Key, i)
	}
	return t, nil
}

// describeColumns reads a table's columns, without its key.
func describeColumns(c *client.Conn, id change.TableID) (*change.Table, error) {
	r, err := query(c, columnsQuery, id.Schema, id.Name)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", quoteTable(id), err)
	}
	t := &change.Table{ID: id}
	for i := range r.RowNumber() {
		var n nativeColumn
		n.name = getString(r, i, 0)
		n.num, _ = r.GetInt(i, 1)
		n.columnType = getString(r, i, 2)
		n.dataType = getString(r, i, 3)
		n.notNull = getString(r, i, 4) == "NO"
		n.charset = getString(r, i, 5)
		n.collation = getString(r, i, 6)
		p, _ := r.GetInt(i, 7)
		sc, _ := r.GetInt(i, 8)
		dp, _ := r.GetInt(i, 9)
		cl, _ := r.GetInt(i, 10)
		n.precision, n.scale, n.timePrecision, n.charLength = int(p), int(sc), int(dp), cl
		isJSON, _ := r.GetInt(i, 11)
		n.json = isJSON == 1
		col, err := n.column()
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", quoteTable(id), err)
		}
		t.Columns = append(t.Columns, col)
	}
	if len(t.Columns) == 0 {
		return nil, fmt.Errorf("describe %s: %w", quoteTable(id), source.ErrNoTable)
	}
	return t, nil
}

// indexKey returns the primary key's columns, else those of the first
// unique index (by name) whose columns are all NOT NULL and whole (an index
// on a prefix of a column is not unique on the column), else none.
func indexKey(c *client.Conn, id change.TableID) ([]string, error) {
	r, err := query(c, `SELECT s.INDEX_NAME, s.COLUMN_NAME, col.IS_NULLABLE
		FROM information_schema.STATISTICS s
		JOIN information_schema.COLUMNS col ON col.TABLE_SCHEMA = s.TABLE_SCHEMA
		  AND col.TABLE_NAME = s.TABLE_NAME AND col.COLUMN_NAME = s.COLUMN_NAME
		WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ? AND s.NON_UNIQUE = 0
		  AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS p
		    WHERE p.TABLE_SCHEMA = s.TABLE_SCHEMA AND p.TABLE_NAME = s.TABLE_NAME
		      AND p.INDEX_NAME = s.INDEX_NAME AND p.SUB_PART IS NOT NULL)
		ORDER BY s.INDEX_NAME <> 'PRIMARY', s.INDEX_NAME, s.SEQ_IN_INDEX`, id.Schema, id.Name)
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", quoteTable(id), err)
	}
	var (
		cols     []string
		index    string
		nullable bool
	)
	for i := range r.RowNumber() {
		name := getString(r, i, 0)
		if name != index {
			if index != "" && !nullable {
				return cols, nil
			}
			index, cols, nullable = name, nil, false
		}
		cols = append(cols, getString(r, i, 1))
		nullable = nullable || getString(r, i, 2) == "YES"
	}
	if index != "" && !nullable {
		return cols, nil
	}
	return nil, nil
}

// getString copies a result's text value (go-mysql's GetString aliases the
// packet buffer).
func getString(r interface {
	GetString(row, col int) (string, error)
}, row, col int) string {
	s, _ := r.GetString(row, col)
	return strings.Clone(s)
}

func quoteTable(id change.TableID) string { return quoteIdent(id.Schema) + "." + quoteIdent(id.Name) }
