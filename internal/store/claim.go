package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// One daemon per metadata store: `tidemark run` claims the store before it
// touches any stream, and a second daemon on the same store refuses to start.
// The claim is a lock the operating system or the database releases when its
// holder dies, so a killed daemon never leaves a stale claim behind:
//
//   - SQLite: an exclusive flock on <database file>.lock;
//   - PostgreSQL: a session advisory lock held on a connection of its own
//     (not the pool's, which could close or recycle it).
//
// The daemon_claim row only describes the holder (host, pid, since), so the
// refusal can name it.

// claimKey is the PostgreSQL advisory lock key of the claim ("tidemarc" in
// ASCII; the migration lock uses another).
const claimKey int64 = 0x746964656d617263

// claimWait is how long a PostgreSQL claim is retried before refusing: a
// daemon restarted right after its predecessor died may ask before the
// server has ended the dead session.
const claimWait = 3 * time.Second

// claimCheck is how often a held claim is checked.
const claimCheck = time.Second

// Holder describes the daemon holding a store's claim.
type Holder struct {
	Host  string
	PID   int
	Since time.Time
}

// ClaimedError means another daemon holds the store's claim. Holder is nil
// when the holder has not recorded itself yet.
type ClaimedError struct {
	Store  string // redacted URL
	Holder *Holder
	// Nodes are the live cluster nodes on the store, when they hold it.
	Nodes []string
}

func (e *ClaimedError) Error() string {
	if len(e.Nodes) > 0 {
		return fmt.Sprintf("metadata store %s is in use by the cluster nodes %s: give this daemon a cluster section (or TIDEMARK_NODE) to join them (docs/cluster.md), or give it another metadata store",
			e.Store, strings.Join(e.Nodes, ", "))
	}
	who := "another tidemark daemon (it has not recorded its host and pid yet)"
	if h := e.Holder; h != nil {
		who = fmt.Sprintf("another tidemark daemon: host %s, pid %d, running since %s", h.Host, h.PID, h.Since.Format(time.RFC3339))
	}
	several := "several daemons need a PostgreSQL metadata store, each with a cluster section (docs/cluster.md)"
	if strings.HasPrefix(e.Store, "postgres") {
		several = "to run several daemons on it, give every one a cluster section (docs/cluster.md)"
	}
	return fmt.Sprintf("metadata store %s is in use by %s; only one daemon may run per metadata store: stop that one first (or give this one another metadata store); %s", e.Store, who, several)
}

// Claim is a daemon's hold on its metadata store, from Store.Claim until
// Release. Lost is closed if the hold ends without Release (the PostgreSQL
// connection holding it died, or the SQLite lock file was removed): the
// daemon no longer owns the store and must stop.
type Claim struct {
	lost    chan struct{}
	lostErr error
	stop    context.CancelFunc
	done    chan struct{}
	release func(context.Context) error
	once    sync.Once
}

// Lost is closed when the claim is lost; Err then says why.
func (c *Claim) Lost() <-chan struct{} { return c.lost }

// Err says why the claim was lost; nil while it holds.
func (c *Claim) Err() error {
	select {
	case <-c.lost:
		return c.lostErr
	default:
		return nil
	}
}

// Release gives the claim up. It is safe to call more than once.
func (c *Claim) Release() error {
	var err error
	c.once.Do(func() {
		c.stop()
		<-c.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = c.release(ctx)
	})
	return err
}

// Claim takes the store for this process, or returns a *ClaimedError naming
// the daemon that holds it. Only `tidemark run` claims; commands that read
// or migrate the store (doctor, demo, the CLI's helpers) do not.
func (s *Store) Claim(ctx context.Context) (*Claim, error) {
	var (
		check   func(context.Context) error
		release func(context.Context) error
		err     error
	)
	if s.d.name == dialectSQLite {
		check, release, err = s.lockFile()
	} else {
		check, release, err = s.lockSession(ctx, false)
	}
	if err != nil {
		return nil, err
	}
	h := Holder{Host: hostname(), PID: os.Getpid(), Since: now()}
	if _, err := s.exec(ctx, `INSERT INTO "daemon_claim" ("id", "host", "pid", "since") VALUES (1, ?, ?, ?)
		ON CONFLICT ("id") DO UPDATE SET "host" = EXCLUDED."host", "pid" = EXCLUDED."pid", "since" = EXCLUDED."since"`,
		h.Host, h.PID, s.d.timeArg(h.Since)); err != nil {
		return nil, errors.Join(fmt.Errorf("record the metadata store's claim: %w", err), release(ctx))
	}
	watch, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &Claim{lost: make(chan struct{}), stop: stop, done: make(chan struct{}),
		release: func(ctx context.Context) error {
			// The holder's whole record: in containers every daemon may be pid 1.
			_, err := s.exec(ctx, `DELETE FROM "daemon_claim" WHERE "id" = 1 AND "pid" = ? AND "host" = ? AND "since" = ?`,
				h.PID, h.Host, s.d.timeArg(h.Since))
			return errors.Join(err, release(ctx))
		}}
	go c.watch(watch, check)
	return c, nil
}

// watch checks the claim every claimCheck until stopped, and closes lost
// when a check fails.
func (c *Claim) watch(ctx context.Context, check func(context.Context) error) {
	defer close(c.done)
	t := time.NewTicker(claimCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.lostErr = fmt.Errorf("lost the claim on the metadata store: %w", err)
			close(c.lost)
			return
		}
	}
}

