package change

import "testing"

func TestWidens(t *testing.T) {
	col := func(oid uint32, mod int32) Column { return Column{TypeOID: oid, TypeMod: mod} }
	varchar := func(n int32) Column { return col(oidVarchar, n+4) }
	numeric := func(p, s int32) Column { return col(oidNumeric, (p<<16|s)+4) }
	for _, tc := range []struct {
		name     string
		from, to Column
		want     bool
	}{
		{"smallint to integer", col(oidInt2, -1), col(oidInt4, -1), true},
		{"smallint to bigint", col(oidInt2, -1), col(oidInt8, -1), true},
		{"integer to bigint", col(oidInt4, -1), col(oidInt8, -1), true},
		{"bigint to integer", col(oidInt8, -1), col(oidInt4, -1), false},
		{"integer to text", col(oidInt4, -1), col(oidText, -1), false},
		{"real to double", col(oidFloat4, -1), col(oidFloat8, -1), true},
		{"double to real", col(oidFloat8, -1), col(oidFloat4, -1), false},
		{"varchar(10) to varchar(20)", varchar(10), varchar(20), true},
		{"varchar(20) to varchar(10)", varchar(20), varchar(10), false},
		{"varchar(10) to varchar", varchar(10), col(oidVarchar, -1), true},
		{"varchar to varchar(10)", col(oidVarchar, -1), varchar(10), false},
		{"varchar(10) to text", varchar(10), col(oidText, -1), true},
		{"text to varchar(10)", col(oidText, -1), varchar(10), false},
		{"numeric(10,2) to numeric(12,2)", numeric(10, 2), numeric(12, 2), true},
		{"numeric(10,2) to numeric(12,3)", numeric(10, 2), numeric(12, 3), false},
		{"numeric(12,2) to numeric(10,2)", numeric(12, 2), numeric(10, 2), false},
		{"numeric(10,2) to numeric", numeric(10, 2), col(oidNumeric, -1), true},
		{"numeric to numeric(10,2)", col(oidNumeric, -1), numeric(10, 2), false},
		{"timestamp(3) to timestamp(6)", col(oidTimestamp, 3), col(oidTimestamp, 6), true},
		{"timestamp(6) to timestamp(0)", col(oidTimestamp, 6), col(oidTimestamp, 0), false},
		{"timestamp to timestamptz", col(oidTimestamp, -1), col(oidTimestamptz, -1), false},
		{"same type", col(oidInt4, -1), col(oidInt4, -1), false},
	} {
		if got := Widens(tc.from, tc.to); got != tc.want {
			t.Errorf("%s: Widens = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSameShape(t *testing.T) {
	a := &Table{ID: TableID{"public", "t"}, Columns: []Column{{Name: "id", TypeOID: oidInt4, TypeMod: -1, Num: 1}, {Name: "v", TypeOID: oidText, TypeMod: -1, Num: 2, Collation: "C"}}, Key: []int{0}}
	b := &Table{ID: a.ID, Columns: []Column{{Name: "id", TypeOID: oidInt4, TypeMod: -1, Num: 1}, {Name: "v", TypeOID: oidText, TypeMod: -1, Num: 2, NotNull: true}}, Key: []int{0}}
	if !SameShape(a, b) {
		t.Error("collation and NOT NULL count as a shape change")
	}
	b.Columns[1].Name = "w"
	if SameShape(a, b) {
		t.Error("a renamed column is the same shape")
	}
	b.Columns[1].Name, b.Columns[1].Num = "v", 3
	if SameShape(a, b) {
		t.Error("a column of another attnum is the same shape")
	}
}
