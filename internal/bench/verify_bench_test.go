package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// verifyKey is the result of the verify of public.t; its time is held
// against the backfill into the empty destination (tidemark-empty).
const verifyKey = "tidemark-verify"

// runVerify times tidemark's verify of public.t, the pass that ends every
// backfill unless backfill.verify is off, over the whole table at the
// stream's chunk size, and checks that it matches.
func (bn *bench) runVerify(tm *tidemark) error {
	r := result{key: verifyKey, name: "tidemark verify of t", rows: bn.big.rows, bytes: bn.big.bytes}
	_, err := bn.measure(r, func() (time.Duration, error) {
		start := time.Now()
		checks, err := tm.s.Verify(bn.ctx, []change.TableID{{Schema: "public", Name: "t"}}, 0)
		elapsed := time.Since(start)
		if err != nil {
			return elapsed, err
		}
		if c := checks[0]; !c.Match || c.Error != "" || c.SourceRows != int(bn.big.rows) {
			return elapsed, fmt.Errorf("verify of t: match %v, %d source rows of %d, error %q", c.Match, c.SourceRows, bn.big.rows, c.Error)
		}
		return elapsed, nil
	})
	return err
}

// verifyShare is the verify's time over the backfill's into the empty
// destination: what the ending verify adds to a backfill.
func (bn *bench) verifyShare() (float64, bool) {
	v, ok1 := findResult(bn.results, verifyKey)
	b, ok2 := findResult(bn.results, "tidemark-empty")
	if !ok1 || !ok2 {
		return 0, false
	}
	return v.elapsed.Seconds() / b.elapsed.Seconds(), true
}

// printVerifyShare writes the verify's share of a backfill's time.
func (bn *bench) printVerifyShare(out io.Writer) {
	if share, ok := bn.verifyShare(); ok {
		fmt.Fprintf(out, "the verify that ends a backfill adds %.0f%% to the backfill into the empty destination (target 25%%)\n", 100*share)
	}
}
