package chain

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/support/redact"
)

// titles feeds lines to a titler (side: the side of each line) and
// returns the titles it records, in order.
func titles(t *testing.T, titled bool, redact func(string) string, lines ...string) []string {
	t.Helper()
	tt := newTitler(nil, titled, redact)
	var got []string
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tt.run(ctx, func(s string) { got = append(got, s) })
	}()
	for _, l := range lines {
		side := acp.ToAgent
		if strings.Contains(l, `"session/update"`) {
			side = acp.ToClient
		}
		m, err := acp.Parse([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		tt.Record(side, m, "")
	}
	cancel()
	<-done
	return got
}

func prompt(text string) string {
	return `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":` + jsonString(text) + `}]}}`
}

func info(title string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"session_info_update","title":` + title + `}}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func last(got []string) string {
	if len(got) == 0 {
		return ""
	}
	return got[len(got)-1]
}

func same(s string) string { return s }

func TestTitleIsTheFirstPromptsFirstLine(t *testing.T) {
	got := titles(t, false, same, prompt("\n  fix   the\tflaky test  \nin the store"))
	if last(got) != "fix the flaky test" {
		t.Fatalf("title %q", got)
	}
}

func TestTitleIsCutTo120Runes(t *testing.T) {
	got := last(titles(t, false, same, prompt(strings.Repeat("é", 300))))
	if r := []rune(got); len(r) != maxTitle || r[len(r)-1] != '…' {
		t.Fatalf("title of %d runes: %q", len(r), got)
	}
}

func TestTitleRedactsASecretBeforeCutting(t *testing.T) {
	var g redact.Registry
	secret := "ghp_" + strings.Repeat("x", 40)
	if err := g.Register([]redact.Secret{{Name: "tok", Value: secret}}); err != nil {
		t.Fatal(err)
	}
	// The secret straddles the cut: cut first, its head would remain.
	text := strings.Repeat("a", 100) + " " + secret
	got := last(titles(t, false, g.String, prompt(text)))
	if strings.Contains(got, "ghp_") || !strings.Contains(got, "[REDACTED") {
		t.Fatalf("title %q keeps part of the secret", got)
	}
}

func TestLaterPromptsKeepTheTitle(t *testing.T) {
	got := titles(t, false, same, prompt("first"), prompt("second"))
	if strings.Join(got, "|") != "first" {
		t.Fatalf("titles %q", got)
	}
	if got := titles(t, true, same, prompt("a later run's prompt")); len(got) != 0 {
		t.Fatalf("a titled session got %q", got)
	}
}

func TestAgentsSessionInfoTitleReplacesThePromptsTitle(t *testing.T) {
	got := titles(t, true, same, prompt("first"), info(`"Fixing the store"`))
	if last(got) != "Fixing the store" {
		t.Fatalf("titles %q", got)
	}
}

// TestAnInfoUpdateIsKnownByTheKindTheCheckNoted: the titler tells a
// session_info_update by the kind the check of the message noted, spelled
// escaped or not, and not by the word anywhere in the update (a chunk's
// text, a member of an update of another kind).
func TestAnInfoUpdateIsKnownByTheKindTheCheckNoted(t *testing.T) {
	for line, want := range map[string]bool{
		info(`"Plain"`): true,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"session\u005finfo_update","title":"Escaped"}}}`:                                     true,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\"session_info_update\""}}}}`: false,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","note":"session_info_update"}}}`:                                              false,
	} {
		m, err := acp.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if got := isInfoUpdate(m.SessionUpdate()); got != want {
			t.Errorf("isInfoUpdate of %s = %v", line, got)
		}
	}
	if got := titles(t, true, same, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"session\u005finfo_update","title":"This one"}}}`); last(got) != "This one" {
		t.Errorf("titles from an escaped kind: %q", got)
	}
}

func TestNullTitleKeepsTheTitle(t *testing.T) {
	got := titles(t, false, same, prompt("first"), info(`null`), info(`""`))
	if strings.Join(got, "|") != "first" {
		t.Fatalf("titles %q", got)
	}
}

func TestResourceLinkNamesAPromptWithoutText(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"resource_link","name":"notes.md","uri":"file:///notes.md"}]}}`
	if got := last(titles(t, false, same, line)); got != "notes.md" {
		t.Fatalf("title %q", got)
	}
}

// TestSlowStoreDoesNotHoldUpMessages: while the store records a title,
// messages pass the titler, and the latest title taken meanwhile is the
// one recorded next.
func TestSlowStoreDoesNotHoldUpMessages(t *testing.T) {
	tt := newTitler(nil, false, same)
	recording, release := make(chan string), make(chan struct{})
	var got []string
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tt.run(ctx, func(s string) {
			recording <- s
			<-release
			got = append(got, s)
		})
	}()
	record := func(line string) {
		side := acp.ToAgent
		if strings.Contains(line, `"session/update"`) {
			side = acp.ToClient
		}
		m, err := acp.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		tt.Record(side, m, "")
	}
	record(prompt("first"))
	<-recording // the store holds it
	for _, title := range []string{`"second"`, `"third"`} {
		record(info(title)) // returns though the store does not
	}
	close(release)
	if s := <-recording; s != "third" {
		t.Errorf("recorded next %q, want the latest, third", s)
	}
	cancel()
	<-done
	if strings.Join(got, "|") != "first|third" {
		t.Fatalf("recorded %q", got)
	}
}
