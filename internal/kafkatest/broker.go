package kafkatest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// brokerEnv, set in a child's environment to a brokerSpec in JSON, makes
// the child serve kfake instead of running its tests. The password travels
// in it, not on the command line.
const brokerEnv = "TIDEMARK_KAFKATEST_BROKER"

// brokerSpec is what a child broker serves.
type brokerSpec struct {
	Options
	Port int
}

// init turns the process into a broker when brokerEnv is set: in init, so
// that every test binary importing this package can be one, before its
// TestMain starts servers of its own.
func init() {
	if spec := os.Getenv(brokerEnv); spec != "" {
		// syscall.Exit, not os.Exit: in a binary built with -race, os.Exit
		// waits a second for the race detector, and Stop for it.
		if err := serveBroker(spec); err != nil {
			fmt.Fprintln(os.Stderr, "kfake:", err)
			syscall.Exit(1)
		}
		syscall.Exit(0)
	}
}

// serveBroker runs kfake as spec says until the process is signalled or its
// standard input closes (the test that started it has gone).
func serveBroker(spec string) error {
	var b brokerSpec
	if err := json.Unmarshal([]byte(spec), &b); err != nil {
		return fmt.Errorf("read %s: %w", brokerEnv, err)
	}
	opts := []kfake.Opt{kfake.Ports(b.Port), kfake.DefaultNumPartitions(b.Partitions)}
	if b.SASL != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(b.SASL, b.User, b.Password))
	}
	if b.TLSCert != "" {
		c, err := brokerTLS(b.Options)
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(c))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("kfake listening on", c.ListenAddrs())
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		done <- syscall.SIGTERM
	}()
	<-done
	return nil
}

// brokerTLS is the TLS the broker serves, requiring a client certificate
// signed by TLSClientCA when that is set.
func brokerTLS(o Options) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.TLSClientCA != "" {
		pem, err := os.ReadFile(o.TLSClientCA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = x509.NewCertPool()
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", o.TLSClientCA)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}
