package pgsum

import (
	"encoding/json"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// TestSelectNamesOnlyPgCatalog parses the checksum's query and checks that
// every function, operator, type and collation it names is pg_catalog's:
// an unqualified one would resolve to whatever a user put first in the
// search path (a public.hashtextextended(text, integer), say).
func TestSelectNamesOnlyPgCatalog(t *testing.T) {
	sql := Query([]Column{{Ref: `"id"`}, {Ref: `d."c"`, BaseOID: bpcharOID}, {Ref: `"p"`},
		{Ref: `"i"`, BaseOID: int4OID}, {Ref: `"u"`, BaseOID: uuidOID}}, `FROM "t" AS d`)
	out, err := pg_query.ParseToJSON(sql)
	if err != nil {
		t.Fatalf("the checksum query does not parse: %v\n%s", err, sql)
	}
	var tree any
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(k, c)
			}
		case []any:
			for _, c := range v {
				walk(key, c)
			}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		var names any
		switch key {
		case "FuncCall":
			names = m["funcname"]
		case "TypeName", "typeName":
			names = m["names"]
		case "CollateClause":
			names = m["collname"]
		case "A_Expr":
			names = m["name"]
		default:
			return
		}
		parts := nameParts(names)
		counts[strings.ToLower(key)]++
		if len(parts) != 2 || parts[0] != "pg_catalog" {
			t.Errorf("%s %s is not qualified by pg_catalog in\n%s", key, strings.Join(parts, "."), sql)
		}
	}
	walk("", tree)
	// count, sum, the row's mix (2 × hashint8extended, int8shr), 3 ×
	// hashtextextended, concat, the integer's (2 × hashint8extended,
	// int8shr), uuid_hash_extended; four XORs between the columns; the
	// casts and the collations.
	if counts["funccall"] != 13 || counts["a_expr"] != 4 || counts["typename"] == 0 || counts["collateclause"] != 3 {
		t.Errorf("names checked: %v", counts)
	}
}

// nameParts reads a parse tree's list of String nodes.
func nameParts(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, n := range list {
		if s, ok := n.(map[string]any)["String"].(map[string]any); ok {
			out = append(out, s["sval"].(string))
		}
	}
	return out
}
