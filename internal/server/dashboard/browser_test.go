package dashboard_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/browsertest"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// signInBrowser signs the browser in through the sign-in page.
func (s *site) signInBrowser(tab context.Context) {
	s.t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(s.srv.URL+"/signin"), chromedp.WaitVisible(chromedp.ID("password")),
		chromedp.SendKeys(chromedp.ID("name"), "ada"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("form.signout"))); err != nil {
		s.t.Fatalf("signing in: %v", err)
	}
}

// eval evaluates js in the tab.
func eval[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// At a phone's width (390 px), every page's buttons (End, Resolve, Revoke)
// are on screen, with no horizontal scroll, and an orphaned session's long
// error wraps instead of widening its row; the error keeps its lines.
func TestPagesFitAPhoneWithTheirButtonsOnScreen(t *testing.T) {
	tab := browsertest.New(t)
	s := newSite(t, false)
	long := "Traceback (most recent call last):\n  /very/long/path/" + strings.Repeat("to/a/worktree/", 12) + "plug.star:12: in on_teardown\nError: device or resource busy"
	for _, rec := range []*lifecycle.Record{
		{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Settings: lifecycle.DefaultSettings(), Runner: "r1"},
		{ID: "o1", AgentName: "demo", State: lifecycle.Orphaned, Runs: 2, Settings: lifecycle.DefaultSettings(), Runner: "r1",
			Teardown: lifecycle.TeardownRecord{Attempts: 5, LastError: long}},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	reg, _ := s.store.MintRegistration(t.Context(), time.Hour)
	if _, _, err := s.store.Register(t.Context(), reg.Token, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.store.MintAPIToken(t.Context(), "ci"); err != nil {
		t.Fatal(err)
	}
	s.signInBrowser(tab)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/sessions", "/sessions/o1", "/sessions/p1", "/runners", "/agents", "/agents/demo"} {
		if err := chromedp.Do(tab, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if w := eval[float64](t, tab, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %.0f px wide at 390 px: it scrolls sideways", path, w)
		}
		off := eval[[]string](t, tab, `[...document.querySelectorAll("main button")].filter(b => b.offsetParent && b.getBoundingClientRect().right > innerWidth).map(b => b.textContent.trim())`)
		if len(off) > 0 {
			t.Errorf("%s: buttons off screen at 390 px: %q", path, off)
		}
	}
	// The orphaned row: its error wraps within the screen and keeps its
	// lines (innerText follows the rendering).
	if err := chromedp.Do(tab, chromedp.Navigate(s.srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#s-o1"))); err != nil {
		t.Fatal(err)
	}
	text := eval[string](t, tab, `document.querySelector("#s-o1 p.err").innerText`)
	if !strings.Contains(text, "Traceback (most recent call last):\n  /very/long/path/") || !strings.Contains(text, "in on_teardown\nError: device") {
		t.Errorf("the orphaned row's error lost its lines: %q", text)
	}
	for _, w := range []int64{390, 1280} {
		if err := chromedp.Do(tab, chromedp.EmulateViewport(w, 800)); err != nil {
			t.Fatal(err)
		}
		row := eval[float64](t, tab, `document.querySelector("#s-o1").getBoundingClientRect().width`)
		if page := eval[float64](t, tab, `document.querySelector("main").clientWidth`); row > page {
			t.Errorf("at %d px the orphaned row is %.0f px wide, its page %.0f px", w, row, page)
		}
	}
}

// In a browser, the agent page shows a paused lifetime set with `agents
// set` that it does not offer, selected; changing the idle policy alone
// and saving keeps it.
func TestL1_AgentPageShowsTheStoredPausedLifetimeInABrowser(t *testing.T) {
	tab := browsertest.New(t)
	s := newSite(t, false)
	s.setLifetime(36 * time.Hour)
	s.signInBrowser(tab)
	if err := chromedp.Do(tab, chromedp.Navigate(s.srv.URL+"/agents/demo"), chromedp.WaitVisible(chromedp.ID("paused_lifetime"))); err != nil {
		t.Fatal(err)
	}
	if shown := eval[string](t, tab, `(s => s.options[s.selectedIndex].text)(document.getElementById("paused_lifetime"))`); shown != "36 hours (set with agents set)" {
		t.Fatalf("the page shows %q selected", shown)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`input[name="idle_policy"][value="end"]`)), chromedp.Click(chromedp.CSS("main form button")),
		chromedp.WaitVisible(chromedp.CSS("p.notice"))); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.store.Agent(t.Context(), "demo"); a.Settings.PausedLifetime != 36*time.Hour || a.Settings.IdlePolicy != lifecycle.PolicyEnd {
		t.Fatalf("after saving the idle policy: %s, %s", a.Settings.IdlePolicy, a.Settings.PausedLifetime)
	}
}

// In a browser, a session's page whose event stream is cut reconnects (its
// EventSource sends the last event's id) and follows on: what was written
// after the cut shows, and what it was sent before shows once.
func TestM5_PageFollowsOnAfterItsStreamIsCut(t *testing.T) {
	tab := browsertest.New(t)
	s := newSite(t, false)
	id, tw := s.longTranscript(3, 10)
	// The page leaves before the server closes, which waits for its stream.
	t.Cleanup(func() { chromedp.Run(tab, chromedp.Navigate("about:blank")) })
	s.signInBrowser(tab)
	var mu sync.Mutex
	var resumedAfter []string // the Last-Event-ID of the stream's requests
	// The headers as the network sends them: RequestWillBeSent shows the
	// page's request without the Last-Event-ID that Chrome adds to it.
	listening := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSentExtraInfo); ok && e.Headers["Accept"] == "text/event-stream" {
			mu.Lock()
			defer mu.Unlock()
			id, _ := e.Headers["Last-Event-ID"].(string)
			resumedAfter = append(resumedAfter, id)
		}
	})
	if listening != nil {
		t.Fatal(listening)
	}
	poll := func(js string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](js, chromedp.WithPollingMutation())); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	if err := chromedp.Do(tab, chromedp.Navigate(s.srv.URL+"/sessions/"+id)); err != nil {
		t.Fatal(err)
	}
	poll(`document.querySelector("#conversation").dataset.live === "1"`)
	io.WriteString(tw, toolCall(31, "before the cut"))
	poll(`document.querySelector("#conversation").textContent.includes("before the cut")`)
	s.srv.CloseClientConnections()
	io.WriteString(tw, toolCall(32, "after the cut"))
	poll(`document.querySelector("#conversation").textContent.includes("after the cut")`)
	if n := eval[int](t, tab, `document.querySelector("#conversation").textContent.split("before the cut").length - 1`); n != 1 {
		t.Fatalf("the block sent before the cut shows %d times", n)
	}
	testsupport.Eventually(t, "the reconnection's request is seen", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(resumedAfter) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if resumedAfter[0] != "" || resumedAfter[1] == "" {
		t.Fatalf("the stream's requests came with Last-Event-ID %q: want none, then the last event's", resumedAfter)
	}
}
