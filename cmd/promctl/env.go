package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// env is what a command runs with: its streams, the hub's URL and token,
// and, once its flags are parsed, the client of the hub.
type env struct {
	cmd    *command
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	url   string // -url, PROMLIB_URL or the default
	token string // -token or PROMLIB_TOKEN

	output    string // -o of the commands that have it
	hasOutput bool

	transport *http.Transport // of every HTTP request, closed by close
	hub       *hubClient      // set by parse
}

// flags returns the FlagSet of the running command with the flags every
// command takes: -url and -token (their defaults are the global ones).
func (e *env) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("promctl "+e.cmd.Name, flag.ContinueOnError)
	fs.StringVar(&e.url, "url", e.url, "the hub's base `URL` (env "+envURL+")")
	// The token's default is not shown: -h must not print a secret.
	fs.Func("token", "bearer `TOKEN` for the hub (env "+envToken+")", func(v string) error {
		e.token = v
		return nil
	})
	return fs
}

// outputFlag adds -o (table or json) to fs.
func (e *env) outputFlag(fs *flag.FlagSet) {
	e.hasOutput = true
	fs.StringVar(&e.output, "o", "table", "output: table (for people) or json (for scripts)")
}

// json reports whether -o json was given.
func (e *env) json() bool { return e.output == "json" }

// parse parses args with fs, flags and positional arguments in any order
// ("--" ends the flags), checks -url and -o, and makes the hub's client.
// -h prints the command's usage to stdout and returns errHelp.
func (e *env) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			e.usage(fs)
			return nil, errHelp
		}
		if err != nil {
			return nil, usagef("%v (see promctl %s -h)", err, e.cmd.Name)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if e.hasOutput && e.output != "table" && e.output != "json" {
		return nil, usagef("-o: %q, want table or json", e.output)
	}
	hub, err := newHubClient(e.url, e.token, e.httpTransport())
	if err != nil {
		return nil, err
	}
	e.hub = hub
	return pos, nil
}

// usage writes the command's usage and flags to stdout.
func (e *env) usage(fs *flag.FlagSet) {
	c := e.cmd
	fmt.Fprintf(e.stdout, "usage: promctl %s %s\n\n%s\n", c.Name, c.Synopsis, c.Summary)
	if c.Help != "" {
		fmt.Fprintf(e.stdout, "\n%s\n", strings.TrimRight(c.Help, "\n"))
	}
	fmt.Fprint(e.stdout, "\nFlags:\n")
	fs.SetOutput(e.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// argCount checks the number of positional arguments: at least min, at most
// max (-1: any), each named in names for the message.
func argCount(pos []string, min, max int, names ...string) error {
	if len(pos) < min {
		return usagef("missing %s", names[len(pos)])
	}
	if max >= 0 && len(pos) > max {
		return usagef("unexpected argument %q", pos[max])
	}
	return nil
}

// topicArg checks a topic name given as the argument TOPIC.
func topicArg(t string) error {
	if err := event.ValidateTopic(t); err != nil {
		return usagef("TOPIC: %s", fieldMsg(err))
	}
	return nil
}

// groupArg checks a group name given as the argument GROUP.
func groupArg(g string) error {
	if err := event.ValidateGroup(g); err != nil {
		return usagef("GROUP: %s", fieldMsg(err))
	}
	return nil
}

// fieldMsg strips the "event: invalid argument: topic: " prefix of a name
// check, whose field the caller names.
func fieldMsg(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, event.ErrInvalid.Error()+": "); ok {
		if _, tail, ok := strings.Cut(rest, ": "); ok {
			return tail
		}
		return rest
	}
	return msg
}

// httpTransport returns the transport of the run's HTTP requests.
func (e *env) httpTransport() *http.Transport {
	if e.transport == nil {
		e.transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return e.transport
}

// close releases the run's idle connections.
func (e *env) close() {
	if e.transport != nil {
		e.transport.CloseIdleConnections()
	}
}

// dial connects to the hub's WebSocket gateway and authenticates with
// the token. With reconnect false, a lost connection ends the client's
// calls with an error instead of being dialled again.
func (e *env) dial(ctx context.Context, reconnect bool) (*wsclient.Client, error) {
	c, err := wsclient.Dial(ctx, e.hub.wsURL(), &wsclient.Options{
		Token: e.token, DisableReconnect: !reconnect,
	})
	if err != nil {
		return nil, wsErr(err)
	}
	return c, nil
}

// wsErr turns an error of the WebSocket client into the shape of the
// hub's HTTP errors: the protocol's code and message.
func wsErr(err error) error {
	var pe *wsproto.Error
	if errors.As(err, &pe) {
		return &hubError{Code: string(pe.Code), Msg: pe.Msg}
	}
	return err
}

// baseURL checks the hub's URL of -url or PROMLIB_URL: http or https
// (ws and wss are taken as them), with a host, and no query.
func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usagef("-url: %q is not a URL: %v", raw, err)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return nil, usagef("-url: %q, want http://HOST:PORT or https://HOST:PORT (env %s)", raw, envURL)
	}
	if u.Host == "" {
		return nil, usagef("-url: %q has no host, want http://HOST:PORT (env %s)", raw, envURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("-url: %q, want the hub's base URL without query or fragment", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.Path = strings.TrimSuffix(u.Path, "/ws")
	u.RawPath = ""
	return u, nil
}
