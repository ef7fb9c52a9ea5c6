// Command hub is promlib's event hub: an event bus behind the WebSocket
// gateway and the HTTP publish endpoint, on one listener.
//
//	hub [-addr 127.0.0.1:8080] [flags]
//
// Endpoints:
//
//	/ws, and / for WebSocket upgrades   the gateway (docs/PROTOCOL.md)
//	POST /publish/{topic}                JSON body -> {"id","seq"}
//	GET /replay, /export, /latest        replay and export by seq, latest by key (package replay)
//	GET /ops/                            live dashboard; /ops/topics, /ops/lag, ... (package ops)
//	GET /live/                           the processes of process.state, live in the browser (examples/livedash)
//	GET /metrics                         Prometheus metrics (package metrics)
//	GET /healthz                         gateway stats as JSON
//
// Storage (-store): a SQLite file (sqlite:PATH), PostgreSQL
// (postgres://...), MongoDB (mongodb://...) or memory. Without -store, a
// set MONGO_URL selects MongoDB, and otherwise the hub keeps its events in
// the SQLite file promlib.db of the working directory, so that they
// survive a restart with no setup. Beside the events, the hub drains the
// store's outbox (package outbox): the outbox collection on MongoDB, the
// promlib_outbox table on SQLite and PostgreSQL (created if absent).
// Services add rows in their own transactions, the hub publishes them. In
// memory there is no outbox.
//
// HTTP errors are {"error":{"code":"...","msg":"..."}}.
//
// With -demo the hub also runs the heartbeat -> process.state projector
// (examples/process) on three simulated processes, one of which stops
// beating and turns stale: subscribe to process.state to watch it.
//
// Environment (run hub -h for the flags):
//
//	HUB_ADDR      listen address when -addr is not given (default 127.0.0.1:8080)
//	JWT_SECRET    HMAC secret (HS256, at least 32 bytes) that JWTs are signed with
//	JWT_JWKS_URL  URL of the issuer's JSON Web Key Set (https, or http to loopback)
//	JWT_AUD       accepted audiences, comma-separated (aud must name one)
//	JWT_ISS       accepted issuers, comma-separated (iss must be one)
//	JWT_LEEWAY    clock skew allowed on exp and nbf when -jwt-leeway is not given
//	WS_TOKEN      the static token clients send with AUTH (and HTTP publish as
//	              "Authorization: Bearer"), allowed everything
//	MONGO_URL     keep events in MongoDB at this URL when -store is not given
//	MONGO_DB      the MongoDB database (default promlib)
//	PG_SCHEMA     the PostgreSQL schema of -store postgres://... (default public)
//
// Authentication: JWT_SECRET and/or JWT_JWKS_URL select JWTs, checked on
// AUTH and on every HTTP endpoint but /metrics and /healthz; each token's
// "scope"/"scopes" (such as "publish:heartbeat.* subscribe:process.**
// replay:** inspect:** admin:jobs") or "policy" claim says what it may
// publish, subscribe to, replay, inspect and administer (ops redrive). A connection whose token expires (exp
// plus the leeway) is closed with 4401 unless the client sent AUTH with a
// fresh token of the same subject. WS_TOKEN is the simple static-token
// mode. Setting both is refused; setting neither accepts anyone (logged
// loudly): WebSocket clients need no AUTH, HTTP requests no token.
//
// Refused AUTH are bounded: -max-failed-auth (3) in a row close the
// connection with 4403, and -failed-auth-rate / -failed-auth-burst (10/s,
// 20) limit them per client address, beyond which AUTH is answered
// rate_limited unchecked. The client address is the TCP peer's; behind a
// proxy, name it with -trusted-proxies so that its X-Forwarded-For or
// Forwarded header counts.
//
// TLS: with -tls-cert and -tls-key the hub serves HTTPS and wss:// itself
// (TLS 1.2 or later, HTTP/1.1). The pair is loaded again when either
// file changes (looked at, at most once a second, on a handshake) or on
// SIGHUP; a pair that does not load is logged and the previous one kept.
//
// SIGINT or SIGTERM shut the hub down gracefully: no new connections,
// open ones are closed with 1001 and their in-flight events go back to
// their groups, then the bus commits its cursors.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/internal/cli"
	"github.com/promethean/promlib/examples/livedash"
	"github.com/promethean/promlib/internal/clientaddr"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/ratelimit"
	"github.com/promethean/promlib/ws"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("hub", run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil))
}

