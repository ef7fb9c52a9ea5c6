package acl

import (
	"strings"

	"github.com/promethean/promlib/event"
)

// MaxPatternSegments is the largest number of segments a pattern can have:
// a pattern is at most [event.MaxNameLen] characters long, like a topic.
const MaxPatternSegments = (event.MaxNameLen + 1) / 2

type segKind uint8

const (
	segLiteral segKind = iota // the segment itself
	segOne                    // "*": exactly one segment
	segMany                   // "**": zero or more segments
)

type segment struct {
	kind segKind
	lit  string
}

// Pattern is a compiled topic (or group) pattern: segments separated by '.',
// where a segment "*" matches exactly one segment and "**" matches zero or
// more, anywhere in the pattern. Any other segment matches itself. Build one
// with [CompilePattern]; a Pattern is immutable and safe for concurrent use.
type Pattern struct {
	src     string
	segs    []segment
	many    []int // indexes of the "**" segments, ascending
	literal bool  // no wildcard: Match is string equality
	all     bool  // the pattern is "**": Match is always true
}

// Match strategies, cheapest first; the automaton handles every pattern, the
// others are shortcuts for the common shapes.
func (p *Pattern) fixed() bool { return len(p.many) == 0 }

func (p *Pattern) tailMany() bool {
	return len(p.many) == 1 && p.many[0] == len(p.segs)-1
}

// CompilePattern parses a pattern. Its rules are those of topic names
// ([event.ValidateTopic]: 1 to 255 characters of letters, digits, '_', '-'
// and ':' in non-empty segments separated by '.') plus the wildcard
// segments "*" and "**". A '*' inside a segment ("a*", "***") is an error.
// Consecutive "**" segments are merged, which changes no match.
func CompilePattern(pattern string) (*Pattern, error) {
	if pattern == "" {
		return nil, invalid("pattern", "must not be empty")
	}
	if len(pattern) > event.MaxNameLen {
		return nil, invalid("pattern", "%d characters, more than %d", len(pattern), event.MaxNameLen)
	}
	p := &Pattern{src: pattern, literal: true}
	start := 0
	for i := 0; i <= len(pattern); i++ {
		if i < len(pattern) && pattern[i] != '.' {
			c := pattern[i]
			if !isNameChar(c) && c != '*' {
				return nil, invalid("pattern", "%q contains %q at offset %d; allowed are letters, digits, '_', '-', ':', '.' between segments, and the segments '*' and '**'", pattern, rune(c), i)
			}
			continue
		}
		seg := pattern[start:i]
		switch {
		case seg == "":
			return nil, invalid("pattern", "%q has an empty segment at offset %d", pattern, start)
		case seg == "*":
			p.segs = append(p.segs, segment{kind: segOne})
			p.literal = false
		case seg == "**":
			p.literal = false
			if n := len(p.segs); n > 0 && p.segs[n-1].kind == segMany {
				break // "**.**" is "**"
			}
			p.many = append(p.many, len(p.segs))
			p.segs = append(p.segs, segment{kind: segMany})
		case strings.IndexByte(seg, '*') >= 0:
			return nil, invalid("pattern", "%q: segment %q: '*' and '**' must be whole segments", pattern, seg)
		default:
			p.segs = append(p.segs, segment{kind: segLiteral, lit: seg})
		}
		start = i + 1
	}
	p.all = len(p.segs) == 1 && p.segs[0].kind == segMany
	return p, nil
}

// String returns the pattern as it was written.
func (p *Pattern) String() string { return p.src }

// Match reports whether topic matches the pattern. The cost is at most
// proportional to the number of pattern segments times the number of topic
// segments, whatever the pattern: there is no backtracking.
func (p *Pattern) Match(topic string) bool {
	switch {
	case p.literal:
		return topic == p.src
	case p.all:
		return true
	case p.fixed():
		_, done, ok := walkFixed(p.segs, topic)
		return ok && done
	case p.tailMany():
		// Whatever follows the fixed head is taken by the final "**".
		_, _, ok := walkFixed(p.segs[:len(p.segs)-1], topic)
		return ok
	}
	ok, _ := p.match(topic)
	return ok
}

// walkFixed matches segs, which hold no "**", against the leading segments
// of topic, one for one. done reports that the topic ended exactly there;
// otherwise rest is what follows the next '.'.
func walkFixed(segs []segment, topic string) (rest string, done, ok bool) {
	for i := range segs {
		if done {
			return "", true, false // the topic is shorter than the pattern
		}
		seg := topic
		if j := strings.IndexByte(topic, '.'); j >= 0 {
			seg, topic = topic[:j], topic[j+1:]
		} else {
			topic, done = "", true
		}
		if segs[i].kind == segLiteral && segs[i].lit != seg {
			return "", false, false
		}
	}
	return topic, done, true
}

// match runs the pattern as a nondeterministic automaton over the topic's
// segments. State i means "the first i pattern segments have matched"; the
// set of live states after each topic segment is kept in a bitmap-like
// array, so every (state, segment) pair is visited at most once. It returns
// the number of state visits too, which the tests bound.
func (p *Pattern) match(topic string) (ok bool, steps int) {
	m := len(p.segs)
	var bufA, bufB [MaxPatternSegments + 1]bool
	cur, next := &bufA, &bufB
	cur[0] = true
	steps += p.closure(cur)
	for start := 0; ; {
		seg, last := topic[start:], true
		if end := strings.IndexByte(seg, '.'); end >= 0 {
			seg, last = seg[:end], false
			start += end + 1
		}
		clear(next[:m+1])
		alive := false
		for i := 0; i < m; i++ {
			if !cur[i] {
				continue
			}
			steps++
			switch s := &p.segs[i]; s.kind {
			case segMany:
				next[i] = true // "**" takes this segment and stays
				alive = true
			case segOne:
				next[i+1] = true
				alive = true
			default:
				if s.lit == seg {
					next[i+1] = true
					alive = true
				}
			}
		}
		if !alive {
			return false, steps
		}
		steps += p.closure(next)
		cur, next = next, cur
		if last {
			return cur[m], steps
		}
	}
}

// closure adds the states reachable without taking a segment: past a live
// "**" (zero segments). Ascending order suffices because consecutive "**"
// are merged at compile time.
func (p *Pattern) closure(s *[MaxPatternSegments + 1]bool) int {
	for _, i := range p.many {
		if s[i] {
			s[i+1] = true
		}
	}
	return len(p.many)
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == ':'
}
