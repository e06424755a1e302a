package postgres

import (
	"errors"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

func TestKeyCollation(t *testing.T) {
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}}
	cases := []struct {
		col     change.Column
		typ     string
		want    string
		refused bool
	}{
		{col: change.Column{Name: "id", Type: "bigint", BaseOID: 20}, typ: "bigint", want: ""},
		{col: change.Column{Name: "k", Type: "text", BaseOID: 25, Collation: "default", ByteOrder: true}, typ: "text", want: ` COLLATE "C"`},
		{col: change.Column{Name: "k", Type: "text", BaseOID: 25, Collation: "en-x-icu"}, typ: "text", want: ` COLLATE "en-x-icu"`},
		{col: change.Column{Name: "k", Type: "text", BaseOID: 25, Collation: "default"}, typ: "text", refused: true},
		{col: change.Column{Name: "k", Type: "mood", TypeOID: 16384, BaseOID: 16384}, typ: "text", refused: true},
		// MySQL keys: compared through a sort key (keycoll.go), or refused
		// when package collate cannot reproduce the collation.
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_general_ci"}, typ: "character varying(20)", want: ""},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_nopad_bin", ByteOrder: true}, typ: "character varying(20)", want: ` COLLATE "C"`},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_0900_ai_ci"}, typ: "character varying(20)", refused: true},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "uca1400_ai_ci"}, typ: "character varying(20)", want: ""},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_unicode_ci"}, typ: "character varying(20)", want: ""},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_german2_ci"}, typ: "character varying(20)", refused: true},
		{col: change.Column{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_uca1400_ai_cs"}, typ: "character varying(20)", refused: true},
	}
	for _, c := range cases {
		got, err := keyCollation(tbl, c.col, c.typ)
		if c.refused {
			if !errors.Is(err, sink.ErrKeyOrder) {
				t.Errorf("%+v: got %q, %v; want ErrKeyOrder", c.col, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: got %q, %v; want %q", c.col, got, err, c.want)
		}
	}
}
