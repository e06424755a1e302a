package config

import (
	"regexp"
	"strings"
)

const redacted = "xxxxx"

var queryPasswordRE = regexp.MustCompile(`(?i)([?&](?:ssl)?password=)[^&#]*`)

// Redact returns dsn with its passwords replaced by "xxxxx", for logs and
// messages. It reads URLs (postgres://user:password@host/db?password=…) and
// keyword/value DSNs (host=db password='a secret'); on a malformed DSN it
// errs towards hiding too much.
func Redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		return redactURL(dsn, i+len("://"))
	}
	return redactKeywords(dsn)
}

// redactURL redacts the password in the userinfo and password query
// parameters of a URL whose authority starts at start.
func redactURL(s string, start int) string {
	rest := s[start:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		// A password holding an unescaped /, ? or # hides the @ from a URL
		// parser; take the last @ of all.
		at = strings.LastIndexByte(rest, '@')
	}
	if at >= 0 {
		if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
			s = s[:start+colon+1] + redacted + rest[at:]
		}
	}
	return queryPasswordRE.ReplaceAllString(s, "${1}"+redacted)
}

// redactKeywords redacts the password and sslpassword values of a libpq
// keyword/value DSN.
func redactKeywords(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if isSpace(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		k := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[k:i]
		j := skipSpaces(s, i)
		if j == len(s) || s[j] != '=' {
			b.WriteString(s[k:j])
			i = j
			continue
		}
		j = skipSpaces(s, j+1)
		b.WriteString(s[k:j])
		i = j + valueLen(s[j:])
		if strings.EqualFold(key, "password") || strings.EqualFold(key, "sslpassword") {
			b.WriteString(redacted)
		} else {
			b.WriteString(s[j:i])
		}
	}
	return b.String()
}

// valueLen is the length of the keyword value at the start of s: a quoted
// string with backslash escapes, or a run up to white space.
func valueLen(s string) int {
	if s == "" || s[0] != '\'' {
		n := 0
		for n < len(s) && !isSpace(s[n]) {
			n++
		}
		return n
	}
	for n := 1; n < len(s); n++ {
		switch s[n] {
		case '\\':
			n++
		case '\'':
			return n + 1
		}
	}
	return len(s)
}

func skipSpaces(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