// settings are the hub's flags.
type settings struct {
	addr         string
	ackTimeout   time.Duration
	maxInFlight  int
	partitions   int
	readLimit    int64
	sendQueue    int
	authTimeout  time.Duration
	pingInterval time.Duration
	wsWriteTO    time.Duration
	publishRate  float64
	topicRate    float64
	origins      string
	allowedHosts string
	// Refused AUTH: per connection, and per client address.
	maxFailedAuth   int
	failedAuthRate  float64
	failedAuthBurst int
	trustedProxies  []netip.Prefix
	shutdown        time.Duration
	readTimeout     time.Duration
	writeTimeout    time.Duration
	idleTimeout     time.Duration
	logLevel        string
	tlsCert         string
	tlsKey          string
	jwtLeeway       time.Duration
	demo            bool
	ops             opsSettings
	store           storeSpec
}

func parseFlags(args []string, getenv func(string) string, out io.Writer) (*settings, error) {
	s := &settings{}
	fs := flag.NewFlagSet("hub", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := getenv("HUB_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	fs.StringVar(&s.addr, "addr", addr, "listen address (env HUB_ADDR)")
	fs.DurationVar(&s.ackTimeout, "ack-timeout", ws.DefaultAckTimeout, "lease of a delivery in a group created by a SUBSCRIBE without ackTimeoutMs (an existing group keeps its own)")
	fs.IntVar(&s.maxInFlight, "max-inflight", ws.DefaultMaxInFlight, "most un-acked events per subscription")
	fs.IntVar(&s.partitions, "partitions", 8, "partitions per topic: the subscriptions of a group share them, one subscription per partition at a time, so at most this many subscribers of a group get events (order holds per key)")
	fs.Int64Var(&s.readLimit, "read-limit", ws.DefaultReadLimit, "largest client frame in bytes (larger closes with 1009)")
	fs.IntVar(&s.sendQueue, "send-queue", ws.DefaultSendQueue, "frames queued per connection before deliveries wait")
	fs.DurationVar(&s.authTimeout, "auth-timeout", ws.DefaultAuthTimeout, "time a connection has to AUTH (then closed with 4408)")
	fs.DurationVar(&s.pingInterval, "ping", ws.DefaultPingInterval, "keepalive ping interval (negative disables)")
	fs.DurationVar(&s.wsWriteTO, "ws-write-timeout", ws.DefaultWriteTimeout, "deadline of every WebSocket write; a client that does not read within it is closed with 1008 and its in-flight events go back to their groups")
	fs.Float64Var(&s.publishRate, "publish-rate", 0, "publishes per second per connection (0: no limit)")
	fs.Float64Var(&s.topicRate, "topic-rate", 0, "publishes per second per topic, over all connections (0: no limit)")
	fs.StringVar(&s.origins, "origins", "", "comma-separated origin patterns browsers may connect from")
	fs.IntVar(&s.maxFailedAuth, "max-failed-auth", ws.DefaultMaxFailedAuth, "refused AUTH in a row that close a connection (with 4403)")
	fs.Float64Var(&s.failedAuthRate, "failed-auth-rate", ws.DefaultFailedAuthRate, "refused AUTH per second per client address; beyond it AUTH is answered rate_limited unchecked")
	fs.IntVar(&s.failedAuthBurst, "failed-auth-burst", ws.DefaultFailedAuthBurst, "refused AUTH per client address in a burst")
	var trusted string
	fs.StringVar(&trusted, "trusted-proxies", "", "comma-separated CIDR prefixes (or addresses) of the proxies whose Forwarded / X-Forwarded-For header names the client address; by default none: the client address is the TCP peer's")
	fs.StringVar(&s.allowedHosts, "allowed-hosts", "", "without authentication, comma-separated host names the hub answers to besides localhost and IP addresses (a guard against DNS rebinding)")
	fs.DurationVar(&s.shutdown, "shutdown-timeout", 10*time.Second, "how long a graceful shutdown may take")
	fs.DurationVar(&s.readTimeout, "read-timeout", 30*time.Second, "longest time to read an HTTP request, body included; a body that trickles in is cut off")
	fs.DurationVar(&s.writeTimeout, "write-timeout", 30*time.Second, "longest time to write an HTTP response; an export gets this much for each page it streams")
	fs.DurationVar(&s.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive HTTP connection is kept open")
	fs.StringVar(&s.logLevel, "log", "info", "log level: debug, info, warn or error")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS and wss:// (with -tls-key); reloaded when the file changes or on SIGHUP")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM private key file of -tls-cert")
	fs.BoolVar(&s.ops.readOnly, "ops-read-only", false, "turn the ops admin actions off (redrive, purge, cursor reset, group delete answer 403)")
	fs.DurationVar(&s.ops.chartWindow, "ops-chart-window", ops.DefaultChartWindow, "history of the dashboard's charts the hub keeps in memory (up to 24h)")
	fs.DurationVar(&s.ops.chartInterval, "ops-chart-interval", ops.DefaultChartInterval, "how often the hub samples the dashboard's charts")
	fs.StringVar(&s.ops.chartGroups, "ops-chart-groups", "", "comma-separated topic/group whose lag the dashboard charts (default: every group)")
	var storeFlag string
	fs.StringVar(&storeFlag, "store", "", "where events, cursors and leases are kept: "+storeUsage+" (default: MONGO_URL when set, else sqlite:"+defaultSQLiteFile+" in the working directory)")
	fs.BoolVar(&s.demo, "demo", false, "run the heartbeat -> process.state projector with three simulated processes (one stops beating)")
	var leeway time.Duration
	if v := getenv("JWT_LEEWAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, cli.Usagef("JWT_LEEWAY: %q, want a duration of 0 or more, such as 30s", v)
		}
		leeway = d
	}
	fs.DurationVar(&s.jwtLeeway, "jwt-leeway", leeway, "clock skew allowed on a JWT's exp and nbf; a connection ends at exp plus this (env JWT_LEEWAY)")
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: hub [flags]\n\nDashboard: http://%s/ops/ in a browser (with authentication, append #token=<token>)\n", addr)
		fmt.Fprint(out, `

promlib's event hub: the WebSocket gateway at /ws (and at / for upgrades),
POST /publish/{topic}, GET /replay, /export and /latest, the ops dashboard
and endpoints under /ops/, Prometheus metrics at /metrics, GET /healthz.
HTTP errors are {"error":{"code":"...","msg":"..."}}. The HTTP endpoints
take the same tokens as the gateway (Authorization: Bearer); /metrics and
/healthz are open.

Environment:
  HUB_ADDR      listen address when -addr is not given (default 127.0.0.1:8080)

  Authentication, one of (both JWT_* and WS_TOKEN set is an error; neither
  means anyone may connect and do anything, with no AUTH frame and no token):
  JWT_SECRET    HMAC secret (HS256, at least 32 bytes) of the JWTs
  JWT_JWKS_URL  URL of the issuer's JSON Web Key Set (https, or http to a
                loopback host); may be combined with JWT_SECRET
  JWT_AUD       accepted audiences, comma-separated (a token's aud must name one)
  JWT_ISS       accepted issuers, comma-separated (a token's iss must be one)
  JWT_LEEWAY    default of -jwt-leeway
                A JWT's "scope"/"scopes" claim ("publish:a.* subscribe:b.**
                replay:** inspect:** admin:b.*") or "policy" claim says what
                it may publish, subscribe to, replay, and inspect or
                administer (redrive, purge, cursor reset, group
                delete) under /ops/.
                A connection is closed with 4401 when its token expires (exp
                plus the leeway) unless the client sent AUTH with a fresh
                token of the same subject.
  WS_TOKEN      static token for AUTH and for the HTTP endpoints
                (Authorization: Bearer); it may do everything

  Refused AUTH: -max-failed-auth in a row close a connection with 4403;
  -failed-auth-rate and -failed-auth-burst limit them per client address
  (beyond: rate_limited). The client address is the TCP peer's, or, from a
  proxy of -trusted-proxies, the one its X-Forwarded-For/Forwarded names.

  TLS: -tls-cert and -tls-key serve HTTPS and wss:// with a PEM pair,
  loaded again when either file changes or on SIGHUP.

  Storage: -store says where events, cursors and leases are kept:
    -store sqlite:PATH          a SQLite file (created if absent)
    -store postgres://...       PostgreSQL (also postgresql://), in schema PG_SCHEMA
    -store mongodb://...        MongoDB (also mongodb+srv://), in database MONGO_DB
    -store memory               in memory: lost when the hub stops
  Without -store, a set MONGO_URL selects MongoDB, and otherwise the hub
  keeps them in the SQLite file promlib.db of the working directory, so
  events survive a restart with no setup. The hub drains the store's
  outbox: the collection outbox on MongoDB, the table promlib_outbox on
  SQLite and PostgreSQL (created if absent); in memory there is none.
  MONGO_URL     MongoDB URL used when -store is not given
  MONGO_DB      MongoDB database (default promlib)
  PG_SCHEMA     PostgreSQL schema of the store's tables (default public)

Examples:
  hub -demo                                   # open access on 127.0.0.1:8080, events in ./promlib.db
  hub -store postgres://hub@db.internal/events
  WS_TOKEN=secret hub -addr :8443 -tls-cert cert.pem -tls-key key.pem
  JWT_SECRET=... hub -trusted-proxies 10.0.0.0/8 -publish-rate 100

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args, out); err != nil {
		return nil, err
	}
	if err := s.validate(trusted); err != nil {
		return nil, err
	}
	storeGiven := false
	fs.Visit(func(f *flag.Flag) { storeGiven = storeGiven || f.Name == "store" })
	var err error
	if s.store, err = parseStore(storeFlag, storeGiven, getenv); err != nil {
		return nil, err
	}
	return s, nil
}

// validate checks every flag; its error is a one-line [cli.UsageError]
// naming the first bad flag and what it allows.
func (s *settings) validate(trusted string) error {
	if s.addr == "" {
		return cli.Usagef("-addr: empty, want a listen address such as 127.0.0.1:8080 (or set HUB_ADDR)")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return cli.Usagef("-log: %q, want debug, info, warn or error", s.logLevel)
	}
	if s.jwtLeeway < 0 {
		return cli.Usagef("-jwt-leeway: %v is negative, want 0 or more, such as 30s", s.jwtLeeway)
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return cli.Usagef("-tls-cert and -tls-key: give both (serve TLS) or neither (plain HTTP)")
	}
	if s.pingInterval == 0 {
		return cli.Usagef("-ping: 0s, want a duration above 0, such as 30s, or a negative one to disable pings")
	}
	if s.partitions < 1 || s.partitions > maxPartitions {
		return cli.Usagef("-partitions: %d, want 1 to %d", s.partitions, maxPartitions)
	}
	if err := cli.First(
		checkAddr(s.addr),
		cli.Positive("ack-timeout", s.ackTimeout, "30s"),
		cli.Positive("auth-timeout", s.authTimeout, "10s"),
		cli.Positive("ws-write-timeout", s.wsWriteTO, "10s"),
		cli.Positive("shutdown-timeout", s.shutdown, "10s"),
		cli.Positive("read-timeout", s.readTimeout, "30s"),
		cli.Positive("write-timeout", s.writeTimeout, "30s"),
		cli.Positive("idle-timeout", s.idleTimeout, "120s"),
		cli.AtLeast("max-inflight", s.maxInFlight, 1),
		cli.AtLeast("read-limit", s.readLimit, minReadLimit),
		cli.AtLeast("send-queue", s.sendQueue, 1),
		cli.AtLeast("max-failed-auth", s.maxFailedAuth, 1),
		cli.AtLeast("failed-auth-burst", s.failedAuthBurst, 1),
		cli.Rate("failed-auth-rate", s.failedAuthRate, ""),
		cli.Rate("publish-rate", s.publishRate, "no limit"),
		cli.Rate("topic-rate", s.topicRate, "no limit"),
		s.ops.validate(),
		checkOrigins(s.origins),
		checkHosts(s.allowedHosts),
	); err != nil {
		return err
	}
	var err error
	if s.trustedProxies, err = clientaddr.ParsePrefixes(splitList(trusted)); err != nil {
		return cli.Usagef("-trusted-proxies: %v", err)
	}
	return nil
}

// minReadLimit is the smallest -read-limit: a frame smaller than 1 KiB
// would not hold an AUTH with a JWT.
const minReadLimit = 1024

// maxPartitions is the most -partitions, as event.Config.Validate allows.
const maxPartitions = 4096

// checkAddr checks -addr as net.Listen will read it: host:port, the host
// empty (every interface), an IP address or a name, the port a number up
// to 65535, a service name, or empty (any free port).
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("-addr: %q, want host:port such as 127.0.0.1:8080 or :8080 (%v)", addr, err)
	}
	if strings.ContainsAny(host, "/ ") {
		return cli.Usagef("-addr: %q, want host:port such as 127.0.0.1:8080 or :8080 (host %q)", addr, host)
	}
	if port == "" {
		return nil
	}
	if port[0] >= '0' && port[0] <= '9' {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return cli.Usagef("-addr: %q, want a port from 0 to 65535, such as 127.0.0.1:8080", addr)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return cli.Usagef("-addr: %q, want a port from 0 to 65535, such as 127.0.0.1:8080 (%v)", addr, err)
	}
	return nil
}

// checkOrigins checks the patterns of -origins (path.Match syntax, as the
// gateway matches them).
func checkOrigins(origins string) error {
	for _, p := range splitList(origins) {
		if _, err := path.Match(p, ""); err != nil {
			return cli.Usagef("-origins: pattern %q: %v; want host patterns such as app.example.com or *.example.com", p, err)
		}
	}
	return nil
}

// checkHosts checks the names of -allowed-hosts: host names, compared with
// a request's Host without its port.
func checkHosts(hosts string) error {
	for _, h := range splitList(hosts) {
		if strings.ContainsAny(h, ":/ @") {
			return cli.Usagef("-allowed-hosts: %q, want host names without scheme or port, such as hub.internal", h)
		}
	}
	return nil
}

// validate checks the ops flags as ops.Config.Validate would, before
// anything is opened.
func (o *opsSettings) validate() error {
	const maxPoints = 20000 // ops keeps at most this many points per series
	switch {
	case o.chartWindow <= 0 || o.chartWindow > 24*time.Hour:
		return cli.Usagef("-ops-chart-window: %v, want a duration above 0 and up to 24h, such as 15m", o.chartWindow)
	case o.chartInterval < 10*time.Millisecond:
		return cli.Usagef("-ops-chart-interval: %v, want 10ms or more, such as 5s", o.chartInterval)
	case o.chartInterval > o.chartWindow:
		return cli.Usagef("-ops-chart-interval: %v is longer than -ops-chart-window (%v)", o.chartInterval, o.chartWindow)
	case o.chartWindow/o.chartInterval > maxPoints:
		return cli.Usagef("-ops-chart-interval: %v gives more than %d points in -ops-chart-window (%v); want %v or more",
			o.chartInterval, maxPoints, o.chartWindow, (o.chartWindow+maxPoints-1)/maxPoints)
	}
	for _, g := range splitList(o.chartGroups) {
		t, grp, ok := strings.Cut(g, "/")
		if !ok {
			return cli.Usagef("-ops-chart-groups: %q, want topic/group (comma-separated)", g)
		}
		if err := errors.Join(event.ValidateTopic(t), event.ValidateGroup(grp)); err != nil {
			return cli.Usagef("-ops-chart-groups: %q, want topic/group: %s", g, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	return nil
}

// run starts the hub and serves until ctx ends; ready, if set, gets the
// listening address.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) error {
	s, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.logLevel)) // checked by parseFlags
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// Whatever a bad flag or variable can fail is tried before the store
	// is opened (or its SQLite file created): the TLS pair, the auth
	// settings, the listen address.
	var certs *certReloader
	if s.tlsCert != "" {
		if certs, err = newCertReloader(s.tlsCert, s.tlsKey, log); err != nil {
			return cli.Usagef("%v", err)
		}
		defer certs.watchSIGHUP()()
	}
	authn, err := setupAuth(getenv, s.jwtLeeway, log)
	if err != nil {
		// The variables are the hub's settings, as its flags are.
		return cli.Usagef("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	defer authn.close()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", s.addr, err)
	}
	closeLn := func() { _ = ln.Close() }
	hs, err := openStore(ctx, s.store, getenv, log)
	if err != nil {
		closeLn()
		return err
	}
	defer hs.close()
	obs, err := newObservability()
	if err != nil {
		closeLn()
		return err
	}
	bus, err := event.NewBus(hs.store, obs.bus.Instrument(event.Config{Logger: log, Partitions: s.partitions}))
	if err != nil {
		closeLn()
		return err
	}
	fail := func(err error) error {
		closeLn()
		_ = bus.Close(context.Background())
		return err
	}
	if err := obs.bus.Watch(bus); err != nil {
		return fail(err)
	}

	origins := splitList(s.origins)
	gw, err := ws.NewGateway(ws.Config{
		Bus: bus, Verifier: authn.verifier, AckTimeout: s.ackTimeout, MaxInFlight: s.maxInFlight,
		ReadLimit: s.readLimit, AuthTimeout: s.authTimeout, SendQueue: s.sendQueue,
		PingInterval: s.pingInterval, WriteTimeout: s.wsWriteTO, OriginPatterns: origins, Logger: log, Observer: obs.gw,
		MaxFailedAuth:   s.maxFailedAuth,
		FailedAuthLimit: ratelimit.Limit{Rate: s.failedAuthRate, Burst: s.failedAuthBurst},
		TrustedProxies:  s.trustedProxies,
		RateLimits: ws.RateLimits{
			Publish:      ratelimit.Limit{Rate: s.publishRate},
			TopicPublish: ratelimit.Limit{Rate: s.topicRate},
		},
	})
	if err != nil {
		return fail(err)
	}

	if err := obs.gw.Watch(gw.Stats); err != nil {
		return fail(err)
	}
	mux := routes(gw)
	stopCharts, err := mountProduct(mux, bus, gw, obs, verifierFor(authn), s.writeTimeout, s.ops, log)
	if err != nil {
		return fail(err)
	}
	defer stopCharts()

	var stopDrainer func()
	if hs.outbox == nil {
		log.Info("no outbox drainer: events in memory have no outbox beside them", "store", hs.name)
	} else {
		if stopDrainer, err = startDrainer(ctx, hs, bus, obs, log); err != nil {
			return fail(err)
		}
	}
	var stopDemo func()
	if s.demo {
		if stopDemo, err = startDemo(ctx, bus, log); err != nil {
			if stopDrainer != nil {
				stopDrainer()
			}
			return fail(err)
		}
	}
	// Every wait on a client is bounded, so that idle or trickling clients
	// cannot hold file descriptors for ever. WebSocket connections are
	// hijacked, which clears these deadlines: the gateway keeps its own.
	var handler http.Handler = mux
	if authn.mode == modeOpen {
		handler = guardOpenMode(mux, splitList(s.allowedHosts))
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(10*time.Second, s.readTimeout),
		ReadTimeout:       s.readTimeout,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       s.idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	scheme, web := "ws://", "http://"
	if certs != nil {
		srv.TLSConfig = certs.tlsConfig()
		scheme, web = "wss://", "https://"
	}
	at := browserAddr(ln.Addr().String())
	log.Info("hub listening", "addr", ln.Addr().String(), "ws", scheme+at+"/ws",
		"publish", web+at+"/publish/{topic}", "dashboard", web+at+"/ops/", "live", web+at+"/live/")
	if authn.mode != modeOpen {
		log.Info("the dashboard and the live page take a token in the URL's fragment", "dashboard", web+at+"/ops/#token=<token>")
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() {
		if certs != nil {
			served <- srv.ServeTLS(ln, "", "")
			return
		}
		served <- srv.Serve(ln)
	}()

	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("hub shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdown)
	defer cancel()
	errs := []error{err}
	if err == nil {
		errs = append(errs, srv.Shutdown(sctx), <-served)
	}
	errs = append(errs, gw.Shutdown(sctx))
	if stopDemo != nil {
		stopDemo()
	}
	if stopDrainer != nil {
		stopDrainer()
	}
	errs = append(errs, bus.Close(sctx))
	for i, e := range errs {
		if errors.Is(e, http.ErrServerClosed) {
			errs[i] = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("hub stopped")
	return nil
}

// browserAddr is the host:port of a listening address that a browser on
// this machine can open: an unspecified host (every interface) becomes
// localhost.
func browserAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// routes mounts the gateway and HTTP publish, which authenticate with
// hubAuth.verifier; replay, export, latest and ops take the same verifier
// (mountProduct), so that every endpoint has the same tokens, the same
// rules and the same error body.
func routes(gw *ws.Gateway) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /publish/{topic}", gw.PublishHandler())
	mux.Handle("/ws", gw)
	mux.Handle("GET /live/", http.StripPrefix("/live", livedash.Handler()))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(gw.Stats())
	})
	// Clients of the seed documents dial the bare host.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			gw.ServeHTTP(w, r)
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "promlib hub: WebSocket at /ws (or /), POST /publish/{topic}, GET /replay, /export, /latest, /ops/, /live/, /metrics, /healthz")
	})
	return mux
}
