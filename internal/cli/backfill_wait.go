package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// defaultReconnect is how long --wait and backfill wait try to reach a
// daemon that stopped answering.
const defaultReconnect = 60 * time.Second

// addReconnectFlag gives c the --reconnect flag.
func (g *globals) addReconnectFlag(c *cobra.Command) {
	c.Flags().DurationVar(&g.reconnect, "reconnect", defaultReconnect,
		"while following, how long to try to reach a daemon that stopped answering (a restarted daemon resumes the backfills); 0: give up at once")
}

func backfillWaitCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "wait STREAM OBJECT...",
		Short: "Follow the latest backfill of objects, started elsewhere, until each has ended",
		Long: `Follow the latest backfill of each object, started elsewhere (another
terminal, the console, the API, a schedule), until each has ended, as
"backfill initiate --wait" does: a line per object, then the verify that
ended each backfill. A backfill that has already ended is shown as it ended.

Exits 0 when every backfill completed, 1 when one failed or was stopped or
the daemon stayed unreachable for --reconnect, 3 when an ending verify found
differences, 4 when an object has no backfill to follow.`,
		Args: usageArgs(2, -1),
		RunE: func(c *cobra.Command, args []string) error {
			// Subscribed first, so that no event after the reads is missed.
			es, err := g.client().subscribe(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer es.Close()
			recs, err := g.latestBackfills(c.Context(), args[0], args[1:])
			if err != nil {
				return err
			}
			return g.followBackfills(c.Context(), es, recs)
		},
	}
	g.addReconnectFlag(c)
	return c
}

// latestBackfills is the latest backfill of each object of a stream; an
// object without one is refused (exit 4).
func (g *globals) latestBackfills(ctx context.Context, streamName string, objects []string) ([]store.Backfill, error) {
	var recs []store.Backfill
	var none []string
	for _, o := range objects {
		q := url.Values{"stream": {streamName}, "object": {o}, "limit": {"1"}}
		var out []store.Backfill
		if err := g.client().do(ctx, "GET", "/api/v1/backfills?"+q.Encode(), nil, &out); err != nil {
			return nil, err
		}
		if len(out) == 0 {
			none = append(none, o)
			continue
		}
		recs = append(recs, out[0])
	}
	if len(none) > 0 {
		return nil, &exitError{code: ExitRefused, err: fmt.Errorf("no backfill of %s in stream %s to wait for: start one with tidemark backfill initiate %s %s",
			strings.Join(none, ", "), streamName, streamName, strings.Join(none, " "))}
	}
	return recs, nil
}

// resubscribe replaces an event stream that closed: it subscribes again
// to the runs' stream, every half second for up to g.reconnect, then reads
// every open run's record anew. Past that it gives up, saying so.
func (f *backfillFollower) resubscribe(ctx context.Context, old *eventStream) (*eventStream, error) {
	old.Close()
	what := fmt.Sprintf("the %d backfill(s) followed", f.open())
	if f.g.reconnect <= 0 {
		return nil, old.streamEnded(what)
	}
	streamName := f.runs[f.order[0]].rec.Stream
	fmt.Fprintf(f.g.stderr, "tidemark: the daemon at %s stopped answering; trying again for up to %s (--reconnect)\n", f.g.addr, f.g.reconnect)
	deadline := time.Now().Add(f.g.reconnect)
	for {
		es, err := f.g.client().subscribe(ctx, streamName)
		if err == nil {
			for _, id := range f.order {
				if f.runs[id].ended() {
					continue
				}
				var b store.Backfill
				if err := f.g.client().do(ctx, "GET", fmt.Sprintf("/api/v1/backfills/%d", id), nil, &b); err != nil {
					es.Close()
					return nil, err
				}
				f.apply(b)
			}
			return es, nil
		}
		if !isUnreachable(err) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon at %s has been unreachable for %s (--reconnect), before %s ended: start it again (the backfills resume) and follow them with tidemark backfill wait %s %s",
				f.g.addr, f.g.reconnect, what, streamName, strings.Join(f.objects(), " "))
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// objects names the objects of the runs followed, in order.
func (f *backfillFollower) objects() []string {
	var out []string
	for _, id := range f.order {
		b := f.runs[id].rec
		out = append(out, config.FormatTable(tableID(b)))
	}
	return out
}

// verifyDiffer is the status of an ending verify that found differences
// (stream.VerifyDiffer).
const verifyDiffer = "differ"

// verifyDetail is a run's ending verify as its progress line shows it.
func verifyDetail(v *store.VerifySummary) string {
	switch {
	case v == nil || v.Status == "off":
		return ""
	case v.Status == verifyRunning:
		return "verifying"
	}
	return "verify " + verifyText(v)
}

// printVerifies prints the verify that ended each completed run.
func (f *backfillFollower) printVerifies() {
	for _, id := range f.order {
		b := f.runs[id].rec
		v := b.Verify
		if v == nil || v.Status == "off" || v.Status == verifyRunning {
			continue
		}
		line := fmt.Sprintf("backfill %d of %s.%s: verify %s, %s source rows, %s destination rows, %s key ranges", b.ID, b.Schema, b.Table, v.Status,
			thousands(v.SourceRows), thousands(v.DestRows), thousands(int64(v.Ranges)))
		switch v.Status {
		case verifyDiffer:
			line = verifySentence(b)
		case "error":
			line += ": " + v.Error
		}
		fmt.Fprintln(f.g.stdout, line)
	}
}

// verifySentence says that a run's ending verify found differences, and
// what to run.
func verifySentence(b store.Backfill) string {
	return fmt.Sprintf("the verify after backfill %d of %s.%s found %s of %s key ranges differing: run tidemark verify --repair %s %s",
		b.ID, b.Schema, b.Table, thousands(int64(b.Verify.DifferingRanges)), thousands(int64(b.Verify.Ranges)), b.Stream, config.FormatTable(tableID(b)))
}

// tableID is the object a run backfills.
func tableID(b store.Backfill) change.TableID {
	return change.TableID{Schema: b.Schema, Name: b.Table}
}
