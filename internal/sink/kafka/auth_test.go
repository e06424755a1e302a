package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
	"github.com/tidemark/tidemark/internal/testutil"
)

const authPassword = "k4fka-s3cret"

// secured starts a kfake that requires TLS (certificates of a fresh CA)
// and SASL with mechanism, and returns a destination that logs in to it.
func secured(t *testing.T, mechanism string) config.Destination {
	t.Helper()
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kafkatest.StartWith(t.Context(), kafkatest.Options{Partitions: 2, SASL: strings.ToUpper(mechanism),
		User: "tidemark", Password: authPassword, TLSCert: certs.Cert, TLSKey: certs.Key, TLSClientCA: certs.CA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	d := config.Destination{Type: TypeKafka, TLSCA: certs.CA, TLSCert: certs.ClientCert, TLSKey: certs.ClientKey, Kafka: config.Kafka{Brokers: []string{c.Addr},
		TLS: true, SASLMechanism: mechanism, SASLUsername: "tidemark", SASLPassword: authPassword}}
	return d
}

// TestKafkaTLSAndSASL: for each SASL mechanism, a broker that requires
// it over TLS takes a batch from the sink logging in with it and trusting
// the broker's CA (tls_ca), and the reader reads the batch back; the
// doctor passes.
func TestKafkaTLSAndSASL(t *testing.T) {
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			ctx := t.Context()
			d := secured(t, mech)
			s := open(t, d)
			apply(t, s, &sink.Batch{Stream: "auth", Position: 100, Ops: inserts(0, 20, "x")})
			if r, err := ReadTable(ctx, d, "auth", table); err != nil || r.Len() != 20 {
				t.Fatalf("the reader holds %d rows (%v), want 20", r.Len(), err)
			}
			r := doctor(ctx, doctorInput(d))
			if !r.Known || r.Position != 100 || len(r.Checks) != 1 || r.Checks[0].Status != check.OK {
				t.Errorf("doctor: %+v", r)
			}
		})
	}
}

func doctorInput(d config.Destination) sink.DoctorInput {
	return sink.DoctorInput{Stream: "auth", Destination: d, Key: "streams[0].destination",
		Position: func(pos change.LSN, _ string) string { return fmt.Sprintf("at %d", pos) }}
}

// TestKafkaAuthFailures: a wrong password, a wrong mechanism, a missing
// or wrong CA each fail Open and the doctor with a message naming what
// failed and what to check, never showing the password.
func TestKafkaAuthFailures(t *testing.T) {
	good := secured(t, SASLScramSHA512)
	other, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sinktest.RunConnectFailures(t, good, []sinktest.ConnectFailure{
		{Name: "wrong password", Change: func(d *config.Destination) { d.Kafka.SASLPassword = "wrong-" + authPassword },
			Want: []string{"SASL authentication", "sasl_password"}, Fix: "sasl_password"},
		{Name: "wrong mechanism", Change: func(d *config.Destination) { d.Kafka.SASLMechanism = SASLPlain },
			Want: []string{"SASL authentication", "sasl_mechanism"}, Fix: "sasl_mechanism"},
		{Name: "no CA", Change: func(d *config.Destination) { d.TLSCA = "" },
			Want: []string{"certificate is not trusted", "tls_ca"}, Fix: "tls_ca"},
		{Name: "no client certificate", Change: func(d *config.Destination) { d.TLSCert, d.TLSKey = "", "" },
			Want: []string{"client certificate", "tls_cert"}, Fix: "tls_cert"},
		{Name: "wrong CA", Change: func(d *config.Destination) { d.TLSCA = other.CA },
			Want: []string{"certificate is not trusted", "tls_ca"}, Fix: "tls_ca"},
	}, func(t *testing.T, d config.Destination) error {
		s, err := Open(t.Context(), d)
		if err == nil {
			s.Close()
		}
		return err
	}, func(t *testing.T, d config.Destination) sink.DoctorReport {
		return doctor(t.Context(), doctorInput(d))
	}, authPassword, "wrong-"+authPassword)
}
