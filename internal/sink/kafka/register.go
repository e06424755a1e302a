package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
)

// TypeKafka is the destination type's name in a stream's config.
const TypeKafka = "kafka"

// The limits of the destination's numeric keys.
const (
	minMessageBytes = 1 << 10
	maxMessageBytes = 1 << 30
	maxPartitions   = 10000
)

func init() {
	sink.Register(sink.Type{
		Name:  TypeKafka,
		Title: "Kafka",
		Keys: []string{"brokers", "topic", "checkpoint_topic", "partitions", "max_message_bytes", "tls", "tls_ca",
			"tls_cert", "tls_key", "sasl_mechanism", "sasl_username", "sasl_password"},
		Validate: validate,
		Open: func(ctx context.Context, d config.Destination) (sink.Sink, error) {
			return Open(ctx, d)
		},
		Doctor:  doctor,
		Example: (*Sink)(nil),
		Where: func(d config.Destination, _ string) string {
			return strings.Join(d.Kafka.Brokers, ",") + ", topics " + cmp.Or(d.Kafka.Topic, DefaultTopic)
		},
	})
}

// A Kafka destination appends events, and is read back by replaying them
// (reader.go).
var (
	_ sink.EventWriter = (*Sink)(nil)
	_ sink.Reader      = (*Sink)(nil)
)

func validate(v *config.Checker, p string, d *config.Destination) {
	k := d.Kafka
	if len(k.Brokers) == 0 {
		v.Add(p+".brokers", "missing: list the bootstrap brokers as host:port, e.g. brokers: [kafka1:9092]")
	}
	for i, b := range k.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			v.Add(fmt.Sprintf("%s.brokers[%d]", p, i), "%s", fmt.Sprintf("%q is not host:port: write e.g. kafka1:9092", b))
		}
	}
	if k.Topic != "" && !strings.Contains(k.Topic, "{table}") {
		v.Add(p+".topic", "%s", fmt.Sprintf("%q lacks {table}: every table needs a topic of its own, e.g. {stream}.{schema}.{table}", k.Topic))
	}
	if k.CheckpointTopic != "" && (topicChars(k.CheckpointTopic) != k.CheckpointTopic || len(k.CheckpointTopic) > 249) {
		v.Add(p+".checkpoint_topic", "%s", fmt.Sprintf("%q is not a Kafka topic name: use up to 249 letters, digits, '.', '_' and '-'", k.CheckpointTopic))
	}
	if k.Partitions < 0 || k.Partitions > maxPartitions {
		v.Add(p+".partitions", "%s", fmt.Sprintf("%d is out of range: use 1 to %d, or leave it out for the broker's default", k.Partitions, maxPartitions))
	}
	if n := d.MaxMessageBytes; n != 0 && (n < minMessageBytes || n > maxMessageBytes) {
		v.Add(p+".max_message_bytes", "%s", fmt.Sprintf("%d is out of range: give a size from %d (1 KiB) to %d (1 GiB)", n, minMessageBytes, maxMessageBytes))
	}
	if (d.TLSCert == "") != (d.TLSKey == "") {
		v.Add(p+".tls_cert", "give tls_cert and tls_key together (a client certificate and its key), or neither")
	}
	switch strings.ToLower(k.SASLMechanism) {
	case "":
		if k.SASLUsername != "" || k.SASLPassword != "" {
			v.Add(p+".sasl_mechanism", "missing: sasl_username and sasl_password need a mechanism: plain, scram-sha-256 or scram-sha-512")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if k.SASLUsername == "" || k.SASLPassword == "" {
			v.Add(p+".sasl_username", "missing: SASL needs sasl_username and sasl_password")
		}
	default:
		v.Add(p+".sasl_mechanism", "%s", fmt.Sprintf("%q is not supported: use plain, scram-sha-256 or scram-sha-512", k.SASLMechanism))
	}
}

// doctor connects to the brokers and reads the stream's checkpoint.
func doctor(ctx context.Context, in sink.DoctorInput) sink.DoctorReport {
	name := "stream " + in.Stream + ": destination"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fail := func(err error) sink.DoctorReport {
		fix := "check " + in.Key + ".brokers and the TLS and SASL keys, and that the brokers are reachable from here"
		switch {
		case errors.Is(err, errLogin):
			fix = "check " + in.Key + ".sasl_mechanism, sasl_username and sasl_password against the user the brokers know"
		case errors.Is(err, errClientCert):
			fix = "set " + in.Key + ".tls_cert and tls_key to a client certificate the brokers accept and its key"
		case errors.Is(err, errCert):
			fix = "set " + in.Key + ".tls_ca to the PEM file of the CA that signed the brokers' certificate"
		}
		return sink.DoctorReport{Checks: []check.Check{check.Failed(name, check.ErrText(err), fix)}}
	}
	s, err := Open(ctx, in.Destination)
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	brokers, err := s.adm.ListBrokers(ctx)
	if err != nil {
		return fail(err)
	}
	c, err := s.readCheckpoint(ctx, in.Stream)
	if err != nil {
		return fail(err)
	}
	detail := fmt.Sprintf("%s reached (%s); checkpoint topic %s; %s", strings.Join(in.Destination.Kafka.Brokers, ", "),
		check.Plural(len(brokers), "1 broker", strconv.Itoa(len(brokers))+" brokers"), s.cfg.CheckpointTopic, in.Position(c.Position, c.Resume))
	return sink.DoctorReport{Checks: []check.Check{check.Passed(name, detail)}, Known: true, Position: c.Position, Resume: c.Resume}
}
