package daemon

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/cluster"
)

// BenchmarkClusterFailover measures, over 10 SIGKILLs of the node running
// a stream (three nodes, cluster.lease 3s), the time from the kill to the
// stream running on another node: the lease running out, the takeover of
// the slot and the destination's fence, and the stream's start.
func BenchmarkClusterFailover(b *testing.B) {
	c := newClusterEnv(b, "bench_failover")
	c.startAll(cluster.StreamLease("crash"))
	var took []time.Duration
	for range 10 {
		owner := c.owner("")
		killed := time.Now()
		c.nodes[owner].kill()
		c.owner(owner)
		took = append(took, time.Since(killed))
		c.nodes[owner].start()
		c.nodes[owner].waitAPI()
	}
	slices.Sort(took)
	median, worst := took[len(took)/2], took[len(took)-1]
	fmt.Printf("\ncluster failover, 3 nodes, lease 3s, 10 SIGKILLs of the stream's node: median %.2fs, worst %.2fs (each: %v)\n",
		median.Seconds(), worst.Seconds(), took)
	b.ReportMetric(median.Seconds(), "median-s")
	b.ReportMetric(worst.Seconds(), "worst-s")
}
