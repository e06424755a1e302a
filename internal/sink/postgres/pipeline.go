package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxPipeline bounds how many statements wait for one round trip, so huge
// batches do not buffer without limit.
const maxPipeline = 1000

// pipeline queues the statements of a batch's transaction and sends them
// in one round trip. Its first round trip opens the transaction (begin):
// anything sent on the connection otherwise, while the batch is applied,
// is sent after a flush, or it would run outside the transaction.
type pipeline struct {
	s     *Sink
	batch pgconn.Batch
	steps []step
}

// step is what the pipeline keeps of a queued statement.
type step struct {
	what string                  // what it does, for errors
	done func(pgconn.CommandTag) // optional, called with its command tag
	rows func([][]byte)          // optional, called with each row it returns (text)
	fail func(error) error       // optional, makes its error the batch's
}

func (p *pipeline) queue(ctx context.Context, sql string, args [][]byte, what string) error {
	return p.queueStep(ctx, sql, args, step{what: what})
}

// queueTagged queues a statement; done, if not nil, receives its command tag.
func (p *pipeline) queueTagged(ctx context.Context, sql string, args [][]byte, what string, done func(pgconn.CommandTag)) error {
	return p.queueStep(ctx, sql, args, step{what: what, done: done})
}

// queueRows queues a statement; done and rows, when not nil, receive its
// command tag and each row it returns, in text.
func (p *pipeline) queueRows(ctx context.Context, sql string, args [][]byte, what string, done func(pgconn.CommandTag), rows func([][]byte)) error {
	return p.queueStep(ctx, sql, args, step{what: what, done: done, rows: rows})
}

// queueStep queues a prepared statement with what the pipeline keeps of it.
func (p *pipeline) queueStep(ctx context.Context, sql string, args [][]byte, st step) error {
	return p.queueFormatted(ctx, sql, args, nil, nil, st) // all parameters and results in text
}

// queueFormatted queues a prepared statement whose parameters and results
// are in the formats given, by position (nil: all text; see
// pgbinary.ResultFormats).
func (p *pipeline) queueFormatted(ctx context.Context, sql string, args [][]byte, params, results []int16, st step) error {
	return p.queuePrepared(ctx, sql, nil, args, params, results, st)
}

// queueTyped queues a prepared statement whose parameters have the types
// oids (0: the server infers it; nil: all) and the formats params.
func (p *pipeline) queueTyped(ctx context.Context, sql string, args [][]byte, oids []uint32, params []int16, st step) error {
	return p.queuePrepared(ctx, sql, oids, args, params, nil, st)
}

func (p *pipeline) queuePrepared(ctx context.Context, sql string, oids []uint32, args [][]byte, params, results []int16, st step) error {
	name, err := p.s.prepareTyped(ctx, sql, oids)
	if err != nil {
		return fmt.Errorf("%s: %w", st.what, err)
	}
	p.batch.ExecPrepared(name, args, params, results)
	p.steps = append(p.steps, st)
	if len(p.steps) >= maxPipeline {
		return p.flush(ctx)
	}
	return nil
}

// queueUnprepared queues a statement without parameters that is not
// prepared: one of its own per table would cost a round trip to prepare.
func (p *pipeline) queueUnprepared(sql, what string) {
	p.batch.ExecParams(sql, nil, nil, nil, nil)
	p.steps = append(p.steps, step{what: what})
}

// begin queues the transaction's start, so it costs no round trip of its own.
func (p *pipeline) begin() {
	p.batch.ExecParams("BEGIN", nil, nil, nil, nil)
	p.steps = append(p.steps, step{what: "begin"})
}

// commit commits the transaction with what is queued, in one round trip.
func (p *pipeline) commit(ctx context.Context) error {
	var tag pgconn.CommandTag
	p.batch.ExecParams("COMMIT", nil, nil, nil, nil)
	p.steps = append(p.steps, step{what: "commit", done: func(t pgconn.CommandTag) { tag = t }})
	if err := p.flush(ctx); err != nil {
		return err
	}
	if tag.String() != "COMMIT" { // a transaction already failed is rolled back
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// flush runs the queued statements.
func (p *pipeline) flush(ctx context.Context) error {
	if len(p.steps) == 0 {
		return nil
	}
	steps := p.steps
	mrr := p.s.conn.PgConn().ExecBatch(ctx, &p.batch)
	p.batch, p.steps = pgconn.Batch{}, nil
	i := 0
	for ; mrr.NextResult(); i++ {
		st := steps[i]
		rr := mrr.ResultReader()
		for st.rows != nil && rr.NextRow() {
			st.rows(rr.Values())
		}
		tag, err := rr.Close()
		if err != nil {
			mrr.Close()
			return st.failed(err)
		}
		if st.done != nil {
			st.done(tag)
		}
	}
	if err := mrr.Close(); err != nil {
		return steps[min(i, len(steps)-1)].failed(err)
	}
	return nil
}

// failed is the batch's error when the step's statement fails.
func (st step) failed(err error) error {
	if st.fail != nil {
		return st.fail(err)
	}
	return fmt.Errorf("%s: %w", st.what, err)
}
