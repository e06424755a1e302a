package files

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
)

// TypeFiles is the destination type's name in a stream's config.
const TypeFiles = "files"

// The smallest and largest max_file_bytes accepted.
const (
	minFileBytes = 64 << 10
	maxFileBytes = 4 << 30
)

func init() {
	sink.Register(sink.Type{
		Name:  TypeFiles,
		Title: "files",
		Keys:  []string{"path", "format", "max_file_bytes"},
		Validate: func(v *config.Checker, p string, d *config.Destination) {
			if d.Path == "" {
				v.Add(p+".path", "missing: give the directory the files go to, e.g. path: /data/tidemark-files")
			}
			if d.Format != "" && d.Format != FormatJSONL && d.Format != FormatParquet {
				v.Add(p+".format", "%s", fmt.Sprintf("%q is not a format the files destination writes: use jsonl (the default) or parquet", d.Format))
			}
			if d.MaxFileBytes != 0 && (d.MaxFileBytes < minFileBytes || d.MaxFileBytes > maxFileBytes) {
				v.Add(p+".max_file_bytes", "%s", fmt.Sprintf("%d is out of range: give a size from %d (64 KiB) to %d (4 GiB)", d.MaxFileBytes, minFileBytes, maxFileBytes))
			}
		},
		Open: func(_ context.Context, d config.Destination) (sink.Sink, error) {
			return OpenFormat(d.Path, cmp.Or(d.Format, FormatJSONL), d.MaxFileBytes)
		},
		Doctor:  doctor,
		Example: (*Sink)(nil),
		Where: func(d config.Destination, _ string) string {
			return d.Path + ", " + cmp.Or(d.Format, FormatJSONL)
		},
	})
}

// A files destination appends events, and is read back by replaying them
// (reader.go).
var (
	_ sink.EventWriter = (*Sink)(nil)
	_ sink.Reader      = (*Sink)(nil)
)

// doctor checks that the directory is, or can become, writable with room
// on its disk, and reads the stream's checkpoint.
func doctor(_ context.Context, in sink.DoctorInput) sink.DoctorReport {
	name := "stream " + in.Stream + ": destination"
	dir := in.Destination.Path
	target := dir
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		target = filepath.Dir(dir) // created at start
	}
	if c, good := check.WritableDir(name, in.Key+".path", target); !good {
		return sink.DoctorReport{Checks: []check.Check{c}}
	}
	disk := check.DiskSpace("stream "+in.Stream+": destination disk", target)
	c, err := readCheckpoint(filepath.Join(dir, escapeName(in.Stream)))
	if err != nil {
		return sink.DoctorReport{Checks: []check.Check{check.Failed(name, check.ErrText(err), "")}}
	}
	detail := fmt.Sprintf("%s is a writable directory for %s event files; %s", dir, cmp.Or(in.Destination.Format, FormatJSONL), in.Position(change.LSN(c.Position), c.Resume))
	return sink.DoctorReport{Checks: []check.Check{check.Passed(name, detail), disk}, Known: true,
		Position: change.LSN(c.Position), Resume: c.Resume}
}
