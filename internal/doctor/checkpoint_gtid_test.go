package doctor

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
	pgsink "github.com/tidemark/tidemark/internal/sink/postgres"
	"github.com/tidemark/tidemark/internal/sink/sqlite"
	_ "github.com/tidemark/tidemark/internal/source/mysql" // registers type mysql
)

// TestCheckpointShowsGTID: the destination check shows a MySQL stream's
// checkpoint in binlog notation with its GTID state, from either sink, and
// a checkpoint table from before resume tokens without one.
func TestCheckpointShowsGTID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := &sink.Batch{Stream: "s", Position: change.LSN(3<<32 | 1234), Resume: "0-1-42"}
	dest := filepath.Join(t.TempDir(), "dest.db")
	snk, err := sqlite.Open(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Apply(ctx, cp); err != nil {
		t.Fatal(err)
	}
	snk.Close()
	stream := &config.Stream{Name: "s", Source: config.Source{Type: config.TypeMySQL}, Destination: config.Destination{Type: config.TypeSQLite, Path: dest}}
	destinationSays(t, stream, "checkpoint is at 000003:1234 (GTID 0-1-42)")

	destDSN, err := server.CreateDatabase(ctx, "gtid_dest")
	if err != nil {
		t.Fatal(err)
	}
	psnk, err := pgsink.Open(ctx, destDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := psnk.Apply(ctx, cp); err != nil {
		t.Fatal(err)
	}
	psnk.Close()
	pgStream := *stream
	pgStream.Destination = config.Destination{Type: config.TypePostgres, DSN: destDSN}
	destinationSays(t, &pgStream, "checkpoint is at 000003:1234 (GTID 0-1-42)")

	// A checkpoint table from before resume tokens.
	db, err := sql.Open("sqlite", dest)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`ALTER TABLE "_tidemark_checkpoint" DROP COLUMN "resume"`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	destinationSays(t, stream, "checkpoint is at 000003:1234")
}

func destinationSays(t *testing.T, s *config.Stream, want string) {
	t.Helper()
	checks, _ := checkDestination(context.Background(), 0, s)
	for _, c := range checks {
		if strings.HasSuffix(c.Name, ": destination") {
			if !strings.HasSuffix(c.Detail, want) {
				t.Errorf("%s destination check: %q, want it to end in %q", s.Destination.Type, c.Detail, want)
			}
			return
		}
	}
	t.Fatalf("no destination check among %+v", checks)
}
