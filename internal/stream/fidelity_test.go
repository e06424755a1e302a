package stream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
)

// fidelityColumn is one column of the fidelity table: its type and SQL
// expressions of the values it takes. Row id takes values[(id+shift) % n],
// so that any run of 15 consecutive ids holds every value of every column.
type fidelityColumn struct {
	name, typ string
	values    []string
}

// fidelityColumns covers the common types with their edge values.
var fidelityColumns = []fidelityColumn{
	{"i2", "smallint", []string{"'-32768'", "'32767'", "'0'", "'-1'"}},
	{"i4", "integer", []string{"'-2147483648'", "'2147483647'", "'0'"}},
	{"i8", "bigint", []string{"'-9223372036854775808'", "'9223372036854775807'", "'0'", "'1'"}},
	{"num", "numeric", []string{
		// 1000 digits before the point and a scale of 501
		"('9' || repeat('8', 998) || '7.' || repeat('0', 500) || '1')::numeric",
		"('0.' || repeat('0', 16382) || '1')::numeric", // the largest scale
		"('-' || repeat('9', 131072))::numeric",        // the most digits before the point
		"'NaN'", "'Infinity'", "'-Infinity'", "'1.10'", "'-0.00'", "'0'"}},
	{"nt", "numeric(40,20)", []string{"'12345678901234567890.12345678901234567890'", "'-0.00000000000000000001'", "'1.5'"}},
	{"f4", "real", []string{"'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "'0'", "'1e-45'", "'-1e-45'",
		"'3.4028235e+38'", "'1.1754944e-38'", "'0.1'", "'123456'", "'1e+06'", "'1.6777216e+07'"}},
	{"f8", "double precision", []string{"'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "'0'", "'5e-324'", "'-5e-324'",
		"'1.7976931348623157e+308'", "'2.2250738585072014e-308'", "'2.225073858507201e-308'", "'0.1'", "'1e+100'",
		"'123456789012345'", "'1.234567890123456e+15'", "'-1.5e-07'"}},
	{"txt", "text", []string{
		`E'family \U0001F469\u200D\U0001F469\u200D\U0001F467 emoji \U0001F642 max \U0010FFFF nonchar \uFFFF bom \uFEFF'`,
		`E'combining e\u0301 a\u0308 Z\u0335\u0327\u0344'`,
		`E'rtl \u05E9\u05DC\u05D5\u05DD \u0639\u0631\u0628\u064A \u200F\u202Emixed\u202C'`,
		`E'controls \x01\x02\x07\x08\x0b\x0c\x1b\x7f tab\t nl\n cr\r back\\slash \\N quote'' dq"'`,
		"''", "' '", "'NULL'", `E'\\N'`, "'-0'", "'1e5'", "repeat('long ✓ ', 2000)"}},
	{"vc", "character varying(10)", []string{"'ünïcödé ✓'", "''"}},
	{"ch", "character(5)", []string{"'ab'", "''", "'abcde'"}},
	{"bin", "bytea", []string{
		"(SELECT string_agg(set_byte('\\x00'::bytea, 0, g), ''::bytea ORDER BY g) FROM generate_series(0, 255) g)",
		"(SELECT string_agg(set_byte('\\x00'::bytea, 0, g), ''::bytea ORDER BY g DESC) FROM generate_series(0, 255) g)",
		`'\x'`, `'\x00'`, `'\x5c78'`}},
	{"flag", "boolean", []string{"'true'", "'false'"}},
	{"d", "date", []string{"'4713-01-01 BC'", "'5874897-12-31'", "'infinity'", "'-infinity'", "'0044-03-15 BC'", "'2000-02-29'", "'0001-01-01'"}},
	{"t", "time without time zone", []string{"'00:00:00'", "'23:59:59.999999'", "'24:00:00'"}},
	{"ttz", "time with time zone", []string{"'12:34:56.789012+05:45'", "'00:00:00+15:59'", "'24:00:00-15:59'",
		"'01:02:03+05:30:15'", "'23:59:59.999999-00:00:01'"}},
	{"ts", "timestamp without time zone", []string{"'4713-01-01 00:00:00 BC'", "'294276-12-31 23:59:59.999999'",
		"'infinity'", "'-infinity'", "'2000-01-01 00:00:00.000001'", "'0001-01-01 00:00:00'"}},
	{"tstz", "timestamp with time zone", []string{"'4713-01-01 00:00:00+00 BC'", "'294276-12-31 23:59:59.999999+00'",
		"'infinity'", "'-infinity'", "'2024-02-29 13:45:01.123456+05:45'", "'1900-01-01 00:00:00-00:19:32'"}},
	{"ts3", "timestamp(3) with time zone", []string{"'2024-01-01 12:00:00.123+00'", "'1999-12-31 23:59:59.999-01'"}},
	{"iv", "interval", []string{"'1 year 2 mons -3 days +04:05:06.000007'", "'-178000000 years'", "'178000000 years'",
		"'2562047788:00:54.775807'", "'-2562047788:00:54.775807'", "'-1 mons +1 day -00:00:00.000001'", "'00:00:00'",
		"'-2147483648 mons'"}},
	{"u", "uuid", []string{"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
		"'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'"}},
	// json keeps its input text: duplicate keys, whitespace, escapes.
	{"js", "json", []string{`'{"a":1, "a" : 2,  "b":[1,2 ,3]}'`, `E'  \n "x"  \t'`,
		`'{"\u00e9": "\ud83d\ude00", "n": 1.50e+0}'`, "'null'", "'[]'"}},
	{"jb", "jsonb", []string{`'{"b":1,"a":[1.50, null, "x"], "a":3}'`, `'{"a": 1e400}'`,
		`'{"\u00e9": "\ud83d\ude00"}'`, `'"s"'`, "'[]'", "'null'"}},
	{"ia", "integer[]", []string{"'{1,NULL,3}'", "'{}'", "'[0:2]={1,2,3}'", "'[-5:-4]={NULL,NULL}'",
		"'{{1,2},{3,4}}'", "'{NULL}'", "'{-2147483648,2147483647}'"}},
	{"ta", "text[]", []string{`E'{{"a\\"b","c,d"},{"{e}","NULL"}}'`, `'[1:1][3:4]={{"x",y}}'`,
		`E'{{"",NULL},{" sp ","back\\\\slash"}}'`, `E'{"\u00e9 \u2713","\U0001F642",NULL}'`, "'{}'"}},
	{"na", "numeric[]", []string{"'{NaN,1.10,-Infinity,NULL}'", "'{{1,2},{3,4}}'"}},
	{"e", "mood", []string{"'happy'", "'sad'", "'it''s ok'", `E'\U0001F600 joy'`}},
	{"ea", "mood[]", []string{"'{happy,NULL}'", `E'{"it''s ok","\U0001F600 joy",sad}'`}},
	{"dm", "posnum", []string{"'0.01'", "'9999999999.99'", "'1.5'"}},
	{"di", "posint", []string{"'1'", "'2147483647'"}}, // stored as INTEGER in SQLite, like its base type
	{"ip", "inet", []string{"'192.168.0.1/24'", "'::ffff:1.2.3.4'", "'2001:db8::1/64'", "'10.0.0.1'", "'255.255.255.255/32'", "'::'"}},
	{"cr", "cidr", []string{"'10.0.0.0/8'", "'2001:db8::/32'", "'0.0.0.0/0'", "'::/0'", "'192.168.1.128/25'"}},
	{"mac", "macaddr", []string{"'08:00:2b:01:02:03'", "'ff:ff:ff:ff:ff:ff'", "'00:00:00:00:00:00'"}},
	{"mac8", "macaddr8", []string{"'08:00:2b:01:02:03:04:05'", "'08:00:2b:01:02:03'"}},
	{"b", "bit(10)", []string{"'1010101010'", "'0000000000'", "'1111111111'"}},
	{"vb", "bit varying", []string{"''", "'1'", "(repeat('10', 500))::varbit"}},
	{"m", "money", []string{"'-92233720368547758.08'", "'92233720368547758.07'", "'0.01'", "'0'"}},
	{"rg", "tstzrange", []string{"'[2024-01-01 00:00:00+00,infinity)'", "'empty'", "'(,)'"}},
}

