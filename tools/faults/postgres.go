package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is a throwaway PostgreSQL cluster the harness started, as
// tools/pgtest/with-postgres.sh starts one: initdb in a temporary
// directory, a free loopback port, no Unix socket, trust for the user
// promlib; run as the user postgres (PGTEST_USER) when the harness runs
// as root, since PostgreSQL refuses to run as root. Knowing its data
// directory, the harness can restart it (pg_ctl restart -m immediate).
type cluster struct {
	bin  string   // directory of initdb and pg_ctl, with a trailing slash; "" for PATH
	as   []string // runuser -u USER --, or nothing
	dir  string
	opts string
	url  string
}

// pgBinDir finds initdb and pg_ctl: on PATH, or else in the newest
// Debian install (/usr/lib/postgresql/NN/bin).
func pgBinDir() (string, error) {
	_, e1 := exec.LookPath("initdb")
	_, e2 := exec.LookPath("pg_ctl")
	if e1 == nil && e2 == nil {
		return "", nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d + "/", nil
		}
	}
	return "", fmt.Errorf("no initdb and pg_ctl on PATH nor a Debian postgresql install: install postgresql-15 or set PG_URL")
}

// startCluster makes and starts a cluster.
func startCluster(ctx context.Context) (*cluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "faults-pg-")
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir}
	if os.Getuid() == 0 {
		name := os.Getenv("PGTEST_USER")
		if name == "" {
			name = "postgres"
		}
		u, err := user.Lookup(name)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("run PostgreSQL as %s (it refuses root): %w", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		c.as = []string{"runuser", "-u", name, "--"}
	}
	if out, err := c.command(ctx, bin+"initdb", "-D", c.data(), "-U", "promlib", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	// Unlike the test cluster, commits are synchronous: an immediate
	// restart drops what is in the server's WAL buffers, which with
	// synchronous_commit=off holds commits already acknowledged. fsync
	// stays off: the faults end processes, not the machine, and what
	// was written is in the kernel's cache.
	c.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories= -c fsync=off -c synchronous_commit=on -c max_connections=300 -c shared_buffers=64MB", port)
	if err := c.pgctl(ctx, "start"); err != nil {
		c.stop()
		return nil, err
	}
	c.url = fmt.Sprintf("postgres://promlib@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, nil
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, c.as...), name), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// pgctl runs pg_ctl's action (start, or restart -m immediate) and waits
// for the server to accept connections.
func (c *cluster) pgctl(ctx context.Context, action string) error {
	args := []string{"-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-o", c.opts, "-w", "-t", "60"}
	if action == "restart" {
		args = append(args, "-m", "immediate")
	}
	args = append(args, action)
	cmd := c.command(ctx, c.bin+"pg_ctl", args...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("pg_ctl %s: %w: %s\nserver log:\n%s", action, err, stderr.String(), tail(string(log), 4000))
	}
	return nil
}

// restart restarts the server as a crash would: pg_ctl restart -m
// immediate (no checkpoint; the server recovers from its WAL).
func (c *cluster) restart(ctx context.Context) error { return c.pgctl(ctx, "restart") }

// stop stops the server at once and removes the cluster.
func (c *cluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.command(ctx, c.bin+"pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	_ = cmd.Run()
	_ = os.RemoveAll(c.dir)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// withAppName returns the PostgreSQL connection string pgURL (a URL or
// keyword/value pairs) with application_name set to app: the name the
// harness finds a process's connections by in pg_stat_activity.
func withAppName(pgURL, app string) (string, error) {
	if strings.HasPrefix(pgURL, "postgres://") || strings.HasPrefix(pgURL, "postgresql://") {
		u, err := url.Parse(pgURL)
		if err != nil {
			return "", fmt.Errorf("PG_URL: %w", err)
		}
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return pgURL + " application_name=" + app, nil
}

// pgExec runs one statement on a new connection to pgURL and returns the
// first column of its single row (0 for none).
func pgExec(ctx context.Context, pgURL, query string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// terminateBackends ends every connection whose application_name is app
// and returns how many it ended.
func terminateBackends(ctx context.Context, pgURL, app string) (int64, error) {
	return pgExec(ctx, pgURL, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, app)
}

// dropSchema drops the run's schema and everything in it.
func dropSchema(ctx context.Context, pgURL, schema string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}
