package mysql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/source"
)

// streamHeartbeat is how often an idle server tells a stream where its
// binlog ends: a backfill chunk waits for the stream to pass the chunk's
// snapshot position, so this bounds a chunk's wait on a quiet server.
const streamHeartbeat = 250 * time.Millisecond

func init() {
	source.Register(source.Type{
		Name: config.TypeMySQL,
		Config: config.SourceKind{
			Keys:       []string{"server_id"},
			OthersNote: "a mysql source reads the binlog, which carries every table",
			Defaults: func(s *config.Stream) {
				if s.Source.ServerID == 0 {
					s.Source.ServerID = DerivedServerID(s.Name)
				}
			},
			Validate: func(v *config.Checker, p string, s *config.Stream) { checkDSN(v, p+".dsn", s.Source.DSN) },
		},
		Open: func(ctx context.Context, cfg config.Source, _ source.Options, log *slog.Logger) (source.Source, error) {
			src, err := Open(ctx, Config{DSN: cfg.DSN, ServerID: cfg.ServerID, Heartbeat: streamHeartbeat, Logger: log})
			if err != nil {
				return nil, err
			}
			return &streamSource{src: src}, nil
		},
		OpenEstimator: func(ctx context.Context, cfg config.Source) (source.Estimator, error) {
			src, err := Open(ctx, Config{DSN: cfg.DSN})
			if err != nil {
				return nil, err
			}
			return estimator{src}, nil
		},
		FormatPosition: formatPosition,
		Events:         source.Events{Connector: "mysql", Fields: eventFields},
		FormatResume:   formatResume,
		Doctor:         doctor,
	})
}

// doctor checks a stream's MySQL or MariaDB source: the connection, the
// binlog settings and grants (every unmet one with its fix), the binlog's
// retention, and the included tables' keys.
func doctor(ctx context.Context, in source.DoctorInput) []check.Check {
	name := func(what string) string { return "stream " + in.Stream.Name + ": " + what }
	ctx, cancel := context.WithTimeout(ctx, 3*check.Timeout)
	defer cancel()
	src, err := Open(ctx, Config{DSN: in.Stream.Source.DSN})
	if err != nil {
		return []check.Check{check.Failed(name("source"), check.ErrText(err)+" (the source's other checks were skipped)",
			"check the user, password, host, port and database in "+in.Key+".source.dsn, and that the server listens there")}
	}
	defer src.Close()
	pre, err := src.Check(ctx)
	if err != nil {
		return []check.Check{check.Failed(name("source"), "connected, but cannot read the server's settings: "+check.ErrText(err), "")}
	}
	flavor := "MySQL"
	if pre.MariaDB {
		flavor = "MariaDB"
	}
	out := []check.Check{check.Passed(name("source"), fmt.Sprintf("connected to %s (%s %s)", src.dsn, flavor, pre.Version))}
	if len(pre.Problems) == 0 {
		out = append(out, check.Passed(name("binlog"), "row-based binlog with full row images and metadata; the user has REPLICATION SLAVE, REPLICATION CLIENT and SELECT"))
	}
	for _, p := range pre.Problems {
		out = append(out, check.Failed(name(p.Check), p.Found, p.Fix))
	}
	out = append(out, check.Passed(name("binlog retention"), pre.RetentionText()))
	return append(out, tableKeys(ctx, src, in, name("table keys")))
}

// tableKeys describes the included tables as the stream will: a table
// without a usable key is left out, its object failing.
func tableKeys(ctx context.Context, src *Source, in source.DoctorInput, name string) check.Check {
	ids, err := src.ListTables(ctx)
	if err != nil {
		return check.Failed(name, "cannot list the tables: "+check.ErrText(err), "")
	}
	var included, keyless, fixes, broken []string
	for _, id := range ids {
		if !in.Stream.Includes(id) {
			continue
		}
		included = append(included, id.String())
		_, err := src.Describe(ctx, id, in.Stream.Keys[id])
		switch {
		case errors.Is(err, source.ErrNoKey):
			keyless, fixes = append(keyless, id.String()), append(fixes, check.ErrText(err))
		case err != nil:
			broken = append(broken, check.ErrText(err))
		}
	}
	switch {
	case len(included) == 0:
		return check.Failed(name, fmt.Sprintf("no table of database %s matches %s.include", src.Database(), in.Key),
			"list the tables as "+src.Database()+".table or "+src.Database()+".*")
	case len(broken) > 0:
		return check.Failed(name, fmt.Sprintf("%d %s cannot be described: %s", len(broken),
			check.Plural(len(broken), "table", "tables"), check.List(broken, 3)), "")
	case len(keyless) > 0:
		return check.Warned(name, fmt.Sprintf("%d of %d tables have no usable row key and will not be replicated (their objects fail): %s",
			len(keyless), len(included), check.List(keyless, 10)), strings.Join(fixes, "\n"))
	}
	return check.Passed(name, fmt.Sprintf("all %d included %s a usable row key", len(included),
		check.Plural(len(included), "table has", "tables have")))
}

// eventFields are the source block's MySQL fields: the binlog file (its
// number, as positions carry it), the offset, and the GTID state after the
// transaction (docs/events.md).
func eventFields(o event.Origin) []event.Field {
	var gtid any
	if o.Resume != "" {
		gtid = o.Resume
	}
	return []event.Field{{Name: "gtid", Value: gtid}, {Name: "file", Value: strings.TrimPrefix(FileName("", o.Position), ".")},
		{Name: "pos", Value: uint32(o.Position)}}
}
