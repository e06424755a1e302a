package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/sink"
)

func init() {
	sink.Register(sink.Type{
		Name:      config.TypeSQLite,
		Title:     "SQLite",
		Generated: genexpr.SQLite,
		Keys:      []string{"path"},
		Validate: func(v *config.Checker, p string, d *config.Destination) {
			if d.Path == "" {
				v.Add(p+".path", "missing: give the database file, e.g. path: replica.db")
			}
		},
		Open: func(ctx context.Context, d config.Destination) (sink.Sink, error) {
			return Open(ctx, d.Path)
		},
		Doctor:  doctor,
		Example: (*Sink)(nil),
	})
}

// The capabilities of a SQLite destination: all of them.
var (
	_ sink.TableCreator   = (*Sink)(nil)
	_ sink.RangeReplacer  = (*Sink)(nil)
	_ sink.Reader         = (*Sink)(nil)
	_ sink.Alterer        = (*Sink)(nil)
	_ sink.ChangeReporter = (*Sink)(nil)
)

// ReplacesRanges declares that Apply replaces a chunk's range in place.
func (s *Sink) ReplacesRanges() {}

// ReportsChanges declares that Apply notes what tracked chunks change and
// calls BeforeCommit.
func (s *Sink) ReportsChanges() {}

// The doctor reads the checkpoint without creating anything.
const (
	// Whether the table has the resume column comes with the position: a
	// checkpoint table from before tokens were stored has none.
	checkpointSQL = `SELECT "position", coalesce((SELECT 1 FROM pragma_table_info('_tidemark_checkpoint') WHERE "name" = 'resume'), 0)
		FROM "_tidemark_checkpoint" WHERE "stream" = ?`
	resumeSQL     = `SELECT "resume" FROM "_tidemark_checkpoint" WHERE "stream" = ?`
	hasCheckpoint = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_tidemark_checkpoint'`
)

// doctor checks that the file is, or can become, a writable SQLite
// database with room on its disk, and reads the stream's checkpoint.
func doctor(ctx context.Context, in sink.DoctorInput) sink.DoctorReport {
	name := "stream " + in.Stream + ": destination"
	path, key := in.Destination.Path, in.Key
	failed := func(detail, fix string) sink.DoctorReport {
		return sink.DoctorReport{Checks: []check.Check{check.Failed(name, detail, fix)}}
	}
	dir := filepath.Dir(path)
	if c, good := check.WritableDir(name, key+".path", dir); !good {
		// Without its directory the destination holds nothing: to the
		// stream that is a first start.
		_, err := os.Stat(dir)
		return sink.DoctorReport{Checks: []check.Check{c}, Known: errors.Is(err, os.ErrNotExist)}
	}
	disk := check.DiskSpace("stream "+in.Stream+": destination disk", dir)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return sink.DoctorReport{Checks: []check.Check{check.Passed(name, fmt.Sprintf("%s does not exist yet: tidemark creates it (directory %s is writable)", path, dir)), disk}, Known: true}
	case err != nil:
		return failed(check.ErrText(err), "")
	case !info.Mode().IsRegular():
		return failed(path+" is not a regular file", "correct "+key+".path")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return failed(fmt.Sprintf("%s is not writable: %s", path, check.ErrText(err)),
			"make the file writable by the user tidemark runs as (chown, chmod)")
	}
	f.Close()
	r, err := readCheckpoint(ctx, path, in.Stream)
	if err != nil {
		return failed(fmt.Sprintf("%s: %s", path, check.ErrText(err)), "correct "+key+".path: it must be a SQLite database, or a path where one can be created")
	}
	r.Checks = []check.Check{check.Passed(name, fmt.Sprintf("%s is a writable SQLite database; %s", path, in.Position(r.Position, r.Resume))), disk}
	return r
}

// readCheckpoint reads the stream's checkpoint from an existing file.
func readCheckpoint(ctx context.Context, path, stream string) (sink.DoctorReport, error) {
	ctx, cancel := context.WithTimeout(ctx, check.Timeout)
	defer cancel()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return sink.DoctorReport{}, err
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, hasCheckpoint).Scan(&n); err != nil {
		return sink.DoctorReport{}, err
	}
	r := sink.DoctorReport{Known: true}
	if n == 0 {
		return r, nil
	}
	var pos int64
	var hasResume bool
	err = db.QueryRowContext(ctx, checkpointSQL, stream).Scan(&pos, &hasResume)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return sink.DoctorReport{}, err
	}
	r.Position = change.LSN(uint64(pos))
	if hasResume {
		if err := db.QueryRowContext(ctx, resumeSQL, stream).Scan(&r.Resume); err != nil {
			return sink.DoctorReport{}, err
		}
	}
	return r, nil
}
