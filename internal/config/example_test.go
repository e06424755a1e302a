package config_test

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

func Example() {
	yaml := `
streams:
  - name: shop
    source:
      dsn: postgres://tidemark:${PGPASSWORD}@db.example.com/shop
    destination:
      type: sqlite
      path: replica.db
    include: ["public.*"]
    exclude: ["public.tmp_*"]
`
	env := func(name string) (string, bool) {
		if name == "PGPASSWORD" {
			return "s3cret", true
		}
		return "", false
	}
	cfg, err := config.Parse([]byte(yaml), env)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := cfg.Stream("shop")
	fmt.Println("metadata:", cfg.Metadata)
	fmt.Println("listen:", cfg.API.Listen)
	fmt.Println("log:", cfg.Log.Level, cfg.Log.Format)
	fmt.Println("source:", config.Redact(s.Source.DSN))
	fmt.Println("slot:", s.Source.Slot, "publication:", s.Source.Publication)
	fmt.Println("include:", s.Include, "exclude:", s.Exclude)
	fmt.Println("backfill:", s.Backfill.Mode, s.Backfill.MaxConcurrent, s.Backfill.ChunkSize)
	fmt.Println("batch:", s.Batch.MaxChanges, s.Batch.MaxDelay, "retry:", s.Retry.Initial, s.Retry.Max)
	for _, t := range []string{"orders", "tmp_x", "app.orders"} {
		id := change.ParseTableID(t)
		fmt.Printf("%s: includes %v\n", id, s.Includes(id))
	}
	// Output:
	// metadata: sqlite://tidemark.db
	// listen: 127.0.0.1:7420
	// log: info auto
	// source: postgres://tidemark:xxxxx@db.example.com/shop
	// slot: tidemark_shop publication: tidemark_shop
	// include: [public.*] exclude: [public.tmp_*]
	// backfill: automatic 2 10000
	// batch: 10000 200ms retry: 1s 1m0s
	// public.orders: includes true
	// public.tmp_x: includes false
	// app.orders: includes false
}

func ExampleValidationError() {
	yaml := `
streams:
  - name: shop
    source: {dsn: "postgres://tidemark:s3cret@db/shop", slot_name: x}
    destination: {type: mysql}
    include: ["public.*"]
    backfill: {chunk_size: 0}
  - name: shop
    source: {dsn: "host=db password=s3cret"}
    destination: {type: sqlite, path: replica.db}
    include: ["public.*"]
`
	_, err := config.Parse([]byte(yaml), nil)
	fmt.Println(err)
	// Output:
	// streams[0].source.slot_name: unknown key (line 4): use one of type, dsn, publication, slot, status_interval, wal_warn_bytes
	// streams[0].destination.type: "mysql" is not supported: use postgres or sqlite
	// streams[0].backfill.chunk_size: 0 is out of range: use 1 to 1000000
	// streams[1].source.dsn: not a postgres:// URL: write postgres://user:password@host:5432/dbname, percent-encoding special characters (e.g. @ as %40)
	// streams[1].name: "shop" is used twice (also streams[0]): stream names must be unique
}
