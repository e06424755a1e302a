package api

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/config"
)

// TestDestinationView: a stream's destination shows its type, where it is
// without any password or token, and its capabilities.
func TestDestinationView(t *testing.T) {
	for _, c := range []struct {
		d     config.Destination
		where string
		can   []string
	}{
		{config.Destination{Type: "postgres", DSN: "postgres://u:s3cret@db:5432/shop?sslpassword=s3cret"}, "postgres://u:xxxxx@db:5432/shop?sslpassword=xxxxx",
			[]string{"create tables", "replace key ranges", "be read back", "alter tables"}},
		{config.Destination{Type: "sqlite", Path: "/data/out.db"}, "/data/out.db", []string{"create tables", "replace key ranges"}},
		{config.Destination{Type: "files", Path: "/data/out", Format: "parquet"}, "/data/out, parquet", []string{"be read back"}},
		{config.Destination{Type: "files", Path: "/data/out"}, "/data/out, jsonl", nil},
		{config.Destination{Type: "kafka", Kafka: config.Kafka{Brokers: []string{"k1:9092", "k2:9092"}, SASLPassword: "s3cret"}}, "k1:9092,k2:9092, topics ", nil},
		{config.Destination{Type: "nats", URL: "nats://alice:s3cret@n1:4222,nats://s3cret@n2:4222"}, "nats://alice:xxxxx@n1:4222,nats://xxxxx@n2:4222, stream tidemark_shop", nil},
	} {
		v := destinationView(config.Stream{Name: "shop", Destination: c.d})
		if v.Type != c.d.Type || v.Title == "" || !strings.HasPrefix(v.Where, c.where) || strings.Contains(v.Where, "s3cret") {
			t.Errorf("%s: %+v, want where starting %q", c.d.Type, v, c.where)
		}
		for _, want := range c.can {
			if !slices.Contains(v.Capabilities, want) {
				t.Errorf("%s: capabilities %q lack %q", c.d.Type, v.Capabilities, want)
			}
		}
	}
}
