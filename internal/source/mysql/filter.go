package mysql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// filterSQL renders a backfill's filter (PostgreSQL's grammar, parsed by
// rowfilter) as a MySQL condition on t, with its arguments. Nothing of the
// user's text reaches the server as SQL: columns are quoted here from t's
// own names, every literal is a bound parameter (numbers as numbers,
// strings as strings), every operation is parenthesized, and the SQL holds
// no string constant of its own, so sql_mode (ANSI_QUOTES,
// NO_BACKSLASH_ESCAPES, PIPES_AS_CONCAT) changes nothing.
//
// Each operator and function is written as MySQL's twin with the same
// result (|| as CONCAT, ^ as POW, ILIKE as LOWER() LIKE LOWER(), IS
// DISTINCT FROM with <=>, GREATEST and LEAST skipping NULLs as
// PostgreSQL's do); one without an exact twin is refused with a
// *rowfilter.Error naming it. Text compares as the source compares it, in
// the column's collation (see docs/mysql.md, Row filters).
func filterSQL(f *rowfilter.Filter, t *change.Table) (string, []any, error) {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	if err := f.CheckColumns(quoteTable(t.ID), names); err != nil {
		return "", nil, err
	}
	r := filterRenderer{t: t}
	r.expr(f.Root)
	if r.err != nil {
		return "", nil, r.err
	}
	return r.b.String(), r.args, nil
}

// filterRenderer writes a filter; the first refusal is kept in err and
// ends the rendering's meaning (what is written after it is dropped).
type filterRenderer struct {
	t    *change.Table
	b    strings.Builder
	args []any
	err  error
}

// refuse records why the filter cannot be rendered for MySQL.
func (r *filterRenderer) refuse(format string, args ...any) {
	if r.err == nil {
		r.err = &rowfilter.Error{Msg: fmt.Sprintf(format, args...) + " (MySQL source; see docs/mysql.md, Row filters)"}
	}
}

func (r *filterRenderer) w(s string) { r.b.WriteString(s) }

// param binds a value and writes its placeholder.
func (r *filterRenderer) param(v any) {
	r.args = append(r.args, v)
	r.w("?")
}

func (r *filterRenderer) expr(e rowfilter.Expr) {
	if r.err != nil {
		return
	}
	switch n := e.(type) {
	case rowfilter.Column:
		r.w(quoteIdent(n.Name))
	case rowfilter.Literal:
		r.literal(n)
	case rowfilter.Unary:
		r.unary(n)
	case rowfilter.Binary:
		r.binary(n)
	case rowfilter.Logic:
		r.list("(", " "+n.Op+" ", n.Args)
	case rowfilter.In:
		// x IN (a, b) is x = a OR x = b, NULLs included.
		r.w("(" + not(n.Not) + "(")
		for i, e := range n.List {
			if i > 0 {
				r.w(" OR ")
			}
			r.compare(n.X, "=", e)
		}
		r.w("))")
	case rowfilter.Between:
		r.w("(" + not(n.Not) + "(")
		r.between(n.X, n.Low, n.High)
		if n.Symmetric {
			r.w(" OR ")
			r.between(n.X, n.High, n.Low)
		}
		r.w("))")
	case rowfilter.Like:
		r.like(n)
	case rowfilter.IsNull:
		r.w("(")
		r.expr(n.X)
		r.w(" IS " + not(n.Not) + "NULL)")
	case rowfilter.Cast:
		r.cast(n)
	case rowfilter.Call:
		r.call(n)
	default:
		r.refuse("a part of type %T", e) // rowfilter makes none other
	}
}

// literal binds a constant as the type PostgreSQL gives it as written:
// integers as integers, other numbers as an exact DECIMAL of their own
// digits, booleans as 1 and 0 (MySQL's TRUE and FALSE), strings as
// strings, which the server converts where they stand as it converts a
// quoted literal.
func (r *filterRenderer) literal(n rowfilter.Literal) {
	switch n.Kind {
	case rowfilter.Null:
		r.w("NULL")
	case rowfilter.Int32, rowfilter.Int64:
		i, err := strconv.ParseInt(n.Text, 10, 64)
		if err != nil {
			r.refuse("number %s cannot be read", n.Text)
			return
		}
		r.param(i)
	case rowfilter.Decimal:
		r.decimal(n.Text)
	case rowfilter.Bool:
		r.param(map[bool]int64{true: 1, false: 0}[n.Text == "true"])
	default:
		r.param(n.Text)
	}
}