// fidelityRowsEach is the number of rows with values each write phase adds:
// enough for every value of the longest list.
const fidelityRowsEach = 15

func fidelitySetup() string {
	defs := make([]string, len(fidelityColumns))
	for i, c := range fidelityColumns {
		defs[i] = c.name + " " + c.typ
	}
	return `
CREATE TYPE mood AS ENUM ('happy', 'sad', 'it''s ok', E'\U0001F600 joy');
CREATE DOMAIN posnum AS numeric(12,2) CHECK (VALUE > 0);
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE typed (id int PRIMARY KEY, ` + strings.Join(defs, ", ") + `);
CREATE TABLE barrier (n int PRIMARY KEY);
` + fidelityInsert(0, 0) + ";"
}

// fidelityValues lists row id's values, shifted through the value lists.
func fidelityValues(id, shift int) string {
	vals := make([]string, len(fidelityColumns))
	for i, c := range fidelityColumns {
		vals[i] = c.values[(id+shift)%len(c.values)]
	}
	return strings.Join(vals, ", ")
}

func fidelityNulls() string {
	return strings.TrimSuffix(strings.Repeat("NULL, ", len(fidelityColumns)), ", ")
}

// fidelityInsert inserts a row NULL in every non-key column at id base and
// rows with values at base+1 … base+fidelityRowsEach.
func fidelityInsert(base, shift int) string {
	rows := []string{fmt.Sprintf("(%d, %s)", base, fidelityNulls())}
	for id := base + 1; id <= base+fidelityRowsEach; id++ {
		rows = append(rows, fmt.Sprintf("(%d, %s)", id, fidelityValues(id, shift)))
	}
	return "INSERT INTO typed VALUES " + strings.Join(rows, ",\n")
}

