package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// --wait waits for the verify that ends a completed backfill, shows it,
// and exits 3 when it found differences.
func TestFollowWaitsForTheEndingVerify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	b := store.Backfill{ID: 1, Stream: "s", Schema: "public", Table: "t", Status: store.StatusActive, RowsRead: 10}
	loaded := b
	loaded.Status, loaded.RowsRead, loaded.LoadedAt = store.StatusCompleted, 30, &now
	verifying := loaded
	verifying.Verify = &store.VerifySummary{Status: verifyRunning}
	differs := loaded
	differs.Verify = &store.VerifySummary{Status: verifyDiffer, SourceRows: 30, DestRows: 29, Ranges: 6, DifferingRanges: 1, FinishedAt: &now}
	// The events end with the verify running; the record read after 2
	// seconds without news has its result.
	g := fakeDaemon(t, []string{streamEvent(t, loaded), streamEvent(t, verifying)}, map[string]any{"/api/v1/backfills/1": differs})
	var out bytes.Buffer
	g.stdout = &out
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	es, err := g.client().subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	err = g.followBackfills(ctx, es, []store.Backfill{b})
	var ee *exitError
	want := "the verify after backfill 1 of public.t found 1 of 6 key ranges differing: run tidemark verify --repair s public.t"
	if !errors.As(err, &ee) || ee.code != ExitMismatch || err.Error() != want {
		t.Errorf("error %v, want exit 3 with %q", err, want)
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks the verify:\n%s", &out)
	}
}
