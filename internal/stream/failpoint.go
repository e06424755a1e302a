package stream

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/tidemark/tidemark/internal/change"
)

// killAfterChunkCommitsEnv is a test-only failpoint. Set to N, it makes the
// process SIGKILL itself right after the destination committed its Nth
// backfill chunk, before the metadata store records it, which is the moment
// a crash used to lose rows_written. Unset (as always outside the daemon's
// crash tests) it does nothing.
const killAfterChunkCommitsEnv = "TIDEMARK_TEST_KILL_AFTER_SINK_COMMIT"

var (
	killAfterChunkCommits, _ = strconv.ParseInt(os.Getenv(killAfterChunkCommitsEnv), 10, 64)
	chunkCommits             atomic.Int64
)

// chunkCommitted counts a committed batch that carried chunks, and kills the
// process when the failpoint says so.
func chunkCommitted(b *outBatch) {
	if killAfterChunkCommits <= 0 || len(b.chunks) == 0 {
		return
	}
	if chunkCommits.Add(int64(len(b.chunks))) >= killAfterChunkCommits {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	}
}

// chunkStage is a point on a backfill chunk's way a test can hold it at.
type chunkStage int

const (
	// chunkRegistered: its window is open; not read yet. A sum read ahead
	// (loadsum.go) registers before the chunk before it is submitted: a
	// hook that blocks there holds that submit too.
	chunkRegistered chunkStage = iota
	chunkRead                  // read; not merged yet
	trailVerified              // a range its run's verify trails is compared (verifytrail.go)
)

// chunkHook is a test-only hold: the worker calls it at each stage of each
// chunk and waits for it to return. Nil (as always outside tests) it does
// nothing.
type chunkHook func(ctx context.Context, id change.TableID, at chunkStage)

// atChunkStage calls the run's stream's chunk hook, if a test set one.
func (m *backfills) atChunkStage(ctx context.Context, id change.TableID, at chunkStage) {
	if h := m.hook.Load(); h != nil {
		(*h)(ctx, id, at)
	}
}

// trailFault is a test-only fault: a trailing verify (verifytrail.go)
// calls it after each range it compared, with how many it has; an error
// fails the trail there, as a source that could not be read would.
type trailFault func(id change.TableID, compared int) error

// trailCompared tells the test hooks of a range the trail of table id
// compared, compared in all so far; an error fails the trail.
func (m *backfills) trailCompared(ctx context.Context, id change.TableID, compared int) error {
	m.atChunkStage(ctx, id, trailVerified)
	if f := m.trailFault.Load(); f != nil {
		return (*f)(id, compared)
	}
	return nil
}
