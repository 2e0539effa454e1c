package sqlstore

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// TestSetupTokenSignInAndOut: the setup token creates the first admin once;
// its password is stored as an argon2id hash, never in clear; a sign-in
// opens a web session that signing out or expiry closes.
func TestSetupTokenSignInAndOut(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		tok, err := s.MintSetupToken(t.Context())
		if err != nil || !strings.HasPrefix(tok, SetupPrefix) {
			t.Fatalf("setup token %q, %v", tok, err)
		}
		again, err := s.MintSetupToken(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.CreateFirstAdmin(t.Context(), tok, "ada", "correct horse battery")
		testsupport.WantErr(t, err, "setup token", "already used") // replaced by again
		_, err = s.CreateFirstAdmin(t.Context(), again, "ada", "short")
		testsupport.WantErr(t, err, "password has 5 characters", "at least 12")
		if _, err := s.CreateFirstAdmin(t.Context(), again, "ada", "correct horse battery"); err != nil {
			t.Fatal(err)
		}
		_, err = s.CreateFirstAdmin(t.Context(), again, "bob", "correct horse battery")
		if !errors.Is(err, ErrBadToken) {
			t.Fatalf("a spent setup token: %v", err)
		}
		if tok, err := s.MintSetupToken(t.Context()); tok != "" || err != nil {
			t.Fatalf("a setup token with an admin present: %q, %v", tok, err)
		}
		var stored string
		if err := s.read.row(t.Context(), "SELECT password FROM users WHERE name = ?", "ada").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(stored, "$argon2id$v=19$") || strings.Contains(stored, "correct horse") {
			t.Fatalf("stored password %q", stored)
		}

		if _, _, err := s.SignIn(t.Context(), "ada", "wrong password!", time.Hour); !errors.Is(err, ErrBadSignIn) {
			t.Fatalf("a wrong password: %v", err)
		}
		if _, _, err := s.SignIn(t.Context(), "nobody", "correct horse battery", time.Hour); !errors.Is(err, ErrBadSignIn) {
			t.Fatalf("an unknown user: %v", err)
		}
		web, u, err := s.SignIn(t.Context(), "ada", "correct horse battery", time.Hour)
		if err != nil || !u.Admin {
			t.Fatalf("sign-in: %v, %+v", err, u)
		}
		if u, err := s.WebSession(t.Context(), web); err != nil || u.Name != "ada" {
			t.Fatalf("web session: %v, %+v", err, u)
		}
		if err := s.SignOut(t.Context(), web); err != nil {
			t.Fatal(err)
		}
		_, err = s.WebSession(t.Context(), web)
		testsupport.WantErr(t, err, "sign-in", "signed out")

		short, _, err := s.SignIn(t.Context(), "ada", "correct horse battery", -time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.WebSession(t.Context(), short)
		testsupport.WantErr(t, err, "sign-in", "expired")
	})
}

// TestTranscriptChunksReadWhatIsNew: a reader following a transcript gets
// what was written since the last chunk it read, and nothing twice.
func TestTranscriptChunksReadWhatIsNew(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s1")
		w, err := s.Transcript(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		read := func(after, to int64) string {
			t.Helper()
			r, err := s.TranscriptChunks(t.Context(), "s1", after, to)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		io.WriteString(w, "one\ntwo\n")
		last, err := s.TranscriptLast(t.Context(), "s1")
		if err != nil || last == 0 {
			t.Fatalf("last chunk: %d, %v", last, err)
		}
		if got := read(0, last); got != "one\ntwo\n" {
			t.Fatalf("from the start: %q", got)
		}
		if again, err := s.TranscriptLast(t.Context(), "s1"); err != nil || again != last {
			t.Fatalf("nothing new: %d, %v", again, err)
		}
		io.WriteString(w, "three\n")
		next, _ := s.TranscriptLast(t.Context(), "s1")
		if got := read(last, next); got != "three\n" {
			t.Fatalf("what is new: %q", got)
		}
		_, err = s.TranscriptLast(t.Context(), "nosuchsession")
		testsupport.WantErr(t, err, "no such session")
		_, err = s.TranscriptChunks(t.Context(), "nosuchsession", 0, 1)
		testsupport.WantErr(t, err, "no such session")
	})
}

// TestTranscriptWindowIsTheLatestChunksWithinBytes: a window holds the
// latest chunks up to its end that fit its bytes, at least one, and the
// chunk before it is where the window before it ends.
func TestTranscriptWindowIsTheLatestChunksWithinBytes(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s1")
		w, err := s.Transcript(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var seqs []int64
		for _, line := range []string{"a\n", "bb\n", "ccc\n", "dddd\n"} {
			io.WriteString(w, line)
			last, err := s.TranscriptLast(t.Context(), "s1")
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, last)
		}
		for _, c := range []struct {
			to, max, want int64
		}{
			{seqs[3], 9, seqs[1]}, // "ccc\n" and "dddd\n"
			{seqs[3], 100, 0},     // all of it
			{seqs[3], 1, seqs[2]}, // one chunk larger than the bytes
			{seqs[2], 7, seqs[0]}, // ending before the latest
			{seqs[0] - 1, 100, 0}, // before the first: empty
		} {
			if got, _, err := s.TranscriptWindow(t.Context(), "s1", c.to, c.max); err != nil || got != c.want {
				t.Errorf("window to %d within %d bytes starts after %d, want %d (%v)", c.to, c.max, got, c.want, err)
			}
		}
	})
}