// fidelityChanges are the writes that reach the destination through the
// change stream: inserts of every value, updates of every column of every
// backfilled row to other values, to NULL and from NULL.
func fidelityChanges() []string {
	names := make([]string, len(fidelityColumns))
	for i, c := range fidelityColumns {
		names[i] = c.name
	}
	set := "UPDATE typed SET (" + strings.Join(names, ", ") + ") = "
	stmts := []string{fidelityInsert(100, 3)}
	for id := 1; id <= fidelityRowsEach; id++ {
		stmts = append(stmts, fmt.Sprintf("%s(%s) WHERE id = %d", set, fidelityValues(id, 7), id))
	}
	return append(stmts,
		fmt.Sprintf("%s(%s) WHERE id = 1", set, fidelityNulls()),
		fmt.Sprintf("%s(%s) WHERE id = 0", set, fidelityValues(0, 11)))
}

// TestTypeFidelity carries every common type's edge values through the
// backfill and then through the change stream, into each destination, and
// compares the destination with the source value by value: a PostgreSQL
// destination must print exactly the source's text, SQLite must give it
// back through ReadRange and store it as docs/type-mapping.md says.
func TestTypeFidelity(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			fidelity(t, dest, "")
		})
	}
}

// roleSettings give the source role, in the test's database, settings that
// change the text of values (and client_encoding, which would make
// PostgreSQL convert it): tidemark's connections must not take them.
const roleSettings = `DO $$
DECLARE s text;
BEGIN
  FOREACH s IN ARRAY ARRAY['bytea_output = escape', 'DateStyle = ''SQL, DMY''', 'TimeZone = ''Asia/Kathmandu''',
      'IntervalStyle = sql_standard', 'extra_float_digits = -3', 'client_encoding = LATIN1'] LOOP
    EXECUTE format('ALTER ROLE %I IN DATABASE %I SET ', current_user, current_database()) || s;
  END LOOP;
END $$;
`

