package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
)

// The SASL mechanisms, as sasl_mechanism names them.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// connOpts are the client options every connection of a destination
// uses: its brokers, TLS and SASL.
func connOpts(d config.Destination) ([]kgo.Opt, error) {
	k := d.Kafka
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.DialTimeout(10 * time.Second)}
	if k.TLS || d.TLSCA != "" || d.TLSCert != "" {
		c, err := tlsConfig(d)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	switch strings.ToLower(k.SASLMechanism) {
	case "":
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASLUsername, Pass: k.SASLPassword}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("sasl_mechanism %q is not one of plain, scram-sha-256, scram-sha-512", k.SASLMechanism)
	}
	return opts, nil
}

func tlsConfig(d config.Destination) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.TLSCA != "" {
		pem, err := os.ReadFile(d.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("tls_ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca %s holds no PEM certificate", d.TLSCA)
		}
	}
	if d.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(d.TLSCert, d.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls_cert and tls_key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// What a failure to reach the brokers most likely means, for its message
// and the doctor's fix: franz-go passes a failed TLS handshake and a
// refused login on as they come.
var (
	errLogin      = errors.New("SASL authentication refused")
	errCert       = errors.New("the brokers' TLS certificate is not trusted")
	errClientCert = errors.New("the brokers refused the client certificate, or its lack")
)

// explain adds to an error from the brokers what it most likely means
// and what to do.
func explain(err error, d config.Destination) error {
	switch {
	case sink.CertUntrusted(err):
		return fmt.Errorf("%w: %w: set tls_ca to the PEM file of the CA that signed the brokers' certificate", err, errCert)
	case sink.ClientCertRefused(err):
		return fmt.Errorf("%w: %w: set tls_cert and tls_key to a client certificate the brokers' CA signed and its key", err, errClientCert)
	case (d.Kafka.TLS || d.TLSCA != "") && d.TLSCert == "" && closedConn(err):
		// Under TLS 1.3 the broker checks the client's certificate after
		// the handshake, and its refusal may arrive as a closed connection.
		return fmt.Errorf("%w: the broker closed the connection after TLS: %w: set tls_cert and tls_key to a client certificate the brokers' CA signed and its key; with SASL, also check sasl_mechanism, sasl_username and sasl_password", err, errClientCert)
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("%w: %w: check sasl_mechanism, sasl_username and sasl_password", err, errLogin)
	case d.Kafka.SASLMechanism != "" && errors.Is(err, io.EOF):
		// Some brokers (kfake among them) close the connection on a wrong
		// password rather than answer with an error.
		return fmt.Errorf("%w: the broker closed the connection: %w, or tls is off where the brokers want TLS: check sasl_mechanism, sasl_username, sasl_password and tls", err, errLogin)
	}
	return err
}

// closedConn says whether err is the peer closing the connection.
func closedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "after TLS handshake")
}
