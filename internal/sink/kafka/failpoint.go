package kafka

import (
	"os"
	"strconv"
	"syscall"
)

// killBeforeCommitEnv is a test-only failpoint. Set to N, it makes the
// process SIGKILL itself after the Nth transaction's records were sent
// and before that transaction commits: records are in the log, the
// checkpoint is not, and a read_committed consumer must never see them.
// Unset (as always outside the crash tests) it does nothing.
const killBeforeCommitEnv = "TIDEMARK_TEST_KAFKA_KILL_BEFORE_COMMIT"

func killBeforeCommit() func() error {
	n, _ := strconv.Atoi(os.Getenv(killBeforeCommitEnv))
	if n <= 0 {
		return nil
	}
	sent := 0
	return func() error {
		if sent++; sent == n {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process
		}
		return nil
	}
}
