package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// Attribute is one column of a source table as the catalog holds it now.
type Attribute = source.Attribute

// attributesFrom reads every attribute of one table in attnum order, the
// table's oid to follow. The collation columns are computed as in
// Describe.
const attributesFrom = attributesSelect + collationColumns + attributesRest

// attributesSQL is attributesFrom for the table of oid $1.
const attributesSQL = attributesFrom + `$1 ORDER BY a.attnum`

// attributesByNameSQL is attributesSQL for the table named $1 (quoted),
// the database's default collation given as $2 and $3
// (collationColumnsGiven).
const attributesByNameSQL = attributesSelect + collationColumnsGiven + attributesRest + `to_regclass($1) ORDER BY a.attnum`

const (
	attributesSelect = `
	SELECT a.attnum, a.attname::text, a.attisdropped, a.attgenerated <> '',
	       COALESCE(format_type(NULLIF(a.atttypid, 0), a.atttypmod), ''), a.atttypid,
	       COALESCE(CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END, 0), a.atttypmod,
	       `
	attributesRest = `
	       a.attnotnull, a.atthasmissing, a.attmissingval::text, a.atthasdef, ` + generatedColumn + `
	FROM pg_attribute a
	LEFT JOIN pg_type t ON t.oid = a.atttypid
	LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
	WHERE a.attnum > 0 AND a.attrelid = `
)

// attributes reads the attributes of the relation with oid relid; none
// when it does not exist.
func attributes(ctx context.Context, q queryer, relid uint32) ([]Attribute, error) {
	rows, err := q.Query(ctx, attributesSQL, relid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attribute, error) { return scanAttribute(r.Scan) })
}

// scanAttribute reads one row of attributesSQL through scan.
func scanAttribute(scan func(dest ...any) error) (Attribute, error) {
	var a Attribute
	var hasMissing bool
	var missing *string
	err := scan(&a.Num, &a.Name, &a.Dropped, &a.Generated, &a.Type, &a.TypeOID, &a.BaseOID, &a.TypeMod,
		&a.Collation, &a.ByteOrder, &a.NotNull, &hasMissing, &missing, &a.HasDefault, &a.Column.Generated)
	if err != nil {
		return a, err
	}
	a.Tag = change.PostgresTag(a.BaseOID)
	if hasMissing && missing != nil {
		if v, ok := parseMissing(*missing); ok {
			a.Missing = &v
		} else {
			// A value we cannot read back: judged like a default whose
			// value for older rows is unknown.
			a.HasDefault = true
		}
	}
	return a, nil
}

// tableOID looks a table up by name: 0 when it does not exist.
func tableOID(ctx context.Context, q queryer, id change.TableID) (uint32, error) {
	var oid *uint32
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::oid", quoteTable(id)).Scan(&oid); err != nil {
		return 0, fmt.Errorf("look up %s: %w", id, err)
	}
	if oid == nil {
		return 0, nil
	}
	return *oid, nil
}

// Attributes reads the catalog's attributes of a table now, keyed by
// attnum; none when the table does not exist.
func (s *Source) Attributes(ctx context.Context, id change.TableID) (map[int16]Attribute, error) {
	var attrs []Attribute
	found := false
	err := s.read(ctx, func(q queryer) error {
		oid, err := tableOID(ctx, q, id)
		if err != nil || oid == 0 {
			return err
		}
		found = true
		if attrs, err = attributes(ctx, q, oid); err != nil {
			return fmt.Errorf("read columns of %s: %w", id, err)
		}
		return nil
	})
	if err != nil || !found {
		return nil, classify(err)
	}
	out := make(map[int16]Attribute, len(attrs))
	for _, a := range attrs {
		out[a.Num] = a
	}
	return out, nil
}

