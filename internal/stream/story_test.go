package stream

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/testutil"
)

// TestBackfillStoryLogged: the daemon log tells a backfill's story at info
// level — initiated (by whom, with which options), started, completed
// (rows, seconds), verified — with the backfill's id on every line.
func TestBackfillStoryLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{yaml: "backfill: {mode: manual}", setup: `
		CREATE TABLE orders (id int PRIMARY KEY, v text); INSERT INTO orders SELECT g, 'v' FROM generate_series(1, 20) g;`})
	var logs testutil.LockedBuffer
	e.startLogged(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	recs, err := e.s.Initiate(e.ctx, []change.TableID{{Schema: "public", Name: "orders"}}, store.StartedByCLI, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitVerified(e.waitLoaded("orders").BackfillID)
	id := "backfill_id=" + strconv.FormatInt(recs[0].ID, 10)
	for _, want := range [][]string{
		{`msg="backfill initiated"`, id, "object=public.orders", "started_by=cli"},
		{`msg="backfill started"`, id, "object=public.orders"},
		{`msg="backfill completed"`, id, "rows_read=20", "seconds="},
		{`msg="backfill verified"`, id, "verify=match", "source_rows=20"},
	} {
		if !hasLine(logs.String(), want) {
			t.Errorf("no log line with %q in:\n%s", want, logs.String())
		}
	}
}

// hasLine reports whether one line of logs holds every part.
func hasLine(logs string, parts []string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
