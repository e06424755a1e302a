package files

import (
	"os"
	"strconv"
	"syscall"
)

// killBetweenRenamesEnv is a test-only failpoint. Set to N, it makes the
// process SIGKILL itself right after the first file of the Nth batch that
// writes more than one file was renamed into place, before the batch's
// other files and its checkpoint: the moment a replay must neither lose
// nor duplicate. Unset (as always outside the crash tests) it does
// nothing.
const killBetweenRenamesEnv = "TIDEMARK_TEST_FILES_KILL_BETWEEN_RENAMES"

func killBetweenRenames() func(renamed, total int) error {
	n, _ := strconv.Atoi(os.Getenv(killBetweenRenamesEnv))
	if n <= 0 {
		return nil
	}
	batches := 0
	return func(renamed, total int) error {
		if total < 2 || renamed != 1 {
			return nil
		}
		if batches++; batches == n {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process
		}
		return nil
	}
}
