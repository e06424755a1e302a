package pgserver

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartHasLogicalReplication(t *testing.T) {
	t.Setenv("PGOPTIONS", "-c wal_level=minimal")
	ScrubEnv()
	ctx := context.Background()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("wal_level = %q, want logical", level)
	}
	if s.Port == 5432 {
		t.Fatal("throwaway server must not use the standard port")
	}
}