// holder reads the recorded holder; nil when there is none.
func (s *Store) holder(ctx context.Context) (*Holder, error) {
	var h Holder
	var since timeCol
	err := s.queryRow(ctx, `SELECT "host", "pid", "since" FROM "daemon_claim" WHERE "id" = 1`).Scan(&h.Host, &h.PID, &since)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the metadata store's claim: %w", err)
	}
	h.Since = since.T
	return &h, nil
}

// claimed builds the refusal, naming the holder when it can, or the
// cluster's live nodes.
func (s *Store) claimed(ctx context.Context) error {
	h, err := s.holder(ctx)
	if err != nil {
		return err
	}
	e := &ClaimedError{Store: redact(s.url), Holder: h}
	if h == nil && s.d.name == dialectPostgres {
		if nodes, err := s.ClusterNodes(ctx); err == nil {
			for _, n := range nodes {
				if n.Live {
					e.Nodes = append(e.Nodes, n.Name)
				}
			}
		}
	}
	return e
}

// claimedAlone refuses a cluster node on a store a daemon without a
// cluster section holds.
func (s *Store) claimedAlone(ctx context.Context) error {
	who := "a daemon that runs alone (no cluster section)"
	if h, err := s.holder(ctx); err == nil && h != nil {
		who += fmt.Sprintf(": host %s, pid %d, running since %s", h.Host, h.PID, h.Since.Format(time.RFC3339))
	}
	return fmt.Errorf("metadata store %s is in use by %s: stop it, or give it the cluster section too, before starting cluster nodes on the store: %w", redact(s.url), who, ErrHeldAlone)
}

// ErrHeldAlone is JoinStore's refusal: a daemon without a cluster section
// holds the store. Test with errors.Is.
var ErrHeldAlone = errors.New("a daemon runs alone on this store")

// JoinStore holds a PostgreSQL store for a cluster node, from before it
// joins until Release: any number of nodes hold it together, and a daemon
// without a cluster section (which takes it alone, Claim) is refused while
// they do, as they are while it runs. Lost is closed if the hold ends.
func (s *Store) JoinStore(ctx context.Context) (*Claim, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	check, release, err := s.lockSession(ctx, true)
	if err != nil {
		return nil, err
	}
	watch, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &Claim{lost: make(chan struct{}), stop: stop, done: make(chan struct{}), release: release}
	go c.watch(watch, check)
	return c, nil
}

// lockFile takes an exclusive flock on the SQLite file's sibling .lock file.
// check fails when the lock file was removed or replaced: a daemon started
// then would lock a new file and run beside this one.
func (s *Store) lockFile() (check, release func(context.Context) error, err error) {
	// One lock file whatever path, link or relative name reaches the store.
	file, err := filepath.EvalSymlinks(s.file)
	if err != nil {
		return nil, nil, fmt.Errorf("claim the metadata store: %w", err)
	}
	if file, err = filepath.Abs(file); err != nil {
		return nil, nil, fmt.Errorf("claim the metadata store: %w", err)
	}
	path := file + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("claim the metadata store: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, s.claimed(context.Background())
		}
		return nil, nil, fmt.Errorf("claim the metadata store: lock %s: %w", path, err)
	}
	check = func(context.Context) error {
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("lock file %s: %w", path, err)
		}
		if !os.SameFile(held, now) {
			return fmt.Errorf("lock file %s was replaced", path)
		}
		return nil
	}
	release = func(context.Context) error {
		// Closing the file drops the lock. The file stays: removing it would
		// let a daemon that opened it just before lock a file nobody sees.
		return f.Close()
	}
	return check, release, nil
}

// lockSession takes the session advisory lock on a connection of its own,
// retrying for claimWait. check pings that connection: if it died, the
// server released the lock.
func (s *Store) lockSession(ctx context.Context, shared bool) (check, release func(context.Context) error, err error) {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("claim the metadata store: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "tidemark claim"
	lock := `SELECT pg_try_advisory_lock($1)`
	if shared {
		cfg.RuntimeParams["application_name"] = "tidemark node"
		lock = `SELECT pg_try_advisory_lock_shared($1)`
	}
	// The server releases the lock when it notices the session is gone: for
	// a holder whose host vanished (no FIN sent) that is when keepalives
	// fail, about a minute with these rather than the system's two hours.
	for k, v := range map[string]string{"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"} {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("claim the metadata store: connect: %w", err)
	}
	deadline := time.Now().Add(claimWait)
	for {
		var got bool
		if err := conn.QueryRow(ctx, lock, claimKey).Scan(&got); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, nil, fmt.Errorf("claim the metadata store: %w", err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			conn.Close(context.WithoutCancel(ctx))
			if shared {
				return nil, nil, s.claimedAlone(ctx)
			}
			return nil, nil, s.claimed(ctx)
		}
		select {
		case <-ctx.Done():
			conn.Close(context.WithoutCancel(ctx))
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	check = func(ctx context.Context) error {
		if err := conn.Ping(ctx); err != nil {
			return fmt.Errorf("the connection holding it failed: %w", err)
		}
		return nil
	}
	release = func(ctx context.Context) error {
		// Ending the session releases the lock.
		return conn.Close(ctx)
	}
	return check, release, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
