package mysql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// A table map event, with binlog_row_metadata=FULL, says what the table's
// columns were when the rows after it were written: names, types with their
// lengths, precision and scale, signedness, collations and enum and set
// labels. mapColumn turns one into the native column the catalog would have
// described then, so that rows logged before a schema change are decoded
// with the columns they were written with, and the applier sees the shape
// change at the point of the binlog where it happened.

// collation is what a table map's collation id stands for.
type collation struct {
	name   string // "utf8mb4_general_ci"
	maxLen int    // bytes per character of its character set
}

// binaryCollation is the id of the binary collation (BINARY, VARBINARY and
// BLOB columns).
const binaryCollation = 63

// collations reads the server's collations by id.
func (s *Source) collations(ctx context.Context) (map[uint64]collation, error) {
	s.collMu.Lock()
	defer s.collMu.Unlock()
	if s.colls != nil {
		return s.colls, nil
	}
	colls := map[uint64]collation{}
	err := s.with(ctx, func(c *client.Conn) error {
		r, err := query(c, `SELECT co.ID, co.COLLATION_NAME, cs.MAXLEN FROM information_schema.COLLATIONS co
			JOIN information_schema.CHARACTER_SETS cs ON cs.CHARACTER_SET_NAME = co.CHARACTER_SET_NAME
			WHERE co.ID IS NOT NULL`)
		if err != nil {
			return err
		}
		add := func(r *gomysql.Result) {
			for i := range r.RowNumber() {
				id, _ := r.GetUint(i, 0)
				n, _ := r.GetInt(i, 2)
				colls[id] = collation{name: getString(r, i, 1), maxLen: int(max(n, 1))}
			}
		}
		add(r)
		// MariaDB 10.10+ lists its uca1400 collations in COLLATIONS without
		// an id (they serve several character sets); their full names and
		// ids are in COLLATION_CHARACTER_SET_APPLICABILITY, whose columns
		// MySQL and older MariaDB lack (unknown column: nothing to add).
		r, err = query(c, `SELECT a.ID, a.FULL_COLLATION_NAME, cs.MAXLEN
			FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY a
			JOIN information_schema.CHARACTER_SETS cs ON cs.CHARACTER_SET_NAME = a.CHARACTER_SET_NAME
			WHERE a.ID IS NOT NULL`)
		var myErr *gomysql.MyError
		if errors.As(err, &myErr) && myErr.Code == gomysql.ER_BAD_FIELD_ERROR {
			return nil
		}
		if err != nil {
			return err
		}
		add(r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the server's collations: %w", err)
	}
	s.colls = colls
	return colls, nil
}

// tableMapColumns are a table map's columns as the catalog would describe
// them; the event must carry full metadata (column names at least).
type tableMapColumns struct {
	tme       *replication.TableMapEvent
	colls     map[uint64]collation
	unsigned  map[int]bool
	collation map[int]uint64
	enumSet   map[int]uint64
	labels    map[int][]string
}

func newTableMapColumns(tme *replication.TableMapEvent, colls map[uint64]collation) *tableMapColumns {
	labels := tme.EnumStrValueMap()
	for i, l := range tme.SetStrValueMap() {
		if labels == nil {
			labels = map[int][]string{}
		}
		labels[i] = l
	}
	return &tableMapColumns{tme: tme, colls: colls, unsigned: tme.UnsignedMap(),
		collation: tme.CollationMap(), enumSet: tme.EnumSetCollationMap(), labels: labels}
}

// native describes column i.
func (m *tableMapColumns) native(i int) (nativeColumn, error) {
	tme := m.tme
	n := nativeColumn{name: tme.ColumnNameString()[i], num: int64(i + 1)}
	if ok, nullable := tme.Nullable(i); ok {
		n.notNull = !nullable
	}
	meta := tme.ColumnMeta[i]
	unsigned := ""
	if m.unsigned[i] {
		unsigned = " unsigned"
	}
	coll, hasColl := m.collation[i]
	if !hasColl {
		coll, hasColl = m.enumSet[i]
	}
	cl := m.colls[coll]
	if hasColl && coll != binaryCollation {
		n.collation = cl.name
		n.charset, _, _ = strings.Cut(cl.name, "_")
	}
	chars := func(bytes int) int64 { return int64(bytes / max(cl.maxLen, 1)) }
	binary := hasColl && coll == binaryCollation
	typ := tme.ColumnType[i]
	switch typ {
	case gomysql.MYSQL_TYPE_TINY:
		n.dataType = "tinyint"
	case gomysql.MYSQL_TYPE_SHORT:
		n.dataType = "smallint"
	case gomysql.MYSQL_TYPE_INT24:
		n.dataType = "mediumint"
	case gomysql.MYSQL_TYPE_LONG:
		n.dataType = "int"
	case gomysql.MYSQL_TYPE_LONGLONG:
		n.dataType = "bigint"
	case gomysql.MYSQL_TYPE_YEAR:
		n.dataType = "year"
	case gomysql.MYSQL_TYPE_NEWDECIMAL:
		n.dataType, n.precision, n.scale = "decimal", int(meta>>8), int(meta&0xff)
		n.columnType = fmt.Sprintf("decimal(%d,%d)%s", n.precision, n.scale, unsigned)
	case gomysql.MYSQL_TYPE_FLOAT:
		n.dataType = "float"
	case gomysql.MYSQL_TYPE_DOUBLE:
		n.dataType = "double"
	case gomysql.MYSQL_TYPE_BIT:
		n.dataType, n.precision = "bit", int(meta>>8)*8+int(meta&0xff)
		n.columnType = "bit(" + strconv.Itoa(n.precision) + ")"
	case gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE:
		n.dataType = "date"
	case gomysql.MYSQL_TYPE_DATETIME, gomysql.MYSQL_TYPE_DATETIME2:
		n.dataType, n.timePrecision = "datetime", int(meta)
	case gomysql.MYSQL_TYPE_TIMESTAMP, gomysql.MYSQL_TYPE_TIMESTAMP2:
		n.dataType, n.timePrecision = "timestamp", int(meta)
	case gomysql.MYSQL_TYPE_TIME, gomysql.MYSQL_TYPE_TIME2:
		n.dataType, n.timePrecision = "time", int(meta)
	case gomysql.MYSQL_TYPE_VARCHAR, gomysql.MYSQL_TYPE_VAR_STRING:
		n.dataType, n.charLength = "varchar", chars(int(meta))
		if binary {
			n.dataType, n.charLength = "varbinary", int64(meta)
		}
		n.columnType = fmt.Sprintf("%s(%d)", n.dataType, n.charLength)
	case gomysql.MYSQL_TYPE_STRING:
		switch real := byte(meta >> 8); real {
		case gomysql.MYSQL_TYPE_ENUM, gomysql.MYSQL_TYPE_SET:
			n.dataType = map[byte]string{gomysql.MYSQL_TYPE_ENUM: "enum", gomysql.MYSQL_TYPE_SET: "set"}[real]
			n.columnType = n.dataType + "(" + quoteLabels(m.labels[i]) + ")"
		default:
			length := int(((meta>>4)&0x300)^0x300) + int(meta&0xff)
			n.dataType, n.charLength = "char", chars(length)
			if binary {
				n.dataType, n.charLength = "binary", int64(length)
			}
			n.columnType = fmt.Sprintf("%s(%d)", n.dataType, n.charLength)
		}
	case gomysql.MYSQL_TYPE_BLOB:
		size := map[uint16]string{1: "tiny", 2: "", 3: "medium", 4: "long"}[meta]
		n.dataType = size + "text"
		if binary {
			n.dataType = size + "blob"
		}
	case gomysql.MYSQL_TYPE_JSON:
		n.dataType = "json"
	case gomysql.MYSQL_TYPE_GEOMETRY:
		n.dataType = "geometry"
	default:
		return n, fmt.Errorf("column %s: binlog type %d is not supported by the MySQL source", quoteIdent(n.name), typ)
	}
	if n.dataType != "" && n.columnType == "" {
		n.columnType = n.dataType + unsigned
		if n.timePrecision > 0 {
			n.columnType = fmt.Sprintf("%s(%d)", n.dataType, n.timePrecision)
		}
	}
	return n, nil
}

// quoteLabels writes enum or set labels as COLUMN_TYPE does ('a','it”s').
func quoteLabels(labels []string) string {
	q := make([]string, len(labels))
	for i, l := range labels {
		q[i] = "'" + strings.ReplaceAll(l, "'", "''") + "'"
	}
	return strings.Join(q, ",")
}
