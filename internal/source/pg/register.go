package pg

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/source"
)

func init() {
	source.Register(source.Type{
		Name: config.TypePostgres,
		Config: config.SourceKind{
			Keys: []string{"publication", "publication_mode", "slot", "status_interval"},
			Validate: func(v *config.Checker, p string, s *config.Stream) {
				v.PostgresDSN(p+".dsn", s.Source.DSN, "the source database")
				if s.Source.PublicationMode != "" { // left out: managed
					v.OneOf(p+".publication_mode", s.Source.PublicationMode, config.PublicationManaged, config.PublicationExisting)
				}
			},
		},
		Open: func(ctx context.Context, cfg config.Source, opts source.Options, log *slog.Logger) (source.Source, error) {
			return Open(ctx, Config{DSN: cfg.DSN, Publication: cfg.Publication, Slot: cfg.Slot,
				PublicationExisting: cfg.PublicationMode == config.PublicationExisting,
				StatusInterval:      cfg.StatusInterval, ProbeInterval: opts.ProbeInterval, Timeouts: timeouts(cfg),
				TakeOver: opts.TakeOver}, log)
		},
		OpenEstimator: func(ctx context.Context, cfg config.Source) (source.Estimator, error) {
			return ConnectForCatalog(ctx, cfg.DSN, timeouts(cfg))
		},
		FormatPosition: func(pos change.LSN) string { return pos.String() },
		Events:         source.Events{Connector: "postgresql", SchemaField: true, Fields: eventFields, Database: databaseOf},
		Doctor:         doctor,
	})
}

// timeouts are a source configuration's read timeouts.
func timeouts(cfg config.Source) ReadTimeouts {
	rt := cfg.ReadTimeouts
	return ReadTimeouts{Statement: rt.Statement, Lock: rt.Lock, IdleInTransaction: rt.IdleInTransaction}
}

// Source fills the contract.
var _ source.Source = (*Source)(nil)

// eventFields are the source block's PostgreSQL fields, as Debezium's
// connector writes them: the transaction id and the change's LSN as a
// number.
func eventFields(o event.Origin) []event.Field {
	return []event.Field{{Name: "txId", Value: o.Xid}, {Name: "lsn", Value: uint64(o.Position)}}
}

// databaseOf is the database a DSN connects to, "" when it cannot be read.
func databaseOf(dsn string) string {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return c.Database
}
