package doctor

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/config"
)

func TestDiskCheck(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		avail, total uint64
		want         Status
	}{
		{10 * gib, 100 * gib, OK},
		{5 * gib, 100 * gib, OK},
		{4 * gib, 100 * gib, Warn},  // under 5%
		{gib - 1, 2 * gib, Warn},    // under 1 GiB
		{gib, 10 * gib, OK},         // exactly both bounds
		{2 * gib, 1000 * gib, Warn}, // 0.2%
	} {
		c := diskCheck("disk", "/data", tc.avail, tc.total)
		if c.Status != tc.want || !strings.Contains(c.Detail, "/data") {
			t.Errorf("%d of %d free: %+v, want %s", tc.avail, tc.total, c, tc.want)
		}
	}
}

func TestPasswordsScrubbed(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Metadata: "postgres://meta:MetaSecret1@db/meta",
		Streams: []config.Stream{{
			Source:      config.Source{DSN: "postgres://u:Src%40Secret@db/shop?sslmode=disable"},
			Destination: config.Destination{DSN: "postgres://u@db/x?password=DestSecret"},
		}},
		Connections: []config.Connection{{DSN: "host=db user=u password='Conn Secret'"}, {DSN: "postgres://u:abc@db/x"}},
	}
	secrets := passwords(cfg)
	text := "MetaSecret1 Src@Secret DestSecret Conn Secret abc"
	if got := scrub(text, secrets); got != "xxxxx xxxxx xxxxx xxxxx abc" {
		t.Errorf("scrub: %q (passwords %q)", got, secrets)
	}
}

func TestErrText(t *testing.T) {
	t.Parallel()
	err := errors.New("failed to connect to `user=u database=d`:\n\t1.2.3.4:5 (h): refused\n\t1.2.3.4:5 (h): refused\n\t5.6.7.8:5 (h): reset")
	if got, want := errText(err), "failed to connect to `user=u database=d`: 1.2.3.4:5 (h): refused; 5.6.7.8:5 (h): reset"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
