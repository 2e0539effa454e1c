package dashboard_test

import (
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/dashboard"
)

// longTranscript writes a session whose transcript is chunks chunks of per
// tool calls each, titled "step N" from 0, and returns its id and the
// transcript's writer, open.
func (s *site) longTranscript(chunks, per int) (string, io.WriteCloser) {
	t := s.t
	t.Helper()
	id := lifecycle.NewID()
	if err := s.store.CreateSession(t.Context(), &lifecycle.Record{ID: id, AgentName: "demo", State: lifecycle.Active, Settings: lifecycle.DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	tw, err := s.store.Transcript(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tw.Close() })
	for c := range chunks {
		var b strings.Builder
		for i := range per {
			n := c*per + i
			b.WriteString(toolCall(n+1, fmt.Sprintf("step %06d", n)))
		}
		if _, err := io.WriteString(tw, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	return id, tw
}

// toolCall is a transcript's record of a tool call titled title.
func toolCall(seq int, title string) string {
	return fmt.Sprintf(`{"seq":%d,"time":"2026-01-01T00:00:00Z","direction":"from_agent","kind":"notification","method":"session/update","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":{"sessionUpdate":"tool_call","toolCallId":"c%d","title":%q,"kind":"read","status":"completed"}}}}`+"\n", seq, seq, title)
}

var (
	stepTitle   = regexp.MustCompile(`step (\d{6})`)
	earlierLink = regexp.MustCompile(`<a href="/sessions/[^"?]+\?before=(\d+)#transcript-title">Show earlier messages</a>`)
	followURL   = regexp.MustCompile(`data-follow="([^"]+)"`)
	toolBlock   = regexp.MustCompile(`<article class="tool[^"]*" id="(b[0-9-]+)">(?s:.*?)step (\d{6})`)
)

// TestM5_SessionPageShowsTheLatestWindowOfALongTranscript: a session's page
// shows the latest records of a long transcript, not the whole of it, with
// a link to the earlier ones.
func TestM5_SessionPageShowsTheLatestWindowOfALongTranscript(t *testing.T) {
	s := newSite(t, false)
	id, _ := s.longTranscript(1000, 10) // about 3 MB
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK, "step 009999", "Show earlier messages")
	if strings.Contains(body, "step 000000") || len(body) > 2<<20 {
		t.Fatalf("the page holds the transcript's start, or %d bytes", len(body))
	}
	if !followURL.MatchString(body) {
		t.Fatal("the latest window does not follow the session")
	}
}

// TestM5_ShowEarlierPagesBackWithoutScript: the links to earlier messages,
// plain links, page back to the transcript's start, and every record shows
// on exactly one page; an earlier page does not follow the session and
// links to the latest messages.
func TestM5_ShowEarlierPagesBackWithoutScript(t *testing.T) {
	s := newSite(t, false)
	id, _ := s.longTranscript(1000, 10)
	c := s.browser()
	s.signIn(c)
	seen := map[int]int{}
	path, pages := "/sessions/"+id, 0
	for path != "" {
		resp, body := s.do(c, http.MethodGet, path, nil)
		want(t, resp, body, http.StatusOK)
		if pages++; pages > 1 && (followURL.MatchString(body) || !strings.Contains(body, "Latest messages")) {
			t.Fatalf("an earlier page follows the session, or has no link to the latest:\n%.2000s", body)
		}
		for _, m := range stepTitle.FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			seen[n]++
		}
		path = ""
		if m := earlierLink.FindStringSubmatch(body); m != nil {
			path = "/sessions/" + id + "?before=" + m[1]
		}
	}
	if pages < 3 {
		t.Fatalf("%d pages", pages)
	}
	for n := range 10000 {
		if seen[n] != 1 {
			t.Fatalf("step %d shows on %d pages", n, seen[n])
		}
	}
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id+"?before=x", nil)
	want(t, resp, body, http.StatusBadRequest, "?before=")
}

// followed is a session's page with a long transcript, loaded by a browser
// signed in: its body, and path, the page's events of its window.
type followed struct {
	c          *http.Client
	id         string
	tw         io.WriteCloser // more of the transcript
	body, path string
}

