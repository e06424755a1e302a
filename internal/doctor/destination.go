package doctor

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", for sql tasks' connections

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// The file checks, under the names the checks here use.
var (
	diskSpace   = check.DiskSpace
	diskCheck   = check.DiskCheck
	writableDir = check.WritableDir
)

// checkDestination checks streams[i]'s destination through its type's
// registered checks, and reads the position it committed for the stream.
func checkDestination(ctx context.Context, i int, s *config.Stream) ([]Check, checkpoint) {
	key := fmt.Sprintf("streams[%d].destination", i)
	typ, err := sink.Lookup(s.Destination.Type)
	if err != nil {
		return []Check{fail("stream "+s.Name+": destination", fmt.Sprintf("destination type %q is not supported", s.Destination.Type),
			"set "+key+".type to a supported type")}, checkpoint{}
	}
	// The checkpoint is shown in the source's notation.
	at := func(pos change.LSN, resume string) string { return positionText(s.Source.Type, pos, resume) }
	r := typ.Doctor(ctx, sink.DoctorInput{Stream: s.Name, Destination: s.Destination, Key: key, Position: at})
	return r.Checks, checkpoint{known: r.Known, position: r.Position, resume: r.Resume}
}

// positionText tells where a stream's checkpoint is, in the notation of
// its source's type, with its resume token (a MySQL GTID state) if any.
func positionText(sourceType string, pos change.LSN, resume string) string {
	if pos == 0 {
		return "no checkpoint of the stream yet"
	}
	return "the stream's checkpoint is at " + source.FormatCheckpoint(sourceType, pos, resume)
}

// openSQLite opens an existing SQLite file for reading.
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
