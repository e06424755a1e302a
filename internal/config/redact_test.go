package config

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://user:secret@host:5432/db", "postgres://user:xxxxx@host:5432/db"},
		{"postgresql://user:secret@host/db?sslmode=require", "postgresql://user:xxxxx@host/db?sslmode=require"},
		{"postgres://user@host/db", "postgres://user@host/db"},
		{"postgres://host/db", "postgres://host/db"},
		{"postgres://user:%40secret@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://user:p@secret@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://user:pa/secret@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://user:pa#secret@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://user:pa?secret@host/db", "postgres://user:xxxxx@host/db"},
		{"postgres://host/db?sslmode=require&password=secret", "postgres://host/db?sslmode=require&password=xxxxx"},
		{"postgres://host/db?sslpassword=secret&x=1", "postgres://host/db?sslpassword=xxxxx&x=1"},
		{"postgres://u:secret@host/db?password=secret#frag", "postgres://u:xxxxx@host/db?password=xxxxx#frag"},
		{"postgres://", "postgres://"},
		{"sqlite://tidemark.db", "sqlite://tidemark.db"},
		{"host=db user=u password=secret dbname=x", "host=db user=u password=xxxxx dbname=x"},
		{"password = 'se cret\\' secret' host=db", "password = xxxxx host=db"},
		{"host=db password='secret", "host=db password=xxxxx"},
		{"host=db PASSWORD=secret", "host=db PASSWORD=xxxxx"},
		{"host=db sslpassword=secret", "host=db sslpassword=xxxxx"},
		{"  host=db\tpassword=secret  ", "  host=db\tpassword=xxxxx  "},
		{"host=db password=", "host=db password=xxxxx"},
		{"host=db", "host=db"},
		{"=x password=secret", "=x password=xxxxx"},
		{"bare words", "bare words"},
		{"", ""},
	} {
		got := Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("Redact(%q) = %q still holds the password", tc.in, got)
		}
	}
}