// pageToFollow loads the page of a session of chunks chunks of 10 records
// (longTranscript), as a browser signed in.
func (s *site) pageToFollow(chunks int) followed {
	s.t.Helper()
	id, tw := s.longTranscript(chunks, 10)
	c := s.browser()
	s.signIn(c)
	_, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	m := followURL.FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no window to follow:\n%.2000s", body)
	}
	return followed{c: c, id: id, tw: tw, body: body, path: html.UnescapeString(m[1])}
}

// TestM5_EventsFollowFromThePagesWindow: a page's event stream goes on
// from the page's window: no reset of what the page shows, and the blocks
// added get ids the page's do not have.
func TestM5_EventsFollowFromThePagesWindow(t *testing.T) {
	s := newSite(t, false)
	p := s.pageToFollow(300)
	c, tw, body := p.c, p.tw, p.body
	ids := toolIDs(body)
	if len(ids) == 0 {
		t.Fatalf("no tool calls on the page:\n%.2000s", body)
	}
	next := s.followPath(c, p.path, dashboard.EventReset, dashboard.EventAppend)
	io.WriteString(tw, toolCall(3001, "the new step"))
	name, text := next()
	added := regexp.MustCompile(`id="(b[0-9-]+)"`).FindStringSubmatch(text)
	if name != dashboard.EventAppend || !strings.Contains(text, "the new step") || strings.Contains(text, "step 002999") || added == nil || slices.Contains(slices.Collect(maps.Values(ids)), added[1]) {
		t.Fatalf("after the page's window, %s:\n%s", name, text)
	}
}

// TestBlockIDsAreStableAcrossWindows: a block keeps its id, its anchor,
// on whichever page shows it, as the transcript grows and the window moves.
func TestBlockIDsAreStableAcrossWindows(t *testing.T) {
	s := newSite(t, false)
	id, tw := s.longTranscript(500, 10)
	c := s.browser()
	s.signIn(c)
	_, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	before := toolIDs(body)
	var more strings.Builder
	for n := range 5000 {
		more.WriteString(toolCall(5001+n, fmt.Sprintf("later %d", n)))
		if n%10 == 9 {
			io.WriteString(tw, more.String())
			more.Reset()
		}
	}
	found := 0
	for path := "/sessions/" + id; path != "" && found < len(before); {
		_, body := s.do(c, http.MethodGet, path, nil)
		for step, bid := range toolIDs(body) {
			if want, ok := before[step]; ok {
				if bid != want {
					t.Fatalf("step %s is %s, was %s", step, bid, want)
				}
				found++
			}
		}
		path = ""
		if m := earlierLink.FindStringSubmatch(body); m != nil {
			path = "/sessions/" + id + "?before=" + m[1]
		}
	}
	if found != len(before) {
		t.Fatalf("found %d of the %d blocks", found, len(before))
	}
}

// toolIDs are the ids of a page's tool blocks by their step.
func toolIDs(body string) map[string]string {
	ids := map[string]string{}
	for _, m := range toolBlock.FindAllStringSubmatch(body, -1) {
		ids[m[2]] = m[1]
	}
	return ids
}

// TestM5_EventsAfterMoreThanAWindowResetToTheLatest: a page whose events
// find more written since it was loaded than a window holds gets the
// latest window as a reset, not all that was written.
func TestM5_EventsAfterMoreThanAWindowResetToTheLatest(t *testing.T) {
	s := newSite(t, false)
	p := s.pageToFollow(1)
	c, tw := p.c, p.tw
	var more strings.Builder
	for n := range 10000 {
		more.WriteString(toolCall(11+n, fmt.Sprintf("later %05d", n)))
		if n%10 == 9 {
			io.WriteString(tw, more.String())
			more.Reset()
		}
	}
	next := s.followPath(c, p.path, dashboard.EventReset, dashboard.EventAppend)
	name, text := next()
	if name != dashboard.EventReset || !strings.Contains(text, "later 09999") || strings.Contains(text, "later 00000") || len(text) > 2<<20 {
		t.Fatalf("after more than a window, %s of %d bytes", name, len(text))
	}
}

