package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/promethean/promlib/internal/httpx"
)

// requestTimeout bounds a request whose answer is one JSON document (not
// the streams of export and tail).
const requestTimeout = time.Minute

// maxAnswer bounds a JSON answer read into memory.
const maxAnswer = 64 << 20

// hubClient calls the hub's HTTP endpoints with the bearer token.
type hubClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newHubClient(rawURL, token string, t http.RoundTripper) (*hubClient, error) {
	u, err := baseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return &hubClient{base: u, token: token, http: &http.Client{Transport: t}}, nil
}

// wsURL is the URL of the hub's WebSocket gateway.
func (h *hubClient) wsURL() string {
	u := *h.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path += "/ws"
	return u.String()
}

// endpoint returns the URL of path (with its query).
func (h *hubClient) endpoint(path string, q url.Values) string {
	u := *h.base
	u.Path += path
	u.RawQuery = q.Encode()
	return u.String()
}

// do sends a request and returns the response when its status is 2xx;
// any other status is returned as a *hubError read from the body.
func (h *hubClient) do(ctx context.Context, method, path string, q url.Values, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.endpoint(path, q), body)
	if err != nil {
		return nil, err
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach the hub at %s: %w", h.base, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readHubError(resp)
}

// readHubError reads the JSON error body of a response that is not 2xx.
func readHubError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb httpx.ErrorBody
	if err := json.Unmarshal(b, &eb); err == nil && eb.Error.Code != "" {
		return &hubError{Status: resp.StatusCode, Code: eb.Error.Code, Msg: eb.Error.Msg}
	}
	text := strings.TrimSpace(string(b))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	return &hubError{Status: resp.StatusCode, Code: "http_" + fmt.Sprint(resp.StatusCode), Msg: text}
}

// getJSON GETs path and decodes its JSON answer into out; raw, when not
// nil, gets the answer's bytes as well.
func (h *hubClient) getJSON(ctx context.Context, path string, q url.Values, out any, raw *[]byte) error {
	return h.call(ctx, http.MethodGet, path, q, nil, out, raw)
}

// postJSON POSTs the JSON of body to path and decodes the answer into
// out; raw, when not nil, gets the answer's bytes as well.
func (h *hubClient) postJSON(ctx context.Context, path string, body any, out any, raw *[]byte) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return h.call(ctx, http.MethodPost, path, nil, b, out, raw)
}

func (h *hubClient) call(ctx context.Context, method, path string, q url.Values, body []byte, out any, raw *[]byte) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var r io.Reader
	ct := ""
	if body != nil {
		r, ct = bytes.NewReader(body), "application/json"
	}
	resp, err := h.do(ctx, method, path, q, ct, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(b) > maxAnswer {
		return fmt.Errorf("%s %s: answer larger than %d bytes", method, path, maxAnswer)
	}
	if raw != nil {
		*raw = b
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not what promctl expects (%v): is %s a promlib hub?", method, path, err, h.base)
		}
	}
	return nil
}

// printJSON writes the JSON b indented, for -o json.
func printJSON(w io.Writer, b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// marshalJSON writes v as indented JSON, for -o json of what promctl
// assembles itself.
func marshalJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return printJSON(w, b)
}
