// Command kfake runs franz-go's kfake, an in-memory Kafka cluster, on a
// loopback port until it is signalled or its standard input closes (the
// test that started it has gone). Tests of the Kafka destination start it
// through internal/kafkatest: no Kafka broker is packaged for the
// machines tidemark is developed on.
package main

import (
	"crypto/tls"
	"crypto/x509"
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
	sasl := flag.String("sasl", "", "SASL mechanism the broker requires: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	user := flag.String("user", "", "the SASL user")
	// The password comes on the environment, not the command line.
	tlsCert := flag.String("tls-cert", "", "PEM certificate to serve TLS with")
	tlsKey := flag.String("tls-key", "", "PEM key of -tls-cert")
	clientCA := flag.String("tls-client-ca", "", "PEM CA that must have signed a client certificate every client presents")
	flag.Parse()
	opts := []kfake.Opt{kfake.Ports(*port), kfake.DefaultNumPartitions(*partitions)}
	if *sasl != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(*sasl, *user, os.Getenv("KFAKE_PASSWORD")))
	}
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kfake:", err)
			os.Exit(1)
		}
		c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if *clientCA != "" {
			pem, err := os.ReadFile(*clientCA)
			if err != nil {
				fmt.Fprintln(os.Stderr, "kfake:", err)
				os.Exit(1)
			}
			c.ClientCAs = x509.NewCertPool()
			c.ClientCAs.AppendCertsFromPEM(pem)
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
		opts = append(opts, kfake.TLS(c))
	}
	c, err := kfake.NewCluster(opts...)
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
