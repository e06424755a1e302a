package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MaxNotifyPayload is PostgreSQL's limit on a NOTIFY payload, less a
// margin: what crosses nodes is small, and the rest is read from the store.
const MaxNotifyPayload = 7900

// Notify sends payload on channel to every session listening on the
// PostgreSQL store (docs/cluster.md); SQLite has no other listener.
func (s *Store) Notify(ctx context.Context, channel, payload string) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	if len(payload) > MaxNotifyPayload {
		return fmt.Errorf("notify %s: payload of %d bytes is over %d", channel, len(payload), MaxNotifyPayload)
	}
	if _, err := s.exec(ctx, `SELECT pg_notify(?, ?)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", channel, err)
	}
	return nil
}

// Listen calls f with each payload sent on channel, in order, until ctx
// ends or the connection fails, over a connection of its own. ready, if
// not nil, is called once the listen is in place.
func (s *Store) Listen(ctx context.Context, channel string, ready func(), f func(payload string)) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	cfg.RuntimeParams["application_name"] = "tidemark events"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("listen on %s: connect: %w", channel, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen on %s: %w", channel, err)
		}
		f(n.Payload)
	}
}
