package redact

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func mustNew(t testing.TB, secrets ...Secret) *Redactor {
	t.Helper()
	r, err := New(secrets)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEveryForm: the value as it is, escaped in JSON, in base64 and
// URL-encoded, each replaced by the secret's name.
func TestEveryForm(t *testing.T) {
	const v = `p4ss<w/"rd> & more`
	r := mustNew(t, Secret{Name: "db", Value: v}, Secret{Name: "token", Value: "ghp_abcdef123456"})
	for _, in := range []string{
		"say " + v + " now",
		`{"text":"say p4ss\u003cw/\"rd\u003e \u0026 more now"}`,
		`{"text":"say p4ss<w/\"rd> & more now"}`,
		"b64 " + base64.StdEncoding.EncodeToString([]byte(v)),
		"b64url " + base64.RawURLEncoding.EncodeToString([]byte(v)),
		"q=" + url.QueryEscape(v),
		"path/" + url.PathEscape(v),
	} {
		got := r.String(in)
		if strings.Contains(got, "p4ss") || !strings.Contains(got, "[REDACTED:db]") {
			t.Errorf("%q → %q, want the secret replaced", in, got)
		}
	}
	if got := r.String("token ghp_abcdef123456, again ghp_abcdef123456."); got != "token [REDACTED:token], again [REDACTED:token]." {
		t.Errorf("got %q", got)
	}
}

// TestNothingToRedactAllocatesNothing: a message without secrets comes back
// as it was, the same slice.
func TestNothingToRedactAllocatesNothing(t *testing.T) {
	r := mustNew(t, Secret{Name: "t", Value: "ghp_abcdef123456"})
	b := []byte(strings.Repeat("the light is high; gh is not a token. ", 30))
	if allocs := testing.AllocsPerRun(100, func() {
		if out := r.Bytes(b); &out[0] != &b[0] {
			t.Fatal("a new slice for nothing to redact")
		}
	}); allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

// TestLongestFormFirst: of two secrets where one contains the other, the
// longer is replaced whole.
func TestLongestFormFirst(t *testing.T) {
	r := mustNew(t, Secret{Name: "short", Value: "abcd"}, Secret{Name: "long", Value: "abcdefgh"})
	if got := r.String("x abcdefgh y abcd z"); got != "x [REDACTED:long] y [REDACTED:short] z" {
		t.Errorf("got %q", got)
	}
}

func TestNewRefusesWhatWouldRedactWords(t *testing.T) {
	for _, tc := range []struct {
		s    Secret
		want string
	}{
		{Secret{Name: "pin", Value: "123"}, "secret pin: its value is 3 bytes long; one shorter than 4 would redact ordinary words"},
		{Secret{Value: "abcdef"}, "a secret needs a name"},
	} {
		if _, err := New([]Secret{tc.s}); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: error %v, want %q", tc.s, err, tc.want)
		}
	}
}

// TestStreamSecretSplitAcrossPieces: a secret split over two (or more)
// pieces is redacted; what cannot be part of a secret is let out at once.
func TestStreamSecretSplitAcrossPieces(t *testing.T) {
	r := mustNew(t, Secret{Name: "token", Value: "ghp_abcdef123456"})
	for _, pieces := range [][]string{
		{"your token is ghp_abc", "def123456, keep it"},
		{"your token is g", "hp_abcdef1234", "56, keep it"},
		{"your token is ghp_abcdef123456", ", keep it"},
	} {
		s := r.Stream()
		var out strings.Builder
		for _, p := range pieces {
			out.WriteString(s.Next(p))
		}
		out.WriteString(s.Flush())
		if got := out.String(); got != "your token is [REDACTED:token], keep it" {
			t.Errorf("%q → %q", pieces, got)
		}
	}
	s := r.Stream()
	if got := s.Next("nothing secret here"); got != "nothing secret here" || s.Held() {
		t.Errorf("a plain piece: %q, held %v", got, s.Held())
	}
	if got := s.Next("but this ends with gh"); got != "but this ends with " || !s.Held() {
		t.Errorf("a piece ending like a secret: %q, held %v", got, s.Held())
	}
	if got := s.Flush(); got != "gh" {
		t.Errorf("flush: %q", got)
	}
}

// BenchmarkRedact1KiB: the cost of redacting a 1 KiB message with 20
// secrets (clean: none in it; one-secret: one to replace), against Go's
// bytes.Index looking for one of the values in the same message.
func BenchmarkRedact1KiB(b *testing.B) {
	var secrets []Secret
	for i := range 20 {
		secrets = append(secrets, Secret{Name: fmt.Sprintf("s%d", i), Value: fmt.Sprintf("ghp_%08dSECRETvalue%04d", i*7919, i)})
	}
	r := mustNew(b, secrets...)
	msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"content":{"text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog; gh and high light. ", 15) + `","type":"text"},"sessionUpdate":"agent_message_chunk"}}}`)[:1024]
	b.Run("baseline-one-index", func(b *testing.B) {
		// What Go's own search costs for one of the 20 values.
		needle := []byte(secrets[0].Value)
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			bytes.Index(msg, needle)
		}
	})
	b.Run("clean", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			r.Bytes(msg)
		}
	})
	withSecret := append([]byte(nil), msg...)
	copy(withSecret[200:], secrets[7].Value)
	b.Run("one-secret", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			r.Bytes(withSecret)
		}
	})
}

// naive is what Bytes must do, done the slow way: at each position, the
// longest form that starts there.
func naive(r *Redactor, b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		var best *pattern
		for _, bucket := range r.byPrefix {
			for k := range bucket {
				if p := &bucket[k]; strings.HasPrefix(string(b[i:]), string(p.form)) && (best == nil || len(p.form) > len(best.form)) {
					best = p
				}
			}
		}
		if best == nil {
			out = append(out, b[i])
			i++
			continue
		}
		out = append(out, best.replacement...)
		i += len(best.form)
	}
	return out
}

// FuzzBytes checks the skipping scan against the naive one, on texts built
// from pieces of the secrets so that matches, near misses and overlaps are
// common.
func FuzzBytes(f *testing.F) {
	f.Add([]byte("abcd"), []byte("xxabcdxxabcdefgh"), []byte("ab"))
	f.Add([]byte("ghp_abc1"), []byte("ghp_ghp_abc1ghp_abc"), []byte("Z2hwX2FiYzE="))
	f.Add([]byte("a b&c"), []byte(`a+b%26c a%20b&c a b\u0026c`), []byte("hi"))
	f.Fuzz(func(t *testing.T, s1, text, s2 []byte) {
		var secrets []Secret
		for i, v := range [][]byte{s1, s2} {
			if len(v) >= MinLength {
				secrets = append(secrets, Secret{Name: fmt.Sprint(i), Value: string(v)})
			}
		}
		if len(secrets) == 0 {
			return
		}
		r, err := New(secrets)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.Bytes(text), naive(r, text); string(got) != string(want) {
			t.Errorf("secrets %q, text %q:\ngot  %q\nwant %q", secrets, text, got, want)
		}
	})
}
