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
	"github.com/tidemark/tidemark/internal/testutil"
)

const authPassword = "k4fka-s3cret"

// secured starts a kfake that requires TLS (certificates of a fresh CA)
// and SASL with mechanism, and returns a destination that logs in to it.
func secured(t *testing.T, mechanism string) (config.Destination, testutil.Certs) {
	t.Helper()
	certs, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kafkatest.StartWith(t.Context(), kafkatest.Options{Partitions: 2, SASL: strings.ToUpper(mechanism),
		User: "tidemark", Password: authPassword, TLSCert: certs.Cert, TLSKey: certs.Key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	d := config.Destination{Type: TypeKafka, TLSCA: certs.CA, Kafka: config.Kafka{Brokers: []string{c.Addr},
		TLS: true, SASLMechanism: mechanism, SASLUsername: "tidemark", SASLPassword: authPassword}}
	return d, certs
}

// TestKafkaTLSAndSASL: for each SASL mechanism, a broker that requires
// it over TLS takes a batch from the sink logging in with it and trusting
// the broker's CA (tls_ca), and the reader reads the batch back; the
// doctor passes.
func TestKafkaTLSAndSASL(t *testing.T) {
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			ctx := t.Context()
			d, _ := secured(t, mech)
			s := open(t, d)
			if err := s.Apply(ctx, &sink.Batch{Stream: "auth", Position: 100, Ops: inserts(0, 20, "x")}); err != nil {
				t.Fatal(err)
			}
			if r, err := ReadTable(ctx, d, "auth", table); err != nil || r.Len() != 20 {
				t.Fatalf("the reader holds %d rows (%v), want 20", r.Len(), err)
			}
			r := doctor(ctx, doctorInput(d))
			if !r.Known || r.Position != 100 || len(r.Checks) != 1 || r.Checks[0].Fix != "" {
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
	ctx := t.Context()
	good, _ := secured(t, SASLScramSHA512)
	other, err := testutil.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(d *config.Destination)
		want   []string // in the error and the doctor's detail
		fix    string   // in the doctor's fix
	}{
		{"wrong password", func(d *config.Destination) { d.Kafka.SASLPassword = "wrong-" + authPassword },
			[]string{"SASL authentication", "sasl_password"}, "sasl_password"},
		{"wrong mechanism", func(d *config.Destination) { d.Kafka.SASLMechanism = SASLPlain },
			[]string{"SASL authentication", "sasl_mechanism"}, "sasl_mechanism"},
		{"no CA", func(d *config.Destination) { d.TLSCA = "" },
			[]string{"certificate is not trusted", "tls_ca"}, "tls_ca"},
		{"wrong CA", func(d *config.Destination) { d.TLSCA = other.CA },
			[]string{"certificate is not trusted", "tls_ca"}, "tls_ca"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := good
			c.change(&d)
			s, err := Open(ctx, d)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			r := doctor(ctx, doctorInput(d))
			t.Logf("error: %v\nfix: %s", err, r.Checks[0].Fix)
			if r.Known || len(r.Checks) != 1 || r.Checks[0].Status != check.Fail {
				t.Fatalf("doctor: %+v", r)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(r.Checks[0].Detail, w) {
					t.Errorf("%q or the doctor's %q does not say %q", err, r.Checks[0].Detail, w)
				}
			}
			if !strings.Contains(r.Checks[0].Fix, c.fix) {
				t.Errorf("the doctor's fix %q does not name %s", r.Checks[0].Fix, c.fix)
			}
			if all := fmt.Sprintf("%v %+v", err, r); strings.Contains(all, authPassword) {
				t.Errorf("the password shows: %s", all)
			}
		})
	}
}
