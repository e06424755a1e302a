package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// TestExistingPublicationThroughTheCLI: with publication_mode existing,
// doctor fails a DBA's publication that lacks a table, with the fix; once
// fixed, a source user that owns no table streams through it, and the
// publication is left as the DBA made it.
func TestExistingPublicationThroughTheCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dsn := shopSource(t, `
		CREATE TABLE a (id int PRIMARY KEY, v text);
		CREATE TABLE b (id int PRIMARY KEY, v text);
		CREATE ROLE reader LOGIN REPLICATION;
		GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader;
		CREATE PUBLICATION dba_pub FOR TABLE a;`)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	reader := strings.Replace(dsn, "postgres@", "reader@", 1)
	cfg, dest, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", publication: dba_pub, publication_mode: existing, status_interval: 1s}`, reader), "{}")

	r := expect(t, 1, nil, "doctor", "-c", cfg)
	for _, want := range []string{"FAIL  stream s: publication", "publication dba_pub lacks 1 of the tables to stream (public.b)",
		`ALTER PUBLICATION "dba_pub" ADD TABLE "public"."b";`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor: want %q in\n%s", want, r.stdout)
		}
	}
	if _, err := conn.Exec(ctx, `ALTER PUBLICATION dba_pub ADD TABLE b`); err != nil {
		t.Fatal(err)
	}
	r = tidemark(t, "doctor", "-c", cfg)
	if !strings.Contains(r.stdout, "OK    stream s: publication") || !strings.Contains(r.stdout, "used as it is") ||
		!strings.Contains(r.stdout, "tables created later do not join it") {
		t.Errorf("doctor after the fix:\n%s", r.stdout)
	}

	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	poll(t, d, "stream s running", func() bool { return theStream(t, addr).State == store.StateRunning })
	if _, err := conn.Exec(ctx, `INSERT INTO b VALUES (1, 'streamed')`); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dest)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	poll(t, d, "the row in the destination", func() bool {
		var v string
		return db.QueryRow(`SELECT "v" FROM "b" WHERE "id" = 1`).Scan(&v) == nil && v == "streamed"
	})
	var tables string
	if err := conn.QueryRow(ctx, `SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_publication_tables WHERE pubname = 'dba_pub'`).Scan(&tables); err != nil || tables != "a,b" {
		t.Errorf("the publication holds %q (%v), want a,b as the DBA left it", tables, err)
	}
}
