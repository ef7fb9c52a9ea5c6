package storeurl_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/storeurl"
)

// TestParse: the grammar, and a clear one-line error naming the problem
// for each bad string, never with a URL's password.
func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    storeurl.Location
		wantErr error
		wantMsg []string // in the error
	}{
		{name: "memory", in: "memory", want: storeurl.Location{Kind: storeurl.KindMemory}},
		{name: "sqlite relative", in: "sqlite:events.db", want: storeurl.Location{Kind: storeurl.KindSQLite, Path: "events.db"}},
		{name: "sqlite absolute", in: "sqlite:/var/lib/hub/events.db", want: storeurl.Location{Kind: storeurl.KindSQLite, Path: "/var/lib/hub/events.db"}},
		{name: "sqlite scheme in capitals", in: "SQLite:events.db", want: storeurl.Location{Kind: storeurl.KindSQLite, Path: "events.db"}},
		{name: "postgres", in: "postgres://hub:pw@db.internal:5432/events",
			want: storeurl.Location{Kind: storeurl.KindPostgres, URL: "postgres://hub:pw@db.internal:5432/events"}},
		{name: "postgresql", in: "postgresql://db.internal/events?sslmode=disable",
			want: storeurl.Location{Kind: storeurl.KindPostgres, URL: "postgresql://db.internal/events?sslmode=disable"}},
		{name: "mongodb", in: "mongodb://127.0.0.1:27017/?replicaSet=rs0",
			want: storeurl.Location{Kind: storeurl.KindMongoDB, URL: "mongodb://127.0.0.1:27017/?replicaSet=rs0"}},
		{name: "mongodb+srv", in: "mongodb+srv://cluster0.example.net",
			want: storeurl.Location{Kind: storeurl.KindMongoDB, URL: "mongodb+srv://cluster0.example.net"}},

		{name: "empty", in: "", wantErr: storeurl.ErrEmpty, wantMsg: []string{"empty", "sqlite:PATH", "memory"}},
		{name: "unknown scheme", in: "redis://u:secret@cache:6379", wantErr: storeurl.ErrUnknownScheme,
			wantMsg: []string{`unknown scheme "redis"`, "postgres://", "mongodb://"}},
		{name: "a bare name: mongo", in: "mongo", wantErr: storeurl.ErrNoScheme, wantMsg: []string{`"mongo" names a database`, "mongodb://host"}},
		{name: "a bare name: postgres", in: "postgres", wantErr: storeurl.ErrNoScheme, wantMsg: []string{`"postgres" names a database`, "postgres://"}},
		{name: "a bare name: SQLite", in: "SQLite", wantErr: storeurl.ErrNoScheme, wantMsg: []string{`"SQLite" names a database`, "sqlite:PATH"}},
		{name: "no scheme", in: "events.db", wantErr: storeurl.ErrNoScheme, wantMsg: []string{`"events.db" has no scheme`, "sqlite:events.db"}},
		{name: "empty sqlite path", in: "sqlite:", wantErr: storeurl.ErrSQLitePath, wantMsg: []string{"empty path", "sqlite:PATH"}},
		{name: "sqlite in memory", in: "sqlite::memory:", wantErr: storeurl.ErrSQLitePath, wantMsg: []string{"not kept anywhere", "use memory"}},
		{name: "sqlite URL", in: "sqlite://events.db", wantErr: storeurl.ErrSQLitePath, wantMsg: []string{"want sqlite:PATH"}},
		{name: "sqlite options", in: "sqlite:events.db?mode=ro", wantErr: storeurl.ErrSQLitePath, wantMsg: []string{"'?' or '#'"}},
		{name: "postgres without slashes", in: "postgres:events", wantErr: storeurl.ErrPostgresURL, wantMsg: []string{"PostgreSQL store is a URL"}},
		{name: "postgres bad port", in: "postgres://hub:secret@db.internal:port/events", wantErr: storeurl.ErrPostgresURL,
			wantMsg: []string{"bad PostgreSQL URL", "invalid port"}},
		{name: "postgres bad parameter", in: "postgres://hub:secret@db.internal/events?connect_timeout=soon", wantErr: storeurl.ErrPostgresURL,
			wantMsg: []string{"bad PostgreSQL URL"}},
		{name: "mongodb without host", in: "mongodb://", wantErr: storeurl.ErrMongoURL, wantMsg: []string{"MongoDB store is a URL"}},
		{name: "mongodb bad port", in: "mongodb://app:secret@db.internal:port", wantErr: storeurl.ErrMongoURL, wantMsg: []string{"bad MongoDB URL", "port"}},
		{name: "mongodb bad option", in: "mongodb://app:secret@db.internal/?connectTimeoutMS=soon", wantErr: storeurl.ErrMongoURL, wantMsg: []string{"bad MongoDB URL", "connectTimeoutMS"}},
		{name: "mongodb without slashes", in: "mongodb:localhost", wantErr: storeurl.ErrMongoURL, wantMsg: []string{"MongoDB store is a URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tt.in)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var pe *storeurl.ParseError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "storeurl: "+pe.Msg, err.Error())
				for _, w := range tt.wantMsg {
					assert.Contains(t, pe.Msg, w)
				}
				assert.NotContains(t, err.Error(), "secret", "a URL's password is never repeated")
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestLocationString: the location in the grammar, with a URL's password
// hidden.
func TestLocationString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"memory":                        "memory",
		"sqlite:/var/lib/hub/events.db": "sqlite:/var/lib/hub/events.db",
		"postgres://hub:secret@db.internal/events":  "postgres://hub:xxxxx@db.internal/events",
		"postgresql://db.internal/events":           "postgresql://db.internal/events",
		"mongodb://app:secret@127.0.0.1:27017/?w=1": "mongodb://app:xxxxx@127.0.0.1:27017/?w=1",
	} {
		loc, err := storeurl.Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, loc.String())
	}
}

// TestKindName: names for people.
func TestKindName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "memory", storeurl.KindMemory.Name())
	assert.Equal(t, "SQLite", storeurl.KindSQLite.Name())
	assert.Equal(t, "PostgreSQL", storeurl.KindPostgres.Name())
	assert.Equal(t, "MongoDB", storeurl.KindMongoDB.Name())
}

// FuzzParse: Parse never panics, and what it accepts it gives back as
// the same string (a password aside); what it refuses is a ParseError
// of one line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"memory", "sqlite:a.db", "postgres://h/db", "mongodb://h", "", "x:y", "sqlite:?", "postgres://h:p/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := storeurl.Parse(s)
		if err != nil {
			var pe *storeurl.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %v is not a ParseError", s, err)
			}
			return
		}
		switch loc.Kind {
		case storeurl.KindMemory:
			if s != "memory" {
				t.Fatalf("Parse(%q) = memory", s)
			}
		case storeurl.KindSQLite:
			if loc.Path == "" || s[len(s)-len(loc.Path):] != loc.Path {
				t.Fatalf("Parse(%q) = path %q", s, loc.Path)
			}
		case storeurl.KindPostgres, storeurl.KindMongoDB:
			if loc.URL != s {
				t.Fatalf("Parse(%q) = URL %q", s, loc.URL)
			}
		default:
			t.Fatalf("Parse(%q) = kind %q", s, loc.Kind)
		}
	})
}
