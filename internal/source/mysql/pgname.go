package mysql

import "fmt"

// name is the mapped PostgreSQL type as format_type writes it: what a
// PostgreSQL destination declares the column as.
func (t pgType) name() string {
	switch t.oid {
	case oidInt2:
		return "smallint"
	case oidInt4:
		return "integer"
	case oidInt8:
		return "bigint"
	case oidNumeric:
		if t.mod < 4 {
			return "numeric"
		}
		m := t.mod - 4
		return fmt.Sprintf("numeric(%d,%d)", m>>16, m&0xFFFF)
	case oidFloat4:
		return "real"
	case oidFloat8:
		return "double precision"
	case oidBit:
		return fmt.Sprintf("bit(%d)", max(t.mod, 1))
	case oidDate:
		return "date"
	case oidTimestamp:
		return fmt.Sprintf("timestamp(%d) without time zone", max(t.mod, 0))
	case oidTimestamptz:
		return fmt.Sprintf("timestamp(%d) with time zone", max(t.mod, 0))
	case oidInterval:
		return fmt.Sprintf("interval(%d)", t.mod&0xFFFF)
	case oidVarchar:
		return fmt.Sprintf("character varying(%d)", t.mod-4)
	case oidJSON:
		return "json"
	case oidBytea:
		return "bytea"
	}
	return "text"
}
