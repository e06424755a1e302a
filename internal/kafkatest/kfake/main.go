// Command kfake runs franz-go's kfake, an in-memory Kafka cluster, on a
// loopback port until it is signalled or its standard input closes (the
// test that started it has gone). Tests of the Kafka destination start it
// through internal/kafkatest: no Kafka broker is packaged for the
// machines tidemark is developed on.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "loopback port to listen on")
	partitions := flag.Int("partitions", 1, "partitions of a topic created without a count")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.Ports(*port), kfake.DefaultNumPartitions(*partitions))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Println("kfake listening on", c.ListenAddrs())
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		done <- syscall.SIGTERM
	}()
	<-done
	c.Close()
}
