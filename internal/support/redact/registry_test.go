package redact

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestRegistryRedactsWhatIsRegisteredLater: a writer made before a secret is
// registered redacts it once it is, even when the writes split it; errors
// keep what errors.As finds.
func TestRegistryRedactsWhatIsRegisteredLater(t *testing.T) {
	var g Registry
	var out bytes.Buffer
	w := g.Writer(&out)
	if _, err := w.Write([]byte("before: ghp_abcdef123456\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Register([]Secret{{Name: "github", Value: "ghp_abcdef123456"}}); err != nil {
		t.Fatal(err)
	}
	for _, piece := range []string{"after: ghp_abc", "def123456 and\n", "more ghp_", "abcdef123456"} {
		if _, err := w.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "before: ghp_abcdef123456\nafter: [REDACTED:github] and\n"; got != want {
		t.Fatalf("before Close: got %q, want %q", got, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasSuffix(got, "more [REDACTED:github]") {
		t.Fatalf("the unfinished line is not written redacted at Close: %q", got)
	}

	err := g.Error(&fs.PathError{Op: "open", Path: "/tmp/ghp_abcdef123456", Err: fs.ErrNotExist})
	if got, want := err.Error(), "open /tmp/[REDACTED:github]: file does not exist"; got != want {
		t.Errorf("error: got %q, want %q", got, want)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the redacted error hides what it wraps: %#v", err)
	}
	if err := g.Register([]Secret{{Name: "short", Value: "abc"}}); err == nil {
		t.Error("a value too short to redact was registered")
	}
	var none *Registry
	if got := none.String("ghp_abcdef123456"); got != "ghp_abcdef123456" {
		t.Errorf("a nil registry changed %q", got)
	}
}

// TestRegistryRedactsEachLineOfAValue: a value of several lines is
// redacted whole, and line by line where a log writes its lines apart;
// blank and short lines are left alone.
func TestRegistryRedactsEachLineOfAValue(t *testing.T) {
	var g Registry
	if err := g.Register([]Secret{{Name: "key", Value: "-----BEGIN-----\r\nKEYBODY0123\n\n  \nab\n-----END-----\n"}}); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"k=-----BEGIN-----\r\nKEYBODY0123\n\n  \nab\n-----END-----\n.": "k=[REDACTED:key].",
		"k=\n  │ KEYBODY0123\n  │ ab\n  │   \n":                        "k=\n  │ [REDACTED:key]\n  │ ab\n  │   \n",
	} {
		if got := g.String(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
