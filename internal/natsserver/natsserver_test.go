package natsserver

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tidemark/tidemark/internal/testutil"
)

// TestNatsServerStartStop: a server starts on a loopback port with
// JetStream, refuses a login without its password, and is gone after Stop.
func TestNatsServerStartStop(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{User: "tm", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Port == 4222 {
		t.Errorf("the throwaway server listens on the standard port")
	}
	if _, err := nats.Connect(s.URL()); err == nil {
		t.Errorf("a login without the password was accepted")
	}
	nc, err := nats.Connect(s.URL(), nats.UserInfo("tm", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.RequestWithContext(ctx, "$JS.API.INFO", nil); err != nil {
		t.Errorf("JetStream: %v", err)
	}
	nc.Close()
	s.Stop()
	if _, err := nats.Connect(s.URL(), nats.UserInfo("tm", "secret")); err == nil {
		t.Errorf("the server still accepts connections after Stop")
	}
}

// TestNatsServerTLS: a server started with a certificate requires TLS,
// and a client trusting its CA connects.
func TestNatsServerTLS(t *testing.T) {
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(t.Context(), Options{TLSCert: certs.Cert, TLSKey: certs.Key, TLSCA: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if nc, err := nats.Connect(s.URL()); err == nil {
		nc.Close()
		t.Errorf("a client that does not trust the CA connected")
	}
	nc, err := nats.Connect(s.URL(), nats.RootCAs(certs.CA))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Errorf("the connection is not TLS")
	}
}
