package nats

import (
	"strings"
	"testing"
)

// TestRedact: no password, token or unparsable user part of a server URL
// reaches a message.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@h:4222", "nats://alice:xxxxx@h:4222"},
		{"nats://s3cret@h:4222", "nats://xxxxx@h:4222"}, // a token
		{"nats://a:s3cret@h:1,tls://b:s3cret@g:2", "nats://a:xxxxx@h:1,tls://b:xxxxx@g:2"},
		{"nats://a:s3%zzcret@h:4222", "nats://a:xxxxx@h:4222"}, // an escape that does not parse
		{"nats://a:s3,cret@h:4222", "nats://a:xxxxx@h:4222"},   // a comma, which also separates URLs
		{"nats://a:s3@cret@h:4222", "nats://a:xxxxx@h:4222"},   // an unescaped @
		{"nats://h1:4222,nats://a:s3cret@h2:4222", "nats://h1:4222,nats://a:xxxxx@h2:4222"},
		{"s3cret@h", "xxxxx@h"},
	} {
		got := redact(c.in)
		if got != c.want || strings.Contains(got, "s3") {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
