//go:build !linux

package main

// schedPolicy is known on Linux only.
func schedPolicy() string { return "" }
