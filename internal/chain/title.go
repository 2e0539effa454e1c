package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"unicode"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	sdk "github.com/coder/acp-go-sdk"
)

// maxTitle is how many runes of a title a session's record keeps.
const maxTitle = 120

// titler takes a session's title from the messages where they leave the
// chain (so replayed history gives none): the first line of the first
// prompt, while the session has no title, or the title of the agent's
// session_info_update, which replaces any. Titles are redacted before they
// are cut: a cut secret would no longer match. The store records them off
// the message flow (run), the latest title winning.
type titler struct {
	next   acp.Recorder // nil: nothing is recorded
	redact func(string) string

	mu     sync.Mutex
	titled bool // the session has a title: a prompt gives none
	latest chan string
}

// newTitler returns the recorder that takes titles, then passes the
// messages to next; titled says whether the session has a title already.
func newTitler(next acp.Recorder, titled bool, redact func(string) string) *titler {
	return &titler{next: next, titled: titled, redact: redact, latest: make(chan string, 1)}
}

func (t *titler) Record(side acp.Side, m *acp.Message, by string) {
	switch {
	case side == acp.ToAgent && m.Kind == acp.Request && m.Method == sdk.AgentMethodSessionPrompt:
		t.mu.Lock()
		titled := t.titled
		t.mu.Unlock()
		if !titled {
			t.take(promptTitle(m.Params), false)
		}
	case side == acp.ToClient && m.Kind == acp.Notification && m.Method == sdk.ClientMethodSessionUpdate && isInfoUpdate(m.SessionUpdate()):
		t.take(infoTitle(m.Params), true)
	}
	if t.next != nil {
		t.next.Record(side, m, by)
	}
}

// isInfoUpdate tells whether kind, the raw sessionUpdate of an update
// (noted as the message was checked: no search of every update), is a
// session_info_update.
func isInfoUpdate(kind []byte) bool {
	if bytes.IndexByte(kind, '\\') < 0 {
		return string(kind) == `"session_info_update"`
	}
	var k string
	return json.Unmarshal(kind, &k) == nil && k == "session_info_update"
}

// take offers text, redacted and cut, as the title; a prompt's only while
// the session has none.
func (t *titler) take(text string, replaces bool) {
	title := cutTitle(t.redact(text))
	if title == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.titled && !replaces {
		return
	}
	t.titled = true
	select {
	case <-t.latest: // not recorded yet: this one replaces it
	default:
	}
	t.latest <- title
}

// run records the titles taken with record until ctx is done, then the
// last one taken, if any.
func (t *titler) run(ctx context.Context, record func(string)) {
	for {
		select {
		case title := <-t.latest:
			record(title)
		case <-ctx.Done():
			select {
			case title := <-t.latest:
				record(title)
			default:
			}
			return
		}
	}
}

// promptTitle is the text of a session/prompt's first text block, or
// else the name of its first resource link.
func promptTitle(params []byte) string {
	var p struct {
		Prompt []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			Name string `json:"name"`
		} `json:"prompt"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	link := ""
	for _, b := range p.Prompt {
		switch {
		case b.Type == "text" && strings.TrimSpace(b.Text) != "":
			return b.Text
		case b.Type == "resource_link" && link == "":
			link = b.Name
		}
	}
	return link
}

// infoTitle is the title of a session_info_update; "" when it has none
// or clears it (the list keeps a name).
func infoTitle(params []byte) string {
	var p struct {
		Update struct {
			SessionUpdate string  `json:"sessionUpdate"`
			Title         *string `json:"title"`
		} `json:"update"`
	}
	if json.Unmarshal(params, &p) != nil || p.Update.SessionUpdate != "session_info_update" || p.Update.Title == nil {
		return ""
	}
	return *p.Update.Title
}

// cutTitle is text's first non-blank line, its white space collapsed, cut
// to maxTitle runes.
func cutTitle(text string) string {
	var line string
	for l := range strings.Lines(text) {
		if line = strings.Join(strings.FieldsFunc(l, unicode.IsSpace), " "); line != "" {
			break
		}
	}
	if r := []rune(line); len(r) > maxTitle {
		line = string(r[:maxTitle-1]) + "…"
	}
	return line
}
