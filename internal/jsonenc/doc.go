// Package jsonenc appends JSON by hand, byte for byte as encoding/json
// writes it, for the encoders of the hot paths (records, frames) that
// must match encoding/json without its reflection. It imports no promlib
// package, so that the core event may use it.
package jsonenc