// parseMissing reads the one-element array literal attmissingval prints
// as ({7}, {"a \"b\""}, {NULL}).
func parseMissing(s string) (change.Value, bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return change.Value{}, false
	}
	body := s[1 : len(s)-1]
	if body == "NULL" {
		return change.Null, true
	}
	if !strings.HasPrefix(body, `"`) {
		if strings.ContainsAny(body, `{}",\ `) || body == "" {
			return change.Value{}, false
		}
		return change.Text(body), true
	}
	var b strings.Builder
	for i := 1; i < len(body); i++ {
		switch c := body[i]; c {
		case '\\':
			if i+1 >= len(body) {
				return change.Value{}, false
			}
			i++
			b.WriteByte(body[i])
		case '"':
			if i != len(body)-1 {
				return change.Value{}, false
			}
			return change.Text(b.String()), true
		default:
			b.WriteByte(c)
		}
	}
	return change.Value{}, false
}

// shapeOf builds a table's shape from its live attributes, keyed like prev
// (the key columns are found by attnum, by name when prev lacks it).
func shapeOf(prev *change.Table, attrs []Attribute) (*change.Table, error) {
	t := &change.Table{ID: prev.ID}
	for _, a := range attrs {
		if !a.Dropped {
			t.Columns = append(t.Columns, a.Column)
		}
	}
	for _, k := range prev.KeyColumns() {
		i := columnOf(t, k)
		if i < 0 {
			return nil, &PermanentError{Err: fmt.Errorf("table %s: key column %q is gone from the source: %w", prev.ID, k.Name, ErrNoKey),
				Hint: "the table's rows cannot be matched any more: see docs/schema-changes.md"}
		}
		t.Key = append(t.Key, i)
	}
	return t, nil
}

// columnOf finds c in t by attnum, or by name when c has none.
func columnOf(t *change.Table, c change.Column) int {
	if c.Num != 0 {
		return t.ColumnByNum(c.Num)
	}
	return t.ColumnIndex(c.Name)
}

// typeInfo is a type's name and base type, by oid and modifier.
type typeInfo struct {
	name string
	base uint32
}

type typeKey struct {
	oid uint32
	mod int32
}

// resolveRelation gives the shape a relation message describes, its
// columns numbered by attnum (see align), with prev's key. It reads the
// catalog; types cache the type names it had to look up.
func (s *Source) resolveRelation(ctx context.Context, prev *change.Table, m *pglogrepl.RelationMessage, types map[typeKey]typeInfo) (*change.Table, error) {
	var attrs []Attribute
	err := s.read(ctx, func(q queryer) (err error) {
		attrs, err = attributes(ctx, q, m.RelationID)
		return err
	})
	if err != nil {
		return nil, classify(fmt.Errorf("read columns of %s.%s: %w", m.Namespace, m.RelationName, err))
	}
	byNum := make(map[int16]Attribute, len(attrs))
	for _, a := range attrs {
		byNum[a.Num] = a
	}
	nums := align(prev, m.Columns, attrs)
	t := &change.Table{ID: prev.ID}
	for i, mc := range m.Columns {
		col := change.Column{Name: mc.Name, TypeOID: mc.DataType, TypeMod: mc.TypeModifier, Num: nums[i]}
		a, known := byNum[nums[i]]
		p := -1
		if nums[i] != 0 {
			p = prev.ColumnByNum(nums[i])
		}
		switch {
		case known && !a.Dropped && change.SameType(a.Column, col):
			col = a.Column
		case p >= 0 && change.SameType(prev.Columns[p], col):
			col = prev.Columns[p]
		default:
			ti, err := s.typeInfo(ctx, types, typeKey{mc.DataType, mc.TypeModifier})
			if err != nil {
				return nil, err
			}
			col.Type, col.BaseOID, col.Tag = ti.name, ti.base, change.PostgresTag(ti.base)
			if known && !a.Dropped {
				col.Collation, col.ByteOrder, col.NotNull = a.Collation, a.ByteOrder, a.NotNull
			}
		}
		col.Name, col.Num = mc.Name, nums[i]
		t.Columns = append(t.Columns, col)
	}
	for _, k := range prev.KeyColumns() {
		if i := columnOf(t, k); i >= 0 {
			t.Key = append(t.Key, i)
		}
	}
	return t, nil
}

