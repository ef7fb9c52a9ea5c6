// Package cli is what promlib's example programs share about their
// command lines: parsing that turns every mistake into one line naming
// the flag and what it allows, and the exit statuses (2 for a bad command
// line, 1 for a failure, 0 after -h).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// A UsageError is a bad command line: a flag value out of its range, an
// unknown flag, an argument the program takes none of. Its message is one
// line that names the flag and what it allows. Programs exit with 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a [UsageError].
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Parse parses args with fs. A parse error (unknown flag, malformed
// value) and any positional argument are a [UsageError] of one line; -h
// prints fs.Usage to help and returns [flag.ErrHelp].
func Parse(fs *flag.FlagSet, args []string, help io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(help)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	case err != nil:
		return &UsageError{Msg: err.Error() + " (see -h)"}
	case fs.NArg() > 0:
		return Usagef("unexpected argument %q: %s takes flags only (see -h)", fs.Arg(0), fs.Name())
	}
	return nil
}

// Exit ends the program named prog after err: nothing for nil, 0 for
// [flag.ErrHelp], 2 with "prog: msg" for a [UsageError], 1 with
// "prog: err" otherwise.
func Exit(prog string, err error) {
	code := ExitCode(err)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	}
	if err != nil {
		os.Exit(code)
	}
}

// ExitCode is the exit status of a program that ended with err.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// Positive checks a duration flag that must be above 0.
func Positive(name string, d time.Duration, example string) error {
	if d <= 0 {
		return Usagef("-%s: %v, want a duration above 0, such as %s", name, d, example)
	}
	return nil
}

// NotNegative checks a duration flag where 0 has a meaning of its own.
func NotNegative(name string, d time.Duration, zero string) error {
	if d < 0 {
		return Usagef("-%s: %v, want a duration of 0 (%s) or above", name, d, zero)
	}
	return nil
}

// AtLeast checks an integer flag against its smallest value.
func AtLeast[T int | int64](name string, v, min T) error {
	if v < min {
		return Usagef("-%s: %d, want %d or more", name, v, min)
	}
	return nil
}

// Rate checks a rate flag: finite and at least 0 when zero (the meaning
// of 0) is given, above 0 otherwise.
func Rate(name string, v float64, zero string) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return Usagef("-%s: %v, want a finite number per second", name, v)
	case zero != "" && v < 0:
		return Usagef("-%s: %v, want 0 (%s) or a number per second above 0", name, v, zero)
	case zero == "" && v <= 0:
		return Usagef("-%s: %v, want a number per second above 0", name, v)
	}
	return nil
}

// First returns the first error that is not nil.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
