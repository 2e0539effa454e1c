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

// TestTranscriptAfterReadsWhatIsNew: a reader following a transcript gets
// what was written since it last asked, and nothing twice.
func TestTranscriptAfterReadsWhatIsNew(t *testing.T) {
	eachDB(t, func(t *testing.T, dsn string) {
		s := open(t, dsn, newKey())
		storetest.Create(t, s, "s1")
		w, err := s.Transcript(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		io.WriteString(w, "one\ntwo\n")
		got, last, err := s.TranscriptAfter(t.Context(), "s1", 0)
		if err != nil || string(got) != "one\ntwo\n" {
			t.Fatalf("from the start: %q, %v", got, err)
		}
		if more, again, err := s.TranscriptAfter(t.Context(), "s1", last); err != nil || len(more) != 0 || again != last {
			t.Fatalf("nothing new: %q, %d, %v", more, again, err)
		}
		io.WriteString(w, "three\n")
		if more, _, err := s.TranscriptAfter(t.Context(), "s1", last); err != nil || string(more) != "three\n" {
			t.Fatalf("what is new: %q, %v", more, err)
		}
		_, _, err = s.TranscriptAfter(t.Context(), "nosuchsession", 0)
		testsupport.WantErr(t, err, "no such session")
	})
}
