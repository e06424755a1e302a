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
	// streams[0].source.slot_name: unknown key (line 4): use one of type, dsn, publication, publication_mode, slot, status_interval, wal_warn_bytes, read_timeouts, server_id
	// streams[0].destination.type: "mysql" is not supported: use files, kafka, nats, postgres or sqlite
	// streams[0].backfill.chunk_size: 0 is out of range: use 1 to 1000000
	// streams[1].source.dsn: not a postgres:// URL: write postgres://user:password@host:5432/dbname, percent-encoding special characters (e.g. @ as %40)
	// streams[1].name: "shop" is used twice (also streams[0]): stream names must be unique
}

func Example_tasks() {
	yaml := `
batch: {timezone: Europe/Paris}
connections:
  - {name: warehouse, type: postgres, dsn: "${WAREHOUSE_DSN}"}
tasks:
  - name: orders_hourly
    project: sales
    type: sql
    connection: warehouse
    sql: "INSERT INTO orders_h SELECT * FROM staging.orders WHERE day = '${bizdate}'"
    schedule: hourly
  - name: orders_daily
    project: sales
    type: shell
    command: "load --day ${day}"
    schedule: "daily 01:30"
    depends_on: [orders_hourly]
    params: {day: "${bizdate-1}"}
`
	env := func(name string) (string, bool) {
		if name == "WAREHOUSE_DSN" {
			return "postgres://etl:s3cret@db.example.com/wh", true
		}
		return "", false
	}
	cfg, err := config.Parse([]byte(yaml), env)
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, _ := cfg.Connection("warehouse")
	fmt.Println("connection:", config.Redact(conn.DSN))
	group, _ := cfg.ResourceGroup(config.DefaultResourceGroup)
	fmt.Println("resource group:", group.Name, group.Concurrency)
	for _, t := range cfg.Tasks {
		fmt.Printf("%s: %s, upstream %v, in %s\n", t.ID, t.Schedule, t.Upstream, t.Schedule.Location)
	}
	daily := cfg.Tasks[1]
	fmt.Println("command:", daily.Command)
	fmt.Println("params:", daily.Params)
	// Output:
	// connection: postgres://etl:xxxxx@db.example.com/wh
	// resource group: default 4
	// sales.orders_hourly: hourly, upstream [], in Europe/Paris
	// sales.orders_daily: daily 01:30, upstream [sales.orders_hourly], in Europe/Paris
	// command: load --day ${day}
	// params: [{day ${bizdate-1}}]
}
