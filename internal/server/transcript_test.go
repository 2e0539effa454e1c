package server

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
)

// TestTranscriptAPIReadsWholeOrAfterAChunk: a session's transcript on the
// API is the whole of it without parameters, as before; the answer names
// its last chunk, and ?after= it reads what is written since, nothing
// twice; the client streams the same.
func TestTranscriptAPIReadsWholeOrAfterAChunk(t *testing.T) {
	l := newLab(t)
	if err := l.store.CreateSession(t.Context(), &lifecycle.Record{ID: "s1", AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	tw, err := l.store.Transcript(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	get := func(query string) (string, string) {
		t.Helper()
		resp := l.request(http.MethodGet, api.PathSessions+"/s1/transcript"+query, "")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", query, resp.StatusCode, b)
		}
		return string(b), resp.Header.Get(api.HeaderTranscriptNext)
	}
	io.WriteString(tw, "{\"a\":1}\n{\"b\":2}\n")
	whole, next := get("")
	if whole != "{\"a\":1}\n{\"b\":2}\n" || next == "" {
		t.Fatalf("whole: %q, next %q", whole, next)
	}
	if more, again := get("?after=" + next); more != "" || again != next {
		t.Fatalf("nothing new: %q, next %q", more, again)
	}
	io.WriteString(tw, "{\"c\":3}\n")
	c := &apiclient.Client{URL: l.srv.URL, Token: l.token}
	after, _ := strconv.ParseInt(next, 10, 64)
	body, err := c.Transcript(t.Context(), "s1", after)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if b, err := io.ReadAll(body); err != nil || string(b) != "{\"c\":3}\n" || body.Next <= after {
		t.Fatalf("what is new: %q, %v, next %d after %d", b, err, body.Next, after)
	}
}

// TestTranscriptAPIBadAfterIs400: ?after= that is not a chunk's number is
// refused with a clear error; an unknown session's transcript is 404.
func TestTranscriptAPIBadAfterIs400(t *testing.T) {
	l := newLab(t)
	if err := l.store.CreateSession(t.Context(), &lifecycle.Record{ID: "s1", AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"x", "-1", "1.5"} {
		if status, msg := l.do(http.MethodGet, api.PathSessions+"/s1/transcript?after="+q, ""); status != http.StatusBadRequest || msg == "" {
			t.Errorf("?after=%s: %d %q", q, status, msg)
		}
	}
	if status, _ := l.do(http.MethodGet, api.PathSessions+"/"+lifecycle.NewID()+"/transcript", ""); status != http.StatusNotFound {
		t.Errorf("an unknown session's transcript: %d", status)
	}
}
