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

// uuidString formats u in canonical lower-case form. It runs once for
// each id a Bus makes, so each byte's two digits are written to their
// place with no branch and no bounds check.
func uuidString(u *[16]byte) string {
	var b [36]byte
	hex2(b[0:2], u[0])
	hex2(b[2:4], u[1])
	hex2(b[4:6], u[2])
	hex2(b[6:8], u[3])
	b[8] = '-'
	hex2(b[9:11], u[4])
	hex2(b[11:13], u[5])
	b[13] = '-'
	hex2(b[14:16], u[6])
	hex2(b[16:18], u[7])
	b[18] = '-'
	hex2(b[19:21], u[8])
	hex2(b[21:23], u[9])
	b[23] = '-'
	hex2(b[24:26], u[10])
	hex2(b[26:28], u[11])
	hex2(b[28:30], u[12])
	hex2(b[30:32], u[13])
	hex2(b[32:34], u[14])
	hex2(b[34:36], u[15])
	return string(b[:])
}

// hex2 writes c's two lower-case hex digits to dst[0] and dst[1].
func hex2(dst []byte, c byte) {
	_ = dst[1]
	dst[0], dst[1] = hexDigits[c>>4], hexDigits[c&15]
}
