package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrCopyConflict is wrapped by the error of a [Copy] whose destination
// holds another schema (or rule) at a version of a topic than the
// source; the message names the topic and version.
var ErrCopyConflict = errors.New("schema: copy: the destination differs from the source")

// CopyReport is what a [Copy] did.
type CopyReport struct {
	// Copied counts the versions added to the destination, Verified those
	// it held already and were checked equal.
	Copied   int `json:"copied"`
	Verified int `json:"verified"`
}

// Copy adds every version of every topic of src to dst, as they are:
// number, schema, rule and creation time, so that a registry over dst
// validates as one over src did. Versions dst holds already are checked:
// the same schema (as JSON, whatever its spacing) and rule pass, another
// is refused with an error wrapping ErrCopyConflict, naming the topic and
// version. So a copy interrupted and run again adds what is missing, and
// a second copy adds nothing. Stop registering schemas in the source
// while it runs (versions registered after it read them are not copied).
func Copy(ctx context.Context, dst, src Store) (CopyReport, error) {
	var rep CopyReport
	if dst == nil || src == nil {
		return rep, invalid("store", "copy needs a source and a destination")
	}
	all, err := src.All(ctx)
	if err != nil {
		return rep, fmt.Errorf("schema: copy: read the source: %w", err)
	}
	held := make(map[string]map[int]Version)
	for _, v := range all {
		have, ok := held[v.Topic]
		if !ok {
			vs, err := dst.Versions(ctx, v.Topic)
			if err != nil {
				return rep, fmt.Errorf("schema: copy: read %q in the destination: %w", v.Topic, err)
			}
			have = make(map[int]Version, len(vs))
			for _, d := range vs {
				have[d.Version] = d
			}
			held[v.Topic] = have
		}
		if d, ok := have[v.Version]; ok {
			if err := sameVersion(d, v); err != nil {
				return rep, err
			}
			rep.Verified++
			continue
		}
		if err := dst.Add(ctx, v); err != nil {
			return rep, fmt.Errorf("schema: copy: add version %d of %q: %w", v.Version, v.Topic, err)
		}
		rep.Copied++
	}
	return rep, nil
}

// sameVersion returns an error wrapping ErrCopyConflict unless d, held by
// the destination, is v.
func sameVersion(d, v Version) error {
	if d.Rule != v.Rule {
		return fmt.Errorf("%w: topic %q version %d has rule %q in the destination, %q in the source", ErrCopyConflict, v.Topic, v.Version, d.Rule, v.Rule)
	}
	var a, b bytes.Buffer
	if json.Compact(&a, d.Schema) != nil || json.Compact(&b, v.Schema) != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		return fmt.Errorf("%w: topic %q version %d has another schema in the destination than in the source", ErrCopyConflict, v.Topic, v.Version)
	}
	return nil
}
