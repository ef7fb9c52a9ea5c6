package event

// parseUUID parses the canonical lower-case 36-character form of a UUID
// (8-4-4-4-12 hex digits), the form [Bus.Publish] generates. Other forms
// report false: callers keep such ids as strings, so an id always reads
// back exactly as it was given.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	for j, i := range uuidHexAt {
		hi, lo := hexVal[s[i]], hexVal[s[i+1]]
		if hi > 15 || lo > 15 {
			return u, false
		}
		u[j] = hi<<4 | lo
	}
	return u, true
}

// uuidHexAt holds where each byte's two hex digits start in the canonical form.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// hexVal maps a lower-case hex digit to its value and any other byte to 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

func unhex(c byte) (byte, bool) {
	v := hexVal[c]
	return v, v != 0xff
}

const hexDigits = "0123456789abcdef"

// uuidString formats u in canonical lower-case form.
func uuidString(u *[16]byte) string {
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&15]
		j += 2
	}
	return string(b[:])
}
