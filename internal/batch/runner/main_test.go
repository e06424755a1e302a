package runner

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/pgserver"
)

// server is the package's throwaway PostgreSQL; each test makes its own
// database on it.
var server *pgserver.Server

func TestMain(m *testing.M) {
	// The test binary is the watchdog of the tests that start one.
	ServeWatchdog()
	if script := os.Getenv(daemonScriptEnv); script != "" {
		os.Exit(runAsDaemon(script))
	}
	// Shortened before any test runs, so no test races on it.
	GracePeriod = 300 * time.Millisecond
	code := pgserver.RunTests(m, &server)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