// decimal binds a number as CAST(? AS DECIMAL(p,s)) with its own digits.
func (r *filterRenderer) decimal(s string) {
	text, prec, scale, ok := plainDecimal(s)
	if !ok {
		r.refuse("number %s does not fit MySQL's DECIMAL (at most 65 digits, 30 after the point)", s)
		return
	}
	r.args = append(r.args, text)
	r.w("CAST(? AS DECIMAL(" + strconv.Itoa(prec) + "," + strconv.Itoa(scale) + "))")
}

// plainDecimal writes a number ("-1.50", "2.5e-3") in plain decimal, with
// its precision and scale, if MySQL's DECIMAL holds it exactly.
func plainDecimal(s string) (text string, prec, scale int, ok bool) {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	mant, exps, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		var err error
		if exp, err = strconv.Atoi(exps); err != nil || exp < -100 || exp > 100 {
			return "", 0, 0, false
		}
	}
	ip, fp, _ := strings.Cut(mant, ".")
	digits := ip + fp
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", 0, 0, false
	}
	point := len(ip) + exp
	if point < 0 {
		digits, point = strings.Repeat("0", -point)+digits, 0
	}
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	ip, fp = strings.TrimLeft(digits[:point], "0"), digits[point:]
	if ip == "" {
		ip = "0"
	}
	scale, prec = len(fp), len(fp)+len(ip)
	if scale > 30 || prec > 65 {
		return "", 0, 0, false
	}
	text = sign + ip
	if fp != "" {
		text += "." + fp
	}
	return text, prec, scale, true
}

func (r *filterRenderer) unary(n rowfilter.Unary) {
	switch n.Op {
	case "NOT":
		r.w("(NOT ")
	case "-":
		r.w("(- ") // the space: "--" would begin a comment
	default:
		r.w("(")
	}
	r.expr(n.X)
	r.w(")")
}

// list writes open, the expressions separated by sep, and ")".
func (r *filterRenderer) list(open, sep string, es []rowfilter.Expr) {
	r.w(open)
	for i, e := range es {
		if i > 0 {
			r.w(sep)
		}
		r.expr(e)
	}
	r.w(")")
}

func not(b bool) string {
	if b {
		return "NOT "
	}
	return ""
}

// CheckFilter says whether filter is a valid condition on the table as the
// server has it now (a column renamed since the stream last saw the table
// is not the filter's fault), without reading a row: a column the table
// lacks, or a part with no MySQL twin, is refused with a *rowfilter.Error;
// the server prepares and explains the rendered query, and what it refuses
// is source.ErrFilter with its message.
func (s *Source) CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error {
	var refused error
	err := s.with(ctx, func(c *client.Conn) error {
		now, err := describeColumns(c, t.ID)
		if err != nil {
			return err
		}
		cond, args, err := filterSQL(filter, now)
		if err != nil {
			refused = err
			return nil
		}
		stmt, err := c.Prepare("EXPLAIN SELECT 1 FROM " + quoteTable(t.ID) + " WHERE " + cond + " LIMIT 1")
		if err != nil {
			return err
		}
		defer stmt.Close()
		_, err = stmt.Execute(args...)
		return err
	})
	if refused != nil {
		return refused
	}
	var myErr *gomysql.MyError
	if errors.As(err, &myErr) && !transientCode(myErr.Code) {
		return fmt.Errorf("%w on %s: %s", source.ErrFilter, quoteTable(t.ID), myErr.Message)
	}
	if err != nil {
		return fmt.Errorf("check filter on %s: %w", quoteTable(t.ID), err)
	}
	return nil
}

// transientCode says whether a server error may clear up on its own (too
// many connections, lock waits, deadlocks, a killed query or connection,
// the server going away); any other error on a filter's query is the
// filter's.
func transientCode(code uint16) bool {
	switch code {
	case 1040, 1053, 1205, 1213, 1317, 1927, 2006, 2013:
		return true
	}
	return false
}
