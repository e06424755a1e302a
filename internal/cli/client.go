package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client calls the daemon's API.
type client struct {
	base  string
	token string
	http  *http.Client
}

func (g *globals) client() *client {
	return &client{base: strings.TrimSuffix(g.addr, "/"), token: g.token, http: &http.Client{Timeout: 0}}
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	data, err := c.call(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// raw returns the response body as it is (CSV exports).
func (c *client) raw(ctx context.Context, method, path string) ([]byte, error) {
	return c.call(ctx, method, path, nil)
}

func (c *client) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("X-Tidemark-Client", "cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		return nil, responseError(method, path, resp.StatusCode, data)
	}
	return data, nil
}

// unreachable says that the daemon could not be reached, when that is why
// a request failed.
func (c *client) unreachable(method, path string, err error) error {
	var netErr interface{ Timeout() bool }
	if errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") {
		return &unreachableError{base: c.base, err: err}
	}
	return fmt.Errorf("call %s %s: %w", method, path, err)
}

// unreachableError is a request that did not reach the daemon.
type unreachableError struct {
	base string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach tidemark at %s: is `tidemark run` running? (%v)", e.base, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// isUnreachable reports whether err is a request that did not reach the
// daemon.
func isUnreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

// responseError is the error of an API response with status >= 300: the
// API's message, with the exit code its error code calls for.
func responseError(method, path string, status int, data []byte) error {
	var ae apiError
	if json.Unmarshal(data, &ae) != nil || ae.Error.Code == "" {
		return fmt.Errorf("%s %s: HTTP %d", method, path, status)
	}
	err := fmt.Errorf("%s", ae.Error.Message)
	if ae.Error.Code == "refused" {
		return &exitError{code: ExitRefused, err: err}
	}
	// A stream, object or id that does not exist is the caller's mistake:
	// the message names it and what it may have been meant to be.
	if ae.Error.Code == "bad_request" || ae.Error.Code == "confirm" || ae.Error.Code == "not_found" {
		return &exitError{code: ExitUsage, err: err}
	}
	return err
}

// ago is a time as tables show it: in the local time zone ($TZ, else the
// system's), with its offset; "-" for none. --json keeps the API's UTC
// RFC 3339.
func ago(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format(tableTime)
}

// tableTime is the layout of times in tables and messages.
const tableTime = "2006-01-02 15:04:05 -07:00"
