package nats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/natsserver"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
	"github.com/tidemark/tidemark/internal/testutil"
)

const authPassword = "n4ts-s3cret"

// secured starts a nats-server that requires TLS (a certificate of a
// fresh CA) and a user and password, and returns a destination that
// logs in to it with user:password in the URL and trusts the CA.
func secured(t *testing.T) config.Destination {
	t.Helper()
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(t.Context(), natsserver.Options{User: "tm", Password: authPassword,
		TLSCert: certs.Cert, TLSKey: certs.Key, TLSCA: certs.CA,
		TLSClientCert: certs.ClientCert, TLSClientKey: certs.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return config.Destination{Type: TypeNATS, TLSCA: certs.CA, TLSCert: certs.ClientCert, TLSKey: certs.ClientKey,
		URL: strings.Replace(srv.URL(), "nats://", "tls://tm:"+authPassword+"@", 1)}
}

func authDoctor(t *testing.T, d config.Destination) sink.DoctorReport {
	return doctor(t.Context(), sink.DoctorInput{Stream: "auth", Destination: d, Key: "streams[0].destination",
		Position: func(pos change.LSN, _ string) string { return fmt.Sprintf("at %d", pos) }})
}

// TestNatsTLSAndPassword: a server that requires TLS and a login takes a
// batch from the sink trusting its CA (tls_ca) with the login in the URL,
// the reader reads it back, and the doctor passes without showing the
// password.
func TestNatsTLSAndPassword(t *testing.T) {
	d := secured(t)
	s := open(t, d, 0)
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "auth", Position: 1009, Ops: txns(0, 10, "a")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": `"a!"`}
	for id := 1; id < 10; id++ {
		want[fmt.Sprint(id)] = `"a"`
	}
	wantRows(t, d, "auth", table, want)
	r := authDoctor(t, d)
	if !r.Known || r.Position != 1009 || len(r.Checks) != 1 || r.Checks[0].Status != check.OK {
		t.Errorf("doctor: %+v", r)
	}
	if all := fmt.Sprintf("%+v", r); strings.Contains(all, authPassword) {
		t.Errorf("the doctor shows the password: %s", all)
	}
}

// TestNatsAuthFailures: a wrong password, no password, no tls_ca and the
// wrong CA each fail Open and the doctor with a message naming what
// failed and the keys to check, never showing a password.
func TestNatsAuthFailures(t *testing.T) {
	good := secured(t)
	other, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sinktest.RunConnectFailures(t, good, []sinktest.ConnectFailure{
		{Name: "wrong password", Change: func(d *config.Destination) { d.URL = strings.Replace(d.URL, authPassword, "wrong-pw", 1) },
			Want: []string{"Authorization Violation", "refused the login", "user and password in url"}, Fix: "streams[0].destination.url"},
		{Name: "no password", Change: func(d *config.Destination) { d.URL = strings.Replace(d.URL, "tm:"+authPassword+"@", "", 1) },
			Want: []string{"Authorization Violation", "refused the login", "user and password in url"}, Fix: "streams[0].destination.url"},
		{Name: "no CA", Change: func(d *config.Destination) { d.TLSCA = "" },
			Want: []string{"certificate is not trusted", "tls_ca"}, Fix: "streams[0].destination.tls_ca"},
		{Name: "no client certificate", Change: func(d *config.Destination) { d.TLSCert, d.TLSKey = "", "" },
			Want: []string{"client certificate", "tls_cert"}, Fix: "tls_cert"},
		{Name: "wrong CA", Change: func(d *config.Destination) { d.TLSCA = other.CA },
			Want: []string{"certificate is not trusted", "tls_ca"}, Fix: "streams[0].destination.tls_ca"},
	}, func(t *testing.T, d config.Destination) error {
		s, err := Open(t.Context(), d)
		if err == nil {
			s.Close()
		}
		return err
	}, authDoctor, authPassword, "wrong-pw")
}
