package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
)

// TypeNATS is the destination type's name in a stream's config.
const TypeNATS = "nats"

// The largest max_message_bytes accepted: the largest max_payload a NATS
// server takes.
const (
	minMessageBytes = 1 << 10
	maxMessageBytes = 64 << 20
)

func init() {
	sink.Register(sink.Type{
		Name:     TypeNATS,
		Title:    "NATS JetStream",
		Keys:     []string{"url", "stream", "subject_prefix", "credentials", "tls_ca", "tls_cert", "tls_key", "max_message_bytes"},
		Validate: validate,
		Open: func(ctx context.Context, d config.Destination) (sink.Sink, error) {
			return Open(ctx, d)
		},
		Doctor:  doctor,
		Example: (*Sink)(nil),
		Where: func(d config.Destination, stream string) string {
			return redact(d.URL) + ", stream " + namesOf(d, stream).stream
		},
	})
}

// A NATS destination appends events, and is read back by replaying them
// (reader.go).
var (
	_ sink.EventWriter = (*Sink)(nil)
	_ sink.Reader      = (*Sink)(nil)
)

var streamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

func validate(v *config.Checker, p string, d *config.Destination) {
	if d.URL == "" {
		v.Add(p+".url", "missing: give the NATS server's URL, e.g. url: nats://nats.example.com:4222")
	}
	for _, u := range strings.Split(d.URL, ",") {
		if u = strings.TrimSpace(u); d.URL != "" && urlProblem(u) != "" {
			v.Add(p+".url", "%s", urlProblem(u))
		}
	}
	if d.NATSStream != "" && !streamName.MatchString(d.NATSStream) {
		v.Add(p+".stream", "%s", fmt.Sprintf("%q is not a JetStream stream name: use letters, digits, _ and -", d.NATSStream))
	}
	if d.SubjectPrefix != "" && !subjectPrefix(d.SubjectPrefix) {
		v.Add(p+".subject_prefix", "%s", fmt.Sprintf("%q is not a subject prefix: use dot-separated tokens without spaces or wildcards, e.g. cdc.shop", d.SubjectPrefix))
	}
	if d.TLSKey != "" && d.TLSCert == "" {
		v.Add(p+".tls_key", "a client key needs its certificate: add tls_cert")
	}
	if d.TLSCert != "" && d.TLSKey == "" {
		v.Add(p+".tls_cert", "a client certificate needs its key: add tls_key")
	}
	if d.MaxMessageBytes != 0 && (d.MaxMessageBytes < minMessageBytes || d.MaxMessageBytes > maxMessageBytes) {
		v.Add(p+".max_message_bytes", "%s", fmt.Sprintf("%d is out of range: give a size from %d (1 KiB) to %d (64 MiB), at most the server's max_payload", d.MaxMessageBytes, minMessageBytes, maxMessageBytes))
	}
}

// urlProblem says what is wrong with one server URL, "" when nothing.
func urlProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Sprintf("%q is not a server URL: write nats://host:4222 (tls://, ws:// and wss:// also work)", redact(s))
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
		return ""
	}
	return fmt.Sprintf("%q is not a NATS URL: use the scheme nats://, tls://, ws:// or wss://", redact(s))
}

// userinfo is the part of a URL before its host: up to the last @ before
// the path, so a password holding ',' or '@' is all of it.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/]*)@`)

// redact hides the passwords of a server URL list, for messages, and a
// user without a password too: in a NATS URL that is a token. Whatever
// precedes an @ in a string without a scheme is hidden as well.
func redact(s string) string {
	out := userinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfo.FindStringSubmatch(m)
		if user, _, ok := strings.Cut(sub[2], ":"); ok && !strings.ContainsAny(user, ",@") {
			return sub[1] + user + ":xxxxx@"
		}
		return sub[1] + "xxxxx@"
	})
	if !strings.Contains(out, "://") {
		if at := strings.LastIndexByte(out, '@'); at >= 0 {
			return "xxxxx" + out[at:]
		}
	}
	return out
}

func splitSubject(s string) []string { return strings.Split(s, ".") }

// subjectPrefix says whether s can start subjects: non-empty tokens of
// printable characters, no wildcards.
func subjectPrefix(s string) bool {
	for _, tok := range splitSubject(s) {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
	}
	return true
}

// doctor connects, checks that JetStream answers, and reads the stream's
// checkpoint.
func doctor(ctx context.Context, in sink.DoctorInput) sink.DoctorReport {
	name := "stream " + in.Stream + ": destination"
	d := in.Destination
	failed := func(err error, fix string) sink.DoctorReport {
		return sink.DoctorReport{Checks: []check.Check{check.Failed(name, check.ErrText(err), fix)}}
	}
	nc, err := connect(d)
	switch {
	case errors.Is(err, errLogin):
		return failed(err, "check the user and password in "+in.Key+".url, or "+in.Key+".credentials, against the server's authorization")
	case errors.Is(err, errClientCert):
		return failed(err, "set "+in.Key+".tls_cert and tls_key to a client certificate the server accepts and its key")
	case errors.Is(err, errCert):
		return failed(err, "set "+in.Key+".tls_ca to the PEM file of the CA that signed the server's certificate")
	case err != nil:
		return failed(err, "check "+in.Key+".url and the credentials and TLS keys, and that the server is up")
	}
	defer nc.Close()
	if _, err := messageLimit(nc, d); err != nil {
		return failed(err, "")
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		return failed(fmt.Errorf("JetStream: %w", err), "enable JetStream on the server (jetstream {} in its config, or -js) for this account")
	}
	n := namesOf(d, in.Stream)
	var c checkpoint
	kv, err := js.KeyValue(ctx, checkpointBucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		// Created at the first start.
	case err != nil:
		return failed(fmt.Errorf("checkpoint bucket %s: %w", checkpointBucket, err), "")
	default:
		if c, _, _, err = readCheckpoint(ctx, kv, n.key); err != nil {
			return failed(err, "")
		}
	}
	detail := fmt.Sprintf("%s answers with JetStream; events go to stream %s, subjects %s.<schema>.<table>; %s",
		redact(d.URL), n.stream, n.prefix, in.Position(change.LSN(c.Position), c.Resume))
	return sink.DoctorReport{Checks: []check.Check{check.Passed(name, detail)}, Known: true,
		Position: change.LSN(c.Position), Resume: c.Resume}
}
