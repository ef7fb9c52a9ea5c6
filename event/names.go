package event

import "strings"

// MaxNameLen is the longest topic or group name.
const MaxNameLen = 255

// ValidateTopic reports whether topic is a valid topic name: 1 to 255
// characters of ASCII letters, digits, '_', '-' and ':', in non-empty
// segments separated by '.'. The error wraps [ErrInvalid] and names the field.
func ValidateTopic(topic string) error { return validateName("topic", topic) }

// ValidateGroup reports whether group is a valid consumer group name; the
// rules are those of [ValidateTopic].
func ValidateGroup(group string) error { return validateName("group", group) }

func validateName(field, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if len(name) > MaxNameLen {
		return invalid(field, "%d characters, more than %d", len(name), MaxNameLen)
	}
	segStart := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if i == segStart {
				return invalid(field, "%q has an empty segment at offset %d", name, i)
			}
			segStart = i + 1
		case isNameChar(c):
		case c == '*':
			return invalid(field, "%q contains '*', which is reserved for ACL patterns", name)
		default:
			return invalid(field, "%q contains %q at offset %d; allowed are letters, digits, '_', '-', ':' and '.' between segments", name, rune(c), i)
		}
	}
	if strings.HasSuffix(name, ".") {
		return invalid(field, "%q ends with '.'", name)
	}
	return nil
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == ':'
}
