package event

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseUUIDRefusesEachPosition changes each character of a canonical
// UUID in turn to one the canonical form does not allow there (a dash
// where a digit goes, a digit where a dash goes, an upper-case digit, a
// byte outside ASCII): every change is refused, and the unchanged string
// reads back as google/uuid reads it.
func TestParseUUIDRefusesEachPosition(t *testing.T) {
	t.Parallel()
	id := "0190a2b4-c3d2-7e10-8a5b-0123456789ab"
	want := uuid.MustParse(id)
	got, ok := parseUUID(id)
	require.True(t, ok)
	require.Equal(t, [16]byte(want), got)
	for i := range len(id) {
		var bads []byte
		if id[i] == '-' {
			bads = []byte{'0', 'a', '_', 0xc3}
		} else {
			bads = []byte{'-', 'A', 'F', 'g', '/', ':', '`', 0xc3, 0}
		}
		for _, c := range bads {
			b := []byte(id)
			b[i] = c
			_, ok := parseUUID(string(b))
			assert.False(t, ok, "%q (position %d)", b, i)
		}
	}
	for _, bad := range []string{id[:35], id + "0", "{" + id[:35]} {
		_, ok := parseUUID(bad)
		assert.False(t, ok, bad)
	}
}

// TestUUIDStringMatchesUUID formats every value of each byte in each
// position as google/uuid does.
func TestUUIDStringMatchesUUID(t *testing.T) {
	t.Parallel()
	for pos := range 16 {
		for v := range 256 {
			var u [16]byte
			for i := range u {
				u[i] = byte(i * 17)
			}
			u[pos] = byte(v)
			s := uuidString(&u)
			require.Equal(t, uuid.UUID(u).String(), s)
			back, ok := parseUUID(s)
			require.True(t, ok)
			require.Equal(t, u, back)
		}
	}
}

var sinkString string

func BenchmarkUUIDString(b *testing.B) {
	u := [16]byte(uuid.MustParse("0190a2b4-c3d2-7e10-8a5b-0123456789ab"))
	for b.Loop() {
		sinkString = uuidString(&u)
	}
}

func BenchmarkParseUUID(b *testing.B) {
	id := "0190a2b4-c3d2-7e10-8a5b-0123456789ab"
	for b.Loop() {
		if _, ok := parseUUID(id); !ok {
			b.Fatal("refused")
		}
	}
}
