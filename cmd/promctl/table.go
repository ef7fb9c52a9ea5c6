package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes aligned columns for people.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

// row writes one row; each cell is a string or is formatted with %v.
func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		switch v := c.(type) {
		case string:
			s[i] = cell(v)
		default:
			s[i] = cell(fmt.Sprint(v))
		}
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// cell keeps a value on its line and in its column: no tab, no newline;
// an empty value is shown as "-".
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// age formats a duration in milliseconds for a table: "-" for 0.
func age(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// stamp formats a time in Unix milliseconds: "-" for 0.
func stamp(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// count formats a count, with "+" when it is a lower bound.
func count(n uint64, more bool) string {
	s := strconv.FormatUint(n, 10)
	if more {
		s += "+"
	}
	return s
}

func uitoa(n uint64) string { return strconv.FormatUint(n, 10) }

// humanBytes formats a size in bytes: 512 B, 1.5 KiB, 3.2 MiB, ...
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
