// Package jsonenc appends JSON by hand, byte for byte as encoding/json
// writes it, for the encoders of the hot paths (records, frames) that
// must match encoding/json without its reflection. It imports no promlib
// package, so that the core event may use it.
//
// # Why internal/
//
// It is in internal/ and not below one package because the core event
// (records) and the frame codec ws/internal/wsframe both use it.
package jsonenc
