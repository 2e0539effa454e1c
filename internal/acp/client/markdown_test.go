package client

import (
	"encoding/json"
	"strings"
	"testing"
)

// chunk renders one agent_message_chunk through t.
func chunk(t *Terminal, text string) {
	params, _ := json.Marshal(map[string]any{"sessionId": "s", "update": map[string]any{
		"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text},
	}})
	t.Notification("session/update", params)
}

// TestMarkdownRendersCompleteBlocks: Markdown is written a complete block at
// a time, a fence holding its blank lines; the rest is written when the turn
// ends.
func TestMarkdownRendersCompleteBlocks(t *testing.T) {
	var out strings.Builder
	term := &Terminal{Out: &out, Markdown: true, Width: 60}
	chunk(term, "# Title\n\nSome **bo")
	if got := out.String(); !strings.Contains(got, "Title") || strings.Contains(got, "Some") || strings.Contains(got, "#") {
		t.Fatalf("after the first block: %q", got)
	}
	chunk(term, "ld** words.\n\n```\na\n\nb\n")
	if got := out.String(); !strings.Contains(got, "Some bold words.") || strings.Contains(got, "**") || strings.Contains(got, "a\n") {
		t.Fatalf("a paragraph, then an open fence: %q", got)
	}
	chunk(term, "```\n- last")
	term.EndTurn("end_turn")
	got := out.String()
	for _, want := range []string{"a\n", "b\n", "• last\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("styles without Color: %q", got)
	}
	for l := range strings.Lines(got) {
		if strings.HasSuffix(strings.TrimSuffix(l, "\n"), " ") {
			t.Errorf("a line padded to the width: %q", l)
		}
	}
}

// TestLogLineOfItsOwnAndSpinnerErased: a log line ends the agent's line
// first and the spinner is erased before it and drawn again after it; the
// agent's text stops the spinner.
func TestLogLineOfItsOwnAndSpinnerErased(t *testing.T) {
	var out strings.Builder
	term := &Terminal{Out: &out, Err: &out, Status: &out}
	chunk(term, "half a line")
	term.Log("INFO plug: hello")
	if got := out.String(); got != "half a line\nINFO plug: hello\n" {
		t.Fatalf("got %q", got)
	}
	out.Reset()
	term.Busy("attaching")
	term.Relabel("attaching: acme/p")
	term.Log("INFO acme/p: working")
	chunk(term, "answer")
	term.EndTurn("end_turn")
	term.Relabel("late")
	// The ticker may add frames; none comes after the answer.
	got := out.String()
	for _, want := range []string{"⠋ attaching" + eraseLine, "attaching: acme/p" + eraseLine + "INFO acme/p: working\n", eraseLine + "answer\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %q", want, got)
		}
	}
	if !strings.HasSuffix(got, eraseLine+"answer\n") || strings.Contains(got, "late") {
		t.Errorf("a spinner after the answer: %q", got)
	}
}
