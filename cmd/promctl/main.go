package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// A command is one subcommand of promctl: "promctl NAME ...". Each lives
// in a file of its own (cmd_NAME.go) that registers it from init.
type command struct {
	// Name is the word after promctl.
	Name string
	// Synopsis is what follows the name in the usage line, such as
	// "TOPIC [PAYLOAD] [-key K] [-header k=v]...".
	Synopsis string
	// Summary is one line for "promctl help".
	Summary string
	// Help is what "promctl NAME -h" prints between the usage line and
	// the flags (optional).
	Help string
	// Run runs the command with the arguments after its name. It builds
	// its flags with [env.flags] and parses them with [env.parse].
	Run func(ctx context.Context, e *env, args []string) error
}

// commands are promctl's subcommands by name.
var commands = map[string]*command{}

// register adds c to the commands; a second command of the same name is
// a programming error.
func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("promctl: command " + c.Name + " registered twice")
	}
	commands[c.Name] = c
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command failed (the hub refused, a connection failed, ...)
	exitUsage = 2 // a bad command line
)

// Environment variables.
const (
	envURL   = "PROMLIB_URL"
	envToken = "PROMLIB_TOKEN"
)

// defaultURL is the hub's default listen address (examples/hub -addr).
const defaultURL = "http://127.0.0.1:8080"

// run runs promctl with args (without the program name) and returns its
// exit status: 0, 1 when the command failed, 2 for a bad command line.
// Errors are written to stderr on one line.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, url: os.Getenv(envURL), token: os.Getenv(envToken)}
	if e.url == "" {
		e.url = defaultURL
	}
	defer e.close()
	err := e.dispatch(ctx, args)
	return report(stderr, err)
}

// dispatch parses the global flags and runs the command they are
// followed by.
func (e *env) dispatch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("promctl", flag.ContinueOnError)
	fs.StringVar(&e.url, "url", e.url, "the hub's base `URL` (env "+envURL+")")
	fs.Func("token", "bearer `TOKEN` for the hub (env "+envToken+")", func(v string) error {
		e.token = v
		return nil
	})
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		printUsage(e.stdout)
		return errHelp
	case err != nil:
		return usagef("%v (see promctl help)", err)
	}
	if fs.NArg() == 0 {
		return usagef("missing command: promctl COMMAND (see promctl help)")
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return e.help(rest)
	}
	c, ok := commands[name]
	if !ok {
		return usagef("unknown command %q (want one of %s; see promctl help)", name, strings.Join(commandNames(), ", "))
	}
	e.cmd = c
	err := c.Run(ctx, e, rest)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return err
	case errors.As(err, &ue):
		return usagef("%s: %s", c.Name, ue.msg)
	}
	return fmt.Errorf("%s: %w", c.Name, err)
}

// help serves "promctl help [COMMAND]".
func (e *env) help(args []string) error {
	switch len(args) {
	case 0:
		printUsage(e.stdout)
		return errHelp
	case 1:
		c, ok := commands[args[0]]
		if !ok {
			return usagef("help: unknown command %q (want one of %s)", args[0], strings.Join(commandNames(), ", "))
		}
		e.cmd = c
		return c.Run(context.Background(), e, []string{"-h"})
	}
	return usagef("help: unexpected argument %q (promctl help [COMMAND])", args[1])
}

func commandNames() []string { return slices.Sorted(maps.Keys(commands)) }

// printUsage writes promctl's usage: the global flags and the commands.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `usage: promctl [-url URL] [-token TOKEN] COMMAND [ARGS] [FLAGS]

promctl operates a promlib hub over its HTTP endpoints and its WebSocket API.

Commands:
`)
	tw := newTable(w)
	for _, name := range commandNames() {
		c := commands[name]
		tw.row("  "+c.Name, c.Summary)
	}
	_ = tw.flush()
	fmt.Fprintf(w, `
Global flags (also accepted after the command):
  -url URL       the hub's base URL (env %s, default %s)
  -token TOKEN   bearer token for the hub (env %s)

"promctl COMMAND -h" or "promctl help COMMAND" describes a command.
Errors are one line on stderr; exit status 1 when a command fails, 2 for
a bad command line.
`, envURL, defaultURL, envToken)
}

// report writes err on one line to w and returns the exit status.
func report(w io.Writer, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(w, "promctl: %s\n", oneLine(err.Error()))
		return exitUsage
	}
	fmt.Fprintf(w, "promctl: %s\n", oneLine(err.Error()))
	return exitError
}

// oneLine folds the lines of s into one.
func oneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s))
}
