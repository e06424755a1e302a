package pg

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// A DSN pgx refuses must come back as an error that neither panics nor
// repeats the DSN's password, whether pgx's error wraps a cause or not (an
// invalid port wraps nothing).
func TestBadDSNIsAnErrorWithoutThePassword(t *testing.T) {
	ctx := context.Background()
	for dsn, want := range map[string]string{
		"postgres://u:s3cret@h:99999/db":           "invalid DSN (invalid port)",
		"postgres://u:s3cret@h:0/db":               "invalid DSN (invalid port)",
		"postgres://u:s3cret@h/db?port=99999":      "invalid DSN (invalid port)",
		"postgres://u:s3cret@h:5432,h2:65536/db":   "invalid DSN (invalid port)",
		"postgres://u:s3cret@[::1/db":              "invalid DSN (end of string",
		"postgres://u:s3cret@h/db?sslmode=bogus":   "invalid DSN (",
		"postgres://u:s3cret@h/db?connect_timeout": "invalid DSN (",
	} {
		var errs []error
		_, err := Open(ctx, Config{DSN: dsn}, slog.New(slog.DiscardHandler))
		errs = append(errs, err)
		_, err = ConnectForCatalog(ctx, dsn, ReadTimeouts{})
		errs = append(errs, err)
		_, err = (&Source{cfg: Config{DSN: dsn}}).replicationConn(ctx)
		errs = append(errs, err)
		for _, err := range errs {
			switch {
			case err == nil:
				t.Errorf("%s: no error", dsn)
			case !strings.Contains(err.Error(), want):
				t.Errorf("%s: error %q does not say %q", dsn, err, want)
			case strings.Contains(err.Error(), "s3cret"):
				t.Errorf("%s: error %q shows the password", dsn, err)
			}
		}
	}
	if got := redactErr(nil); got != "invalid DSN" {
		t.Errorf("redactErr(nil) = %q", got)
	}
}
