package main

import (
	"errors"
	"fmt"
)

// errHelp is returned after -h printed a usage: exit status 0.
var errHelp = errors.New("promctl: help requested")

// usageError is a bad command line: exit status 2. Its message is one
// line that names the flag or argument.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// hubError is an error the hub answered: its HTTP status and the code and
// message of its JSON error body ({"error":{"code","msg"}}), or of a
// WebSocket ERR frame (status 0).
type hubError struct {
	Status int
	Code   string
	Msg    string
}

func (e *hubError) Error() string {
	if e.Status == 0 {
		return e.Code + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Msg, e.Status)
}
