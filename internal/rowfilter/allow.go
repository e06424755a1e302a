package rowfilter

import (
	"maps"
	"slices"
	"strings"
)

// Functions are the functions a filter may call: built-in, immutable or
// depending only on the session's time zone, without side effects, and
// none whose work or memory grows with an argument's value (repeat, lpad).
// A filter must select the same rows on every chunk read and verify, so
// nothing that reads the clock, a sequence, a setting or another table.
// Documented in docs/backfill.md; keep the two in step.
var Functions = map[string]FuncSpec{
	// text
	"lower": {}, "upper": {}, "initcap": {},
	"length": {}, "char_length": {}, "character_length": {}, "octet_length": {},
	"btrim": {}, "ltrim": {}, "rtrim": {},
	"substring": {}, "substr": {}, "left": {}, "right": {}, "position": {}, "strpos": {},
	"replace": {}, "translate": {}, "split_part": {}, "starts_with": {}, "reverse": {}, "md5": {},
	// numbers
	"abs": {}, "ceil": {}, "ceiling": {}, "floor": {}, "round": {}, "trunc": {},
	"sign": {}, "mod": {}, "div": {}, "sqrt": {}, "power": {},
	// dates and times: the unit is a literal
	"date_trunc": {UnitFirst: true}, "date_part": {UnitFirst: true}, "extract": {UnitFirst: true},
	"make_date": {},
	// conditional expressions
	"coalesce": {Keyword: true}, "nullif": {Keyword: true}, "greatest": {Keyword: true}, "least": {Keyword: true},
}

// FuncSpec says how a function is written and checked.
type FuncSpec struct {
	// UnitFirst: the first argument is a string literal (the unit: 'day').
	UnitFirst bool
	// Keyword: SQL syntax rather than a function of the catalog
	// (COALESCE, NULLIF, GREATEST, LEAST).
	Keyword bool
}

// Types are the built-in types a filter may cast to, by canonical name;
// the SQL spellings (integer, timestamp with time zone, varchar(20)) are
// read as these. No reg* types: their input looks names up.
var Types = []string{
	"bool", "int2", "int4", "int8", "numeric", "float4", "float8",
	"text", "varchar", "bpchar",
	"date", "time", "timetz", "timestamp", "timestamptz", "interval",
	"uuid", "json", "jsonb", "bytea", "inet", "cidr",
}

// Operators are the infix operators a filter may use besides AND, OR,
// IN, BETWEEN, LIKE, ILIKE and IS [NOT] DISTINCT FROM.
var Operators = []string{"=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "^", "||"}

// FunctionNames lists the allowed functions, sorted, for messages and docs.
func FunctionNames() string {
	return strings.Join(slices.Sorted(maps.Keys(Functions)), ", ")
}

// setReturning are built-in functions that return rows, not a value: named
// so, since a filter holding one is a frequent mistake.
var setReturning = map[string]bool{
	"generate_series": true, "generate_subscripts": true, "unnest": true, "regexp_matches": true,
	"regexp_split_to_table": true, "json_each": true, "jsonb_each": true, "json_array_elements": true,
	"jsonb_array_elements": true, "json_object_keys": true, "jsonb_object_keys": true,
}

// timeOfCall are the SQL forms that read the clock or the session.
var timeOfCall = map[string]bool{
	"now": true, "clock_timestamp": true, "statement_timestamp": true, "transaction_timestamp": true,
	"timeofday": true, "random": true, "current_setting": true, "txid_current": true, "nextval": true,
}

// systemColumns are PostgreSQL's hidden columns: they say where a row
// version is stored, not what it holds, and differ between chunk reads.
var systemColumns = map[string]bool{
	"ctid": true, "xmin": true, "xmax": true, "cmin": true, "cmax": true, "tableoid": true,
}