// TestTypeFidelityRoleSettings is TestTypeFidelity with the source role's
// own settings changing how the server prints values: the backfill and the
// stream still deliver every value exactly.
func TestTypeFidelityRoleSettings(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			fidelity(t, dest, roleSettings)
		})
	}
}

// fidelity runs TestTypeFidelity into dest, with before run on the source
// first.
func fidelity(t *testing.T, dest, before string) {
	e := newEnv(t, envOptions{dest: dest, setup: before + fidelitySetup(), yaml: "backfill: {mode: automatic, chunk_size: 4}"})
	e.start()
	e.waitLoaded("typed")
	e.waitLoaded("barrier")
	tbl := e.s.lookup(change.TableID{Schema: "public", Name: "typed"})
	if tbl == nil {
		t.Fatal("typed is not streamed")
	}
	e.checkFidelity(tbl, "after the backfill", fidelityRowsEach+1)
	for _, stmt := range fidelityChanges() {
		e.exec(stmt)
	}
	e.barrier(1)
	e.checkFidelity(tbl, "after the change stream", 2*(fidelityRowsEach+1))
	e.verifyClean(3)
}

// checkFidelity compares the destination's typed table with the source's,
// value by value: through ReadRange for both destinations, and in the
// destination itself (text output of PostgreSQL, storage of SQLite).
func (e *env) checkFidelity(t *change.Table, phase string, wantRows int) {
	e.t.Helper()
	src := e.readText(e.textConn(e.srcDSN), t)
	if len(src) != wantRows {
		e.t.Fatalf("%s: the source has %d rows, want %d", phase, len(src), wantRows)
	}
	// PostgreSQL's output is the canonical form of every tag (the
	// PostgreSQL codec is the identity), which is what sinks read.
	for _, row := range src {
		for i, v := range row {
			if c := t.Columns[i]; !v.Null {
				if err := change.Canonical(change.TagOf(c), v.Text); err != nil {
					e.t.Errorf("%s: source column %s (%s): %v", phase, c.Name, c.Type, err)
				}
			}
		}
	}
	if d := diffText(t, src, e.destRows(t)); d != "" {
		e.t.Errorf("%s: destination differs from the source (ReadRange):\n%s", phase, d)
	}
	switch e.dest {
	case "postgres":
		dst := e.textConn(e.dstDSN)
		if d := diffText(t, src, e.readText(dst, t)); d != "" {
			e.t.Errorf("%s: the destination's text output differs from the source's:\n%s", phase, d)
		}
		e.checkPostgresTypes(dst, t)
	case "sqlite":
		e.checkSQLiteStorage(t, src)
	}
}

// checkPostgresTypes checks the destination's column types against
// docs/type-mapping.md: the source's type, typmod included, except an enum
// (and an array of it) the destination lacks, which is text, and a domain
// it lacks, which is the domain's base type.
func (e *env) checkPostgresTypes(dst *pgx.Conn, t *change.Table) {
	e.t.Helper()
	mapped := map[string]string{"mood": "text", "mood[]": "text", "posnum": "numeric", "posint": "integer"}
	const q = `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`
	got := map[string]string{}
	rows, err := dst.Query(e.ctx, q, pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize())
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			e.t.Fatal(err)
		}
		got[name] = typ
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	for _, c := range t.Columns {
		want := c.Type
		if m, ok := mapped[c.Type]; ok {
			want = m
		}
		if got[c.Name] != want {
			e.t.Errorf("destination column %s has type %q, want %q (source %q)", c.Name, got[c.Name], want, c.Type)
		}
	}
}