func (s *Source) typeInfo(ctx context.Context, cache map[typeKey]typeInfo, k typeKey) (typeInfo, error) {
	if ti, ok := cache[k]; ok {
		return ti, nil
	}
	var ti typeInfo
	err := s.read(ctx, func(q queryer) error {
		return q.QueryRow(ctx, `
			SELECT format_type(t.oid, $2), CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
			FROM pg_type t WHERE t.oid = $1`, k.oid, k.mod).Scan(&ti.name, &ti.base)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		ti = typeInfo{name: "text", base: k.oid}
	} else if err != nil {
		return ti, classify(fmt.Errorf("look up type %d: %w", k.oid, err))
	}
	cache[k] = ti
	return ti, nil
}

// align numbers the columns of a relation message by attnum. The message
// lists the table's columns as they were when the change was logged, in
// attnum order, without generated ones; the catalog is now, maybe some DDL
// later. Every attribute alive now and older than the message's last
// column was alive then, so it is the next column of the message (under
// whatever name it had). A dropped attribute was in the message only if it
// was dropped after it: it is taken when the message has more columns left
// than live attributes remain, or when prev knew it under the name the
// message gives and the next live attribute does not have that name.
// Columns left over (a catalog that moved on too far) are matched by name,
// or keep attnum 0.
func align(prev *change.Table, msg []*pglogrepl.RelationMessageColumn, attrs []Attribute) []int16 {
	var cands []Attribute
	for _, a := range attrs {
		if !a.Generated {
			cands = append(cands, a)
		}
	}
	nums := make([]int16, len(msg))
	j := 0
	for k, a := range cands {
		if j == len(msg) {
			break
		}
		if a.Dropped && !droppedInMessage(prev, msg[j].Name, cands[k:], len(msg)-j) {
			continue
		}
		nums[j] = a.Num
		j++
	}
	if j == len(msg) {
		return nums
	}
	for i := range nums { // misaligned: names decide
		nums[i] = 0
		for _, a := range cands {
			if !a.Dropped && a.Name == msg[i].Name {
				nums[i] = a.Num
			}
		}
	}
	return nums
}

// droppedInMessage decides whether the dropped attribute cands[0] is the
// message's next column, named name, with left message columns to go.
func droppedInMessage(prev *change.Table, name string, cands []Attribute, left int) bool {
	alive := 0
	nextAlive := ""
	for _, c := range cands[1:] {
		if !c.Dropped {
			if alive == 0 {
				nextAlive = c.Name
			}
			alive++
		}
	}
	if left > alive {
		return true
	}
	p := prev.ColumnByNum(cands[0].Num)
	return p >= 0 && prev.Columns[p].Name == name && nextAlive != name
}

// Captures reports whether a table is in the stream's publication.
func (s *Source) Captures(ctx context.Context, id change.TableID) (bool, error) {
	var ok bool
	err := s.read(ctx, func(q queryer) error {
		return q.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
			               WHERE p.pubname = $1 AND pr.prrelid = to_regclass($2))`,
			s.cfg.Publication, quoteTable(id)).Scan(&ok)
	})
	if err != nil {
		return false, classify(fmt.Errorf("look up %s in publication %s: %w", id, s.cfg.Publication, err))
	}
	return ok, nil
}

// AddCapture adds a table to the stream's publication, unless it is
// in it: from the commit of the ALTER PUBLICATION on, its changes are in
// the log the stream reads.
func (s *Source) AddCapture(ctx context.Context, id change.TableID) error {
	if s.cfg.PublicationExisting {
		return s.checkPublication(ctx, []change.TableID{id})
	}
	in, err := s.Captures(ctx, id)
	if err != nil || in {
		return err
	}
	err = s.write(ctx, "ALTER PUBLICATION "+quoteIdent(s.cfg.Publication)+" ADD TABLE "+quoteTable(id))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" {
		return nil // added meanwhile
	}
	if err != nil {
		return classify(fmt.Errorf("add %s to publication %s: %w", id, s.cfg.Publication, err))
	}
	return nil
}

// snapshotShape reads t's columns in the chunk's transaction, keyed like t.
func snapshotShape(ctx context.Context, q queryer, t *change.Table) (*change.Table, error) {
	oid, err := tableOID(ctx, q, t.ID)
	if err != nil {
		return nil, err
	}
	attrs, err := attributes(ctx, q, oid)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", t.ID, err)
	}
	return shapeOf(t, attrs)
}
