package mysql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// PostgreSQL type oids the MySQL types map to (docs/type-mapping.md).
const (
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidBit         = 1560
	oidNumeric     = 1700
)

// nativeColumn is a column as information_schema.COLUMNS describes it.
type nativeColumn struct {
	name, columnType, dataType string
	num                        int64
	notNull, json              bool
	charset, collation         string
	precision, scale           int
	timePrecision              int
	charLength                 int64
	generated                  string
}

// pgType is the PostgreSQL type a column's values are written for.
type pgType struct {
	oid uint32
	mod int32
}

func numericMod(p, s int) int32 { return int32(p<<16|s) + 4 }

// column maps the native column to a change.Column: Type keeps MySQL's
// COLUMN_TYPE, TypeOID/BaseOID/TypeMod name the PostgreSQL type.
func (n nativeColumn) column() (change.Column, error) {
	t, err := n.pgType()
	if err != nil {
		return change.Column{}, fmt.Errorf("column %s: %w", quoteIdent(n.name), err)
	}
	c := change.Column{
		Name: n.name, Type: t.name(), Native: n.columnType, Tag: n.tag(), TypeOID: t.oid, BaseOID: t.oid, TypeMod: t.mod,
		NotNull: n.notNull, Num: int16(n.num),
	}
	// Generated stays empty: it marks columns the log leaves out, and
	// MariaDB's full row images carry generated columns' values, virtual
	// and stored alike, so they travel as ordinary columns.
	if n.collation != "" {
		c.Collation = n.collation
		c.ByteOrder = strings.HasSuffix(n.collation, "_bin")
	}
	if _, err := codecFor(c); err != nil {
		return change.Column{}, fmt.Errorf("column %s: %w", quoteIdent(n.name), err)
	}
	return c, nil
}

func (n nativeColumn) pgType() (pgType, error) {
	unsigned := strings.Contains(n.columnType, "unsigned")
	switch n.dataType {
	case "tinyint", "year":
		return pgType{oidInt2, -1}, nil
	case "smallint":
		return pgType{pick(unsigned, oidInt4, oidInt2), -1}, nil
	case "mediumint":
		return pgType{oidInt4, -1}, nil
	case "int":
		return pgType{pick(unsigned, oidInt8, oidInt4), -1}, nil
	case "bigint":
		if unsigned {
			return pgType{oidNumeric, numericMod(20, 0)}, nil
		}
		return pgType{oidInt8, -1}, nil
	case "decimal":
		return pgType{oidNumeric, numericMod(n.precision, n.scale)}, nil
	case "float":
		return pgType{oidFloat4, -1}, nil
	case "double":
		return pgType{oidFloat8, -1}, nil
	case "bit":
		return pgType{oidBit, int32(n.precision)}, nil
	case "date":
		return pgType{oidDate, -1}, nil
	case "datetime":
		return pgType{oidTimestamp, int32(n.timePrecision)}, nil
	case "timestamp":
		return pgType{oidTimestamptz, int32(n.timePrecision)}, nil
	case "time":
		// interval(p): full range (0x7FFF) in the high half, p in the low.
		return pgType{oidInterval, 0x7FFF<<16 | int32(n.timePrecision)}, nil
	case "char", "varchar":
		return pgType{oidVarchar, int32(n.charLength) + 4}, nil
	case "tinytext", "text", "mediumtext", "longtext":
		if n.json {
			return pgType{oidJSON, -1}, nil
		}
		return pgType{oidText, -1}, nil
	case "json":
		return pgType{oidJSON, -1}, nil
	case "enum", "set":
		return pgType{oidText, -1}, nil
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
		"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
		"multipolygon", "geometrycollection":
		return pgType{oidBytea, -1}, nil
	}
	return pgType{}, fmt.Errorf("type %s is not supported by the MySQL source (see docs/type-mapping.md for the types it maps)", n.columnType)
}

// tag is the column's neutral type: the canonical form the codec writes
// its values in (docs/type-mapping.md).
func (n nativeColumn) tag() change.Tag {
	unsigned := strings.Contains(n.columnType, "unsigned")
	switch n.dataType {
	case "tinyint", "year":
		return change.TagInt16
	case "smallint":
		return pickTag(unsigned, change.TagInt32, change.TagInt16)
	case "mediumint":
		return change.TagInt32
	case "int":
		return pickTag(unsigned, change.TagInt64, change.TagInt32)
	case "bigint":
		return pickTag(unsigned, change.TagDecimal, change.TagInt64)
	case "decimal":
		return change.TagDecimal
	case "float":
		return change.TagFloat32
	case "double":
		return change.TagFloat64
	case "bit":
		return change.TagBits
	case "date":
		return change.TagDate
	case "datetime":
		return change.TagTimestamp
	case "timestamp":
		return change.TagTimestampTZ
	case "time":
		return change.TagInterval
	case "json":
		return change.TagJSON
	case "tinytext", "text", "mediumtext", "longtext":
		if n.json {
			return change.TagJSON
		}
		return change.TagText
	case "char", "varchar", "enum", "set":
		return change.TagText
	}
	// binary strings, blobs and geometries (as WKB)
	return change.TagBytes
}

func pickTag(cond bool, yes, no change.Tag) change.Tag {
	if cond {
		return yes
	}
	return no
}

func pick(cond bool, yes, no uint32) uint32 {
	if cond {
		return yes
	}
	return no
}

// dataType is the type name at the start of a COLUMN_TYPE ("int" of
// "int(10) unsigned").
func dataType(columnType string) string {
	end := strings.IndexAny(columnType, "( ")
	if end < 0 {
		return columnType
	}
	return columnType[:end]
}

// typeLength is the number in parentheses of a COLUMN_TYPE ("16" of
// "binary(16)"), 0 when there is none.
func typeLength(columnType string) int {
	open := strings.IndexByte(columnType, '(')
	end := strings.IndexAny(columnType, ",)")
	if open < 0 || end < open {
		return 0
	}
	n, _ := strconv.Atoi(columnType[open+1 : end])
	return n
}

// typeLabels reads the quoted labels of an enum(…) or set(…) COLUMN_TYPE,
// where a quote inside a label is doubled.
func typeLabels(columnType string) ([]string, error) {
	open := strings.IndexByte(columnType, '(')
	if open < 0 || !strings.HasSuffix(columnType, ")") {
		return nil, fmt.Errorf("cannot read the labels of %q", columnType)
	}
	s := columnType[open+1 : len(columnType)-1]
	var labels []string
	for len(s) > 0 {
		if s[0] != '\'' {
			return nil, fmt.Errorf("cannot read the labels of %q", columnType)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("cannot read the labels of %q", columnType)
		}
		labels = append(labels, b.String())
		s = strings.TrimPrefix(s[i+1:], ",")
	}
	return labels, nil
}
