package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// defaultReadyTimeout bounds the wait for FerretDB to answer its first ping.
const defaultReadyTimeout = 30 * time.Second

// Config configures a Server.
type Config struct {
	// ListenAddr is the public address of the serializing proxy, for
	// example "127.0.0.1:0" (port 0 picks a free port).
	ListenAddr string

	// DataDir is an existing directory for FerretDB's SQLite files.
	DataDir string

	// Logger receives FerretDB's and the proxy's logs; nil discards them.
	Logger *slog.Logger

	// ReadyTimeout bounds the wait for the server to answer a ping;
	// zero means 30 seconds.
	ReadyTimeout time.Duration
}

// Server is an embedded FerretDB (SQLite backend) listening on an internal
// loopback port, fronted by a Proxy on the public address.
type Server struct {
	url        string
	backendURL string

	cancel    context.CancelFunc
	done      chan struct{}
	err       error // set before done is closed
	closeOnce sync.Once
}

// Start starts FerretDB and the proxy in front of it, and returns once a
// ping through the proxy succeeds. ctx bounds the start-up only; the server
// runs until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	sqliteURL, err := sqliteURL(cfg.DataDir)
	if err != nil {
		return nil, err
	}

	fdb, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    logger.With(slog.String("component", "ferretdb")),
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	if err != nil {
		return nil, fmt.Errorf("creating FerretDB: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.ListenAddr, err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	s := &Server{
		url:    "mongodb://" + ln.Addr().String() + "/",
		cancel: cancel,
		done:   make(chan struct{}),
	}

	fdbDone := make(chan struct{})
	go func() {
		defer close(fdbDone)
		_ = fdb.Run(runCtx) // only returns once runCtx is canceled
	}()

	// FerretDB binds its listener in New, so its address is known by now.
	s.backendURL = fdb.MongoDBURI()
	backend, err := url.Parse(s.backendURL)
	if err != nil {
		cancel()
		<-fdbDone
		_ = ln.Close()
		return nil, fmt.Errorf("parsing FerretDB URL %q: %w", s.backendURL, err)
	}

	proxy := NewProxy(backend.Host, logger.With(slog.String("component", "proxy")))
	go func() {
		err := proxy.Serve(runCtx, ln)
		cancel() // a failed proxy takes FerretDB down with it
		<-fdbDone
		s.err = err
		close(s.done)
	}()

	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	if err := waitReady(ctx, s.url, timeout); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// URL returns the mongodb:// URL of the serializing proxy.
func (s *Server) URL() string { return s.url }

// BackendURL returns the mongodb:// URL of FerretDB itself, bypassing the
// proxy. Only tests comparing the two should need it.
func (s *Server) BackendURL() string { return s.backendURL }

// Done is closed once the server has stopped, by Close or by a failure.
func (s *Server) Done() <-chan struct{} { return s.done }

// Close stops the proxy and FerretDB, closing every connection, and waits
// for them. It returns the proxy's error, if it failed on its own.
func (s *Server) Close() error {
	s.closeOnce.Do(s.cancel)
	<-s.done
	return s.err
}

// sqliteURL turns a directory into the "file:" URI FerretDB's SQLite
// backend expects: absolute, and ending with a slash.
func sqliteURL(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no data directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving data directory: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("data directory %s is not a directory", abs)
	}

	// The data is thrown away with the server: a commit need not wait
	// for the disk (synchronous OFF keeps what is written across a crash
	// of the server's process, not of the machine). FerretDB adds its own
	// pragmas (WAL, busy timeout) to these.
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs) + "/", RawQuery: url.Values{"_pragma": {"synchronous(off)"}}.Encode()}
	return u.String(), nil
}

// waitReady pings the server at uri until it answers or timeout passes.
func waitReady(ctx context.Context, uri string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	client, err := mongo.Connect(options.Client().
		ApplyURI(uri).
		SetServerSelectionTimeout(timeout))
	if err != nil {
		return fmt.Errorf("creating client for readiness check: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()

	if err := client.Ping(ctx, nil); err != nil {
		return fmt.Errorf("server at %s not ready after %s: %w", uri, timeout, err)
	}
	return nil
}
