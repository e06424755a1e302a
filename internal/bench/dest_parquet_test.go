package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
)

// parquetWriteKey is the plain Parquet write the files destination's
// Parquet format is held against.
const parquetWriteKey = "parquet-write"

// parquetWriteSelect reads public.t as the plain write stores it.
const parquetWriteSelect = `SELECT id, customer_id, status, amount::text, note, payload::text, created_at, updated_at FROM public.t`

// parquetWriteRow is a row of public.t as the plain write stores it:
// typed columns where Go has the type, the decimal and the JSON as text.
type parquetWriteRow struct {
	ID         int64     `parquet:"id"`
	CustomerID *int32    `parquet:"customer_id,optional"`
	Status     *string   `parquet:"status,optional"`
	Amount     *string   `parquet:"amount,optional"`
	Note       *string   `parquet:"note,optional"`
	Payload    *string   `parquet:"payload,optional,json"`
	CreatedAt  time.Time `parquet:"created_at,timestamp(microsecond)"`
	UpdatedAt  time.Time `parquet:"updated_at,timestamp(microsecond)"`
}

// runParquetWrite times the baseline of the files destination's Parquet
// format: the same rows read from the source with pgx and written by
// parquet-go's generic writer, Snappy-compressed as the destination's,
// to one file, fsynced.
func (db *destBench) runParquetWrite() error {
	conn, err := pgx.Connect(db.ctx, db.sv.src.DSN(srcDB))
	if err != nil {
		return fmt.Errorf("plain Parquet baseline: connect to source: %w", err)
	}
	defer conn.Close(db.ctx)
	path := filepath.Join(db.b.TempDir(), "plain.parquet")
	r, err := db.timePipe(parquetWriteKey, "plain Parquet write", "dest-files_parquet", db.sv.dst.PID(),
		"source rows read with pgx, written by parquet-go's GenericWriter (Snappy) to one file",
		func() (int64, error) { return writeParquet(db, conn, path) })
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("plain Parquet write: %w", err)
	}
	db.results = append(db.results, destResult{result: r, held: info.Size(), heldWhat: "the one Parquet file"})
	return nil
}

// writeParquet copies public.t from the source into a Parquet file at path.
func writeParquet(db *destBench, conn *pgx.Conn, path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	out := bufio.NewWriterSize(f, 1<<20)
	w := parquet.NewGenericWriter[parquetWriteRow](out, parquet.Compression(&parquet.Snappy))
	rows, err := conn.Query(db.ctx, parquetWriteSelect)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	batch := make([]parquetWriteRow, 0, 1024)
	flush := func() error {
		_, err := w.Write(batch)
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		var r parquetWriteRow
		if err := rows.Scan(&r.ID, &r.CustomerID, &r.Status, &r.Amount, &r.Note, &r.Payload, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return n, err
		}
		if batch = append(batch, r); len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return n, err
			}
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	if err := flush(); err != nil {
		return n, err
	}
	if err := w.Close(); err != nil {
		return n, err
	}
	if err := out.Flush(); err != nil {
		return n, err
	}
	return n, f.Sync()
}
