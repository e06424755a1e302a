package lineage

import (
	"os"
	"syscall"
)

// killEnv is a test-only failpoint: set to a point's name, it makes the
// process SIGKILL itself there. "after-hand": a backfill's changes were
// handed to proposals, nothing submitted yet. "after-submit": a batch
// backfill was submitted, its proposal not yet marked. Unset (as always
// outside the daemon's crash tests) it does nothing.
const killEnv = "TIDEMARK_TEST_LINEAGE_KILL"

var killAt = os.Getenv(killEnv)

func failpoint(at string) {
	if killAt != at {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal ends the process
}
