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

// verifiedKey is run (d): run (a) again with the stream's verify on,
// timed until the verify's result is recorded.
const verifiedKey = "tidemark-verified"

// runVerified times run (d): t backfilled into the emptied destination
// table by a stream of its own (its own slot) whose backfills end with
// their verify, as by default, until the verify's match is recorded.
func (bn *bench) runVerified(dst string) error {
	if err := exec(bn.ctx, dst, "TRUNCATE t", "VACUUM (ANALYZE) t"); err != nil {
		return fmt.Errorf("empty t for the verified run: %w", err)
	}
	spec := streamSpec{name: streamName + "_verified", srcType: "postgres", srcDSN: bn.sv.src.DSN(srcDB), schema: "public",
		destination: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dst), verify: true}
	tm, err := spec.start(bn.ctx, bn.b.TempDir(), bn.p)
	if err != nil {
		return err
	}
	r := result{key: verifiedKey, name: "tidemark (d) empty destination, verified", rows: bn.big.rows, bytes: bn.big.bytes}
	_, err = bn.measure(r, func() (time.Duration, error) {
		total, loaded, rec, err := tm.backfillVerified(bn.ctx, "t")
		bn.verifyTail = total - loaded
		if err == nil && rec.Verify.SourceRows != bn.big.rows {
			err = fmt.Errorf("the verify of t compared %d source rows, want %d", rec.Verify.SourceRows, bn.big.rows)
		}
		return total, err
	})
	if serr := tm.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stop the verified stream: %w", serr)
	}
	return err
}

// verifyShare is what the verify that ends a backfill adds to it: run
// (d)'s time over run (a)'s, less one.
func (bn *bench) verifyShare() (float64, bool) {
	v, ok1 := findResult(bn.results, verifiedKey)
	b, ok2 := findResult(bn.results, "tidemark-empty")
	if !ok1 || !ok2 {
		return 0, false
	}
	return v.elapsed.Seconds()/b.elapsed.Seconds() - 1, true
}

// printVerifyShare writes the verify's share of a backfill's time.
func (bn *bench) printVerifyShare(out io.Writer) {
	if share, ok := bn.verifyShare(); ok {
		fmt.Fprintf(out, "the verify that ends a backfill adds %.0f%% to the backfill into the empty destination (target 25%%): (d) verified %.1f s after its rows were loaded\n",
			100*share, bn.verifyTail.Seconds())
	}
}