// TestM5_EventsResumeAfterTheLastEventID: the transcript's events carry
// the last chunk they render as their id; a browser that reconnects with
// it (Last-Event-ID) gets what was written after that chunk, not again
// what it was sent since the page was loaded.
func TestM5_EventsResumeAfterTheLastEventID(t *testing.T) {
	s := newSite(t, false)
	p := s.pageToFollow(300)
	c, tw, path := p.c, p.tw, p.path
	next := s.events(c, path, "", dashboard.EventReset, dashboard.EventAppend)
	io.WriteString(tw, toolCall(3001, "seen before the cut"))
	first := next()
	if first.name != dashboard.EventAppend || !strings.Contains(first.text, "seen before the cut") || first.id == "" {
		t.Fatalf("the first event: %+v", first)
	}
	io.WriteString(tw, toolCall(3002, "written after the cut"))
	again := s.events(c, path, first.id, dashboard.EventReset, dashboard.EventAppend)()
	if again.name != dashboard.EventAppend || !strings.Contains(again.text, "written after the cut") || strings.Contains(again.text, "seen before the cut") || again.id == first.id {
		t.Fatalf("after reconnecting with Last-Event-ID %s: %+v", first.id, again)
	}
	// Without it, the stream goes on from the page's window: both again.
	if all := s.events(c, path, "", dashboard.EventReset, dashboard.EventAppend)(); !strings.Contains(all.text, "seen before the cut") || !strings.Contains(all.text, "written after the cut") {
		t.Fatalf("without Last-Event-ID: %+v", all)
	}
	// An id past the transcript's end (a store restored from an older
	// backup) starts over from the latest window, without waiting.
	if past := s.events(c, path, "99999", dashboard.EventReset, dashboard.EventAppend)(); past.name != dashboard.EventReset || !strings.Contains(past.text, "written after the cut") {
		t.Fatalf("after reconnecting with a Last-Event-ID past the end: %+v", past)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.URL+path, nil)
	req.Header.Set("Last-Event-ID", "x")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want(t, resp, string(bad), http.StatusBadRequest, "Last-Event-ID is the number of the last transcript chunk")
}

// TestM5_AChunkLargerThanAWindowShowsItsLatestRecords: records written at
// once, a chunk of 3 MB, are a window of their own that shows their latest
// records, about a window of them, after a note of those left out with a
// link to the transcript's download, on the page and in its events alike
// (those of a page loaded before it was written too); the window before it
// is a page of its own.
func TestM5_AChunkLargerThanAWindowShowsItsLatestRecords(t *testing.T) {
	s := newSite(t, false)
	p := s.pageToFollow(1)
	c, id, tw := p.c, p.id, p.tw
	following := s.followPath(c, p.path, dashboard.EventReset, dashboard.EventAppend)
	var big strings.Builder
	for n := range 10000 {
		big.WriteString(toolCall(11+n, fmt.Sprintf("step %06d", 10+n)))
	}
	io.WriteString(tw, big.String())
	if name, text := following(); name != dashboard.EventAppend || !strings.Contains(text, "step 010009") || !strings.Contains(text, "earlier records written with these") || len(text) > 2<<20 {
		t.Fatalf("the events of a page loaded before: %s of %d bytes", name, len(text))
	}
	resp, body := s.do(c, http.MethodGet, "/sessions/"+id, nil)
	want(t, resp, body, http.StatusOK, "step 010009", "earlier records written with these", `<a href="/sessions/`+id+`/transcript.jsonl">Download the transcript</a>`, "Show earlier messages")
	if strings.Contains(body, "step 000010") || len(body) > 2<<20 {
		t.Fatalf("the page holds the chunk's start, or %d bytes", len(body))
	}
	shown := toolIDs(body)
	_, text := s.follow(c, id, dashboard.EventReset)()
	if !strings.Contains(text, "earlier records written with these") || len(text) > 2<<20 {
		t.Fatalf("the events' reset of %d bytes:\n%.2000s", len(text), text)
	}
	if ids := toolIDs(text); !maps.Equal(ids, shown) {
		t.Fatalf("the events show %d blocks, the page %d, or with other ids", len(ids), len(shown))
	}
	m := earlierLink.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no link to the earlier messages")
	}
	if _, body := s.do(c, http.MethodGet, "/sessions/"+id+"?before="+m[1], nil); !strings.Contains(body, "step 000009") || strings.Contains(body, "step 000010") {
		t.Fatalf("the window before the chunk:\n%.2000s", body)
	}
}
