package doctor

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/daemon"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/sink"
	pgsink "github.com/tidemark/tidemark/internal/sink/postgres"
	"github.com/tidemark/tidemark/internal/sink/sqlite"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

func TestHealthy(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, `CREATE TABLE orders (id int PRIMARY KEY, v text);
		CREATE TABLE lines (order_id int, n int, PRIMARY KEY (order_id, n))`)
	local := filepath.Join(f.dir, "local.db")
	db, err := openSQLite(local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE x (a int)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg := f.config(f.dsn, "", fmt.Sprintf(`
connections:
  - {name: wh, type: postgres, dsn: "%s"}
  - {name: local, type: sqlite, path: "%s"}
tasks:
  - {name: load, type: shell, command: "true", schedule: "daily 01:00"}
`, f.dsn, local))
	checks := run(t, cfg)
	noFail(t, checks)
	for _, want := range []struct{ name, detail string }{
		{"metadata store", "does not exist yet"},
		{": source", "connected to 127.0.0.1"},
		{": wal_level", "logical"},
		{": replication privilege", "superuser"},
		{": tables", "public.lines, public.orders"},
		{": select privilege", "may read the 2 included tables"},
		{": table keys", "all 2 included tables"},
		{": publication", "does not exist yet"},
		{": replication slots", "needs 1 more"},
		{": wal senders", "needs 2 more"}, // a first start's load exports its snapshot on one
		{": slot", "does not exist yet"},
		{": clock", "round trip"},
		{": destination", "does not exist yet"},
		{": destination disk", "free"},
		{"metadata disk", "free"},
		{"connection wh", "connected"},
		{"connection local", "SQLite database"},
		{"shell", "/bin/sh"},
	} {
		c := find(t, checks, want.name)
		if c.Status == Fail || !strings.Contains(c.Detail, want.detail) {
			t.Errorf("%s: %s %q, want %q in it", c.Name, c.Status, c.Detail, want.detail)
		}
	}

	// With its slot, its publication and an existing metadata store.
	f.exec(fmt.Sprintf(`SELECT pg_create_logical_replication_slot('tidemark_%s', 'pgoutput');
		CREATE PUBLICATION tidemark_%s FOR TABLE orders`, f.name, f.name))
	st, err := openStore(t, cfg.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	checks = run(t, cfg)
	noFail(t, checks)
	expect(t, checks, ": slot", OK, "logical, pgoutput, wal_status reserved, inactive")
	expect(t, checks, ": retained WAL", OK, "retains", "warns above 1.0 GiB")
	expect(t, checks, ": replication slots", OK, "is among them")
	expect(t, checks, ": publication", OK, "exists (1 table)", "sets its tables to the 2 tables")
	expect(t, checks, "metadata store", OK, "opens (sqlite, schema version")
}

func TestWalLevelReplica(t *testing.T) {
	t.Parallel()
	srv, err := pgserver.Start(context.Background(), pgserver.Options{Settings: map[string]string{"wal_level": "replica"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	f := setup(t, srv, "CREATE TABLE t (id int PRIMARY KEY)")
	checks := run(t, f.config(f.dsn, "", ""))
	expect(t, checks, ": wal_level", Fail, "wal_level is replica", "ALTER SYSTEM SET wal_level = logical", "restart")
	if n := Failed(checks); n != 1 {
		t.Errorf("%d checks failed, want only wal_level", n)
	}
}

func TestPrivileges(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "")
	user := f.name + "_user"
	f.exec(fmt.Sprintf(`CREATE ROLE %[1]s LOGIN;
		CREATE SCHEMA app;
		CREATE TABLE app.t (id int PRIMARY KEY);
		CREATE TABLE public.u (id int PRIMARY KEY);
		GRANT SELECT ON public.u TO %[1]s`, user))
	t.Cleanup(func() { f.exec(fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", user)) })
	cfg := f.config(f.userDSN(user, "pw"), `include: ["app.*", "public.*"]`, "")
	checks := run(t, cfg)
	expect(t, checks, ": replication privilege", Fail, "neither REPLICATION nor superuser", fmt.Sprintf(`ALTER ROLE "%s" REPLICATION;`, user))
	expect(t, checks, ": select privilege", Fail, "cannot read 1 of the included tables: app.t",
		fmt.Sprintf(`GRANT USAGE ON SCHEMA "app" TO "%s";`, user), fmt.Sprintf(`GRANT SELECT ON "app"."t" TO "%s";`, user))
	expect(t, checks, ": publication", Fail, "lacks CREATE on database", "does not own 2 of the tables",
		fmt.Sprintf(`GRANT CREATE ON DATABASE "%s" TO "%s";`, f.name, user), fmt.Sprintf(`GRANT "postgres" TO "%s";`, user))

	f.exec(fmt.Sprintf(`ALTER ROLE %[1]s REPLICATION;
		GRANT USAGE ON SCHEMA app TO %[1]s; GRANT SELECT ON app.t TO %[1]s;
		GRANT CREATE ON DATABASE %[2]s TO %[1]s;
		ALTER TABLE app.t OWNER TO %[1]s; ALTER TABLE public.u OWNER TO %[1]s`, user, f.name))
	checks = run(t, cfg)
	noFail(t, checks)
	expect(t, checks, ": replication privilege", OK, "has REPLICATION")

	// A publication owned by someone else, and one FOR ALL TABLES.
	f.exec(fmt.Sprintf("CREATE PUBLICATION tidemark_%s FOR TABLE public.u", f.name))
	expect(t, run(t, cfg), ": publication", Fail, "belongs to postgres", fmt.Sprintf(`ALTER PUBLICATION "tidemark_%s" OWNER TO "%s";`, f.name, user))
	f.exec(fmt.Sprintf("DROP PUBLICATION tidemark_%[1]s; CREATE PUBLICATION tidemark_%[1]s FOR ALL TABLES", f.name))
	expect(t, run(t, f.config(f.dsn, "", "")), ": publication", Fail, "FOR ALL TABLES", "streams[0].source.publication")
}

// TestPassMeansRuns: once the doctor finds nothing to fail, a stream of a
// user that is no superuser runs.
func TestPassMeansRuns(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "")
	user := f.name + "_user"
	f.exec(fmt.Sprintf(`CREATE ROLE %[1]s LOGIN REPLICATION;
		CREATE SCHEMA app;
		CREATE TABLE app.t (id int PRIMARY KEY);
		CREATE TABLE public.u (id int PRIMARY KEY);
		GRANT USAGE ON SCHEMA app TO %[1]s; GRANT SELECT ON app.t, public.u TO %[1]s;
		GRANT CREATE ON DATABASE %[2]s TO %[1]s;
		GRANT postgres TO %[1]s`, user, f.name))
	t.Cleanup(func() { f.exec(fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", user)) })
	cfg := f.config(f.userDSN(user, "pw"), `include: ["app.*", "public.*"]`, `api: {listen: "127.0.0.1:0"}`)
	noFail(t, run(t, cfg))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := daemon.New(ctx, cfg, slog.New(slog.DiscardHandler), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Streams()[0]
	events, unsubscribe := s.Subscribe()
	defer unsubscribe()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	timeout := time.After(time.Minute)
	for s.State().State != store.StateRunning {
		select {
		case <-events:
		case err := <-done:
			t.Fatalf("the daemon ended: %v", err)
		case <-timeout:
			t.Fatalf("the stream is %+v", s.State())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checks := run(t, cfg)
	noFail(t, checks)
	expect(t, checks, ": slot", OK, "logical, pgoutput")
	expect(t, checks, ": publication", OK, "exists (2 tables)")
}

func TestKeys(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, `CREATE TABLE keyed (id int PRIMARY KEY);
		CREATE TABLE bare (a int, b text);
		CREATE TABLE uniq (a int NOT NULL, b int);
		CREATE UNIQUE INDEX uniq_a ON uniq (a);
		CREATE TABLE configured (a int, b text)`)
	checks := run(t, f.config(f.dsn, `keys: {public.configured: [a]}`, ""))
	c := expect(t, checks, ": table keys", Warn, "3 of 4 tables have no usable row key", "public.bare", "public.uniq", "public.configured",
		`ALTER TABLE "public"."uniq" REPLICA IDENTITY USING INDEX "uniq_a";`,
		`ALTER TABLE "public"."bare" ADD PRIMARY KEY`, "streams[0].keys",
		`ALTER TABLE "public"."configured" REPLICA IDENTITY FULL;`)
	if strings.Contains(c.Detail, "keyed") {
		t.Errorf("the keyed table is reported: %s", c.Detail)
	}
	noFail(t, checks)
	expect(t, checks, ": publication", OK, "with the 1 table to replicate")

	// The fixes work.
	f.exec(`ALTER TABLE uniq REPLICA IDENTITY USING INDEX uniq_a;
		ALTER TABLE configured REPLICA IDENTITY FULL;
		ALTER TABLE bare ADD PRIMARY KEY (a)`)
	checks = run(t, f.config(f.dsn, `keys: {public.configured: [a]}`, ""))
	expect(t, checks, ": table keys", OK, "all 4 included tables")

	// A configured key column that does not exist stops the stream.
	checks = run(t, f.config(f.dsn, `keys: {public.configured: [nope]}`, ""))
	expect(t, checks, ": table keys", Fail, `key column "nope" does not exist`, "streams[0].keys")
}

func TestSlotInvalidated(t *testing.T) {
	t.Parallel()
	srv, err := pgserver.Start(context.Background(), pgserver.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	f := setup(t, srv, "CREATE TABLE t (id int PRIMARY KEY)")
	f.exec(fmt.Sprintf("SELECT pg_create_logical_replication_slot('tidemark_%s', 'pgoutput')", f.name))
	var status string
	for i := 0; status != "lost"; i++ {
		if i == 20 {
			t.Fatalf("the slot is still %s", status)
		}
		f.exec("INSERT INTO t SELECT g FROM generate_series(1, 50000) g ON CONFLICT DO NOTHING; DELETE FROM t; SELECT pg_switch_wal(); CHECKPOINT")
		if err := f.conn.QueryRow(f.ctx, "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", "tidemark_"+f.name).Scan(&status); err != nil {
			t.Fatal(err)
		}
	}
	checks := run(t, f.config(f.dsn, "", ""))
	expect(t, checks, ": slot", Fail, "invalidated (wal_status lost)", "tidemark stream reset "+f.name)
	for _, c := range checks {
		if strings.HasSuffix(c.Name, ": retained WAL") {
			t.Errorf("a lost slot's retained WAL is reported: %+v", c)
		}
	}
}

// TestSlotMissing: a slot that is missing while the destination holds a
// checkpoint was lost; one that is not the kind tidemark needs fails.
func TestSlotMissing(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "CREATE TABLE t (id int PRIMARY KEY)")
	ctx := context.Background()
	const pos = change.LSN(0x16B3748)

	dest := filepath.Join(f.dir, "dest.db")
	snk, err := sqlite.Open(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Apply(ctx, &sink.Batch{Stream: f.name, Position: pos}); err != nil {
		t.Fatal(err)
	}
	snk.Close()
	checks := run(t, f.config(f.dsn, "", ""))
	expect(t, checks, ": destination", OK, "checkpoint is at 0/16B3748")
	expect(t, checks, ": slot", Fail, "is gone", "0/16B3748", "tidemark stream reset "+f.name)

	// The same with a PostgreSQL destination.
	destDSN, err := server.CreateDatabase(ctx, f.name+"_dest")
	if err != nil {
		t.Fatal(err)
	}
	psnk, err := pgsink.Open(ctx, destDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := psnk.Apply(ctx, &sink.Batch{Stream: f.name, Position: pos}); err != nil {
		t.Fatal(err)
	}
	psnk.Close()
	checks = run(t, f.config(f.dsn, fmt.Sprintf(`destination: {type: postgres, dsn: "%s"}`, destDSN), ""))
	expect(t, checks, ": destination", OK, "connected to", "checkpoint is at 0/16B3748")
	expect(t, checks, ": slot", Fail, "is gone", "tidemark stream reset "+f.name)

	// A slot of the wrong kind.
	f.exec(fmt.Sprintf("SELECT pg_create_logical_replication_slot('tidemark_%s', 'test_decoding')", f.name))
	expect(t, run(t, f.config(f.dsn, "", "")), ": slot", Fail, "uses plugin test_decoding", "streams[0].source.slot")
	f.exec(fmt.Sprintf("SELECT pg_drop_replication_slot('tidemark_%[1]s'); SELECT pg_create_physical_replication_slot('tidemark_%[1]s')", f.name))
	expect(t, run(t, f.config(f.dsn, "", "")), ": slot", Fail, "is a physical slot", fmt.Sprintf("pg_drop_replication_slot('tidemark_%s')", f.name))
}

// silentListener accepts connections and never answers, like a host that
// swallows packets; it is closed when the test ends.
func silentListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "CREATE TABLE t (id int PRIMARY KEY)")
	const secret = "Sup3rSecretPw"
	closed := fmt.Sprintf("postgres://tidemark:%s@127.0.0.1:%d/db", secret, closedPort(t))
	silent := fmt.Sprintf("postgres://tidemark:%s@127.0.0.1:%d/db?connect_timeout=60", secret, silentListener(t))
	y := fmt.Sprintf(`
metadata: "%s"
streams:
  - name: %s
    source: {dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.*"]
  - name: %s_b
    source: {dsn: "%s"}
    destination: {type: postgres, dsn: "%s"}
    include: ["public.*"]
connections:
  - {name: wh, type: postgres, dsn: "%s"}
  - {name: local, type: sqlite, path: "%s"}
`, closed, f.name, f.dsn, closed, f.name, closed, silent, silent, filepath.Join(f.dir, "missing.db"))
	cfg, err := parse(y)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	checks := run(t, cfg)
	if took := time.Since(start); took > Timeout+3*time.Second {
		t.Errorf("the doctor took %s with an unreachable host; each check is bounded by %s", took, Timeout)
	}
	expect(t, checks, "metadata store", Fail, "connection refused", "check the host and port in metadata")
	expect(t, checks, f.name+": destination", Fail, "cannot connect to 127.0.0.1:", "connection refused", "streams[0].destination.dsn")
	expect(t, checks, f.name+"_b: source", Fail, "connection refused", "skipped", "streams[1].source.dsn")
	expect(t, checks, f.name+"_b: destination", Fail, "no answer within 5s", "streams[1].destination.dsn")
	expect(t, checks, "connection wh", Fail, "no answer within 5s", "connections[0].dsn")
	expect(t, checks, "connection local", Fail, "does not exist", "connections[1].path")
	// The first stream's source is fine; its slot cannot tell whether the
	// stream ran before.
	expect(t, checks, f.name+": slot", Warn, "checkpoint could not be read")
	for _, c := range checks {
		if strings.Contains(c.Detail+c.Fix, secret) {
			t.Errorf("%s shows the password: %+v", c.Name, c)
		}
	}
}

func TestSQLiteDirs(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "CREATE TABLE t (id int PRIMARY KEY)")
	missing := filepath.Join(f.dir, "nope")
	y := fmt.Sprintf(`
metadata: "sqlite://%s/meta.db"
streams:
  - name: %s
    source: {dsn: "%s"}
    destination: {type: sqlite, path: "%s/dest.db"}
    include: ["public.*"]
`, missing, f.name, f.dsn, missing)
	cfg, err := parse(y)
	if err != nil {
		t.Fatal(err)
	}
	checks := run(t, cfg)
	expect(t, checks, ": destination", Fail, "directory "+missing+" does not exist", "mkdir -p "+missing, "streams[0].destination.path")
	expect(t, checks, "metadata store", Fail, "does not exist", "mkdir -p "+missing)

	// A file that is not a SQLite database.
	if err := os.Mkdir(missing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(missing, "dest.db"), []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	checks = run(t, cfg)
	expect(t, checks, ": destination", Fail, "not a database")
	expect(t, checks, "metadata store", OK, "does not exist yet")
	if _, err := os.Stat(filepath.Join(missing, "meta.db")); err == nil {
		t.Error("the doctor created the metadata store")
	}
}

// TestGeneratedColumns: doctor says which stored generated columns the
// destination computes, warns about those whose values are read from the
// source for every change, and about a generated key column, whose table
// is not streamed.
func TestGeneratedColumns(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, `CREATE TABLE g (id int PRIMARY KEY, n int, s text,
		  twice int GENERATED ALWAYS AS (n * 2) STORED,
		  low text GENERATED ALWAYS AS (lower(s)) STORED)`)
	checks := run(t, f.config(f.dsn, "", ""))
	expect(t, checks, ": generated columns", Warn, `the SQLite destination computes public.g."twice"`,
		`public.g."low" are read from the source for every insert and update`, "function lower is not one SQLite computes")
	checks = run(t, f.config(f.dsn, fmt.Sprintf(`destination: {type: postgres, dsn: "%s"}`, f.dsn), ""))
	expect(t, checks, ": generated columns", OK, `the PostgreSQL destination computes public.g."twice", public.g."low"`)

	f.exec(`CREATE TABLE k (a int, b int GENERATED ALWAYS AS (a + 1) STORED PRIMARY KEY)`)
	checks = run(t, f.config(f.dsn, fmt.Sprintf(`destination: {type: postgres, dsn: "%s"}`, f.dsn), ""))
	expect(t, checks, ": generated columns", Warn, "public.k has a generated key column and will not be replicated")
	expect(t, checks, ": table keys", Warn, `key column "b" is a generated column`)
}
