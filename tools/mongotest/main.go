// Command mongotest runs a MongoDB-compatible server for tests: an embedded
// FerretDB with the SQLite backend, behind a wire-protocol proxy that runs
// one command at a time per database so that single operations are atomic
// as in MongoDB.
//
// Usage:
//
//	mongotest [-listen 127.0.0.1:0] [-data-dir DIR] [-url-file PATH] [-log-level error]
//
// Once the server answers, its mongodb:// URL is printed on stdout and, with
// -url-file, written to PATH. It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mongotest:", err)
		os.Exit(1)
	}
}

// run parses args, starts the server and serves until a signal arrives.
func run(args []string) error {
	fs := flag.NewFlagSet("mongotest", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "public `address` of the proxy (port 0 picks a free port)")
	dataDir := fs.String("data-dir", "", "`directory` for the SQLite files (default: a temporary directory removed on exit)")
	urlFile := fs.String("url-file", "", "write the server's mongodb:// URL to this `file` once it is ready")
	logLevel := fs.String("log-level", "error", "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *dataDir == "" {
		dir, err := os.MkdirTemp("", "mongotest-data-")
		if err != nil {
			return fmt.Errorf("creating data directory: %w", err)
		}
		defer os.RemoveAll(dir)
		*dataDir = dir
	}

	srv, err := Start(ctx, Config{ListenAddr: *listen, DataDir: *dataDir, Logger: logger})
	if err != nil {
		return err
	}

	if *urlFile != "" {
		if err := writeFileAtomic(*urlFile, srv.URL()+"\n"); err != nil {
			return errors.Join(err, srv.Close())
		}
	}
	fmt.Println(srv.URL())
	logger.Info("ready", slog.String("url", srv.URL()), slog.String("data_dir", *dataDir))

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case <-srv.Done():
	}
	return srv.Close()
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so a reader polling for path never sees a partial file.
func writeFileAtomic(path, data string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".mongotest-url-*")
	if err != nil {
		return fmt.Errorf("writing url file: %w", err)
	}
	defer os.Remove(f.Name()) // no-op once renamed

	if _, err := f.WriteString(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing url file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing url file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing url file: %w", err)
	}
	return nil
}
