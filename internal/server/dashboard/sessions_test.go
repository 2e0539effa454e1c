package dashboard_test

import (
	"database/sql"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/store/sessiongen"
)

// storeGenerated stores n generated sessions of agent demo (ids gen…,
// the newest last), in batches as the store takes them.
func (s *site) storeGenerated(n int) []*lifecycle.Record {
	s.t.Helper()
	recs := sessiongen.Records(n, "demo", "gen", time.Now())
	for rest := recs; len(rest) > 0; {
		batch := rest[:min(len(rest), 5000)]
		if err := s.store.CreateSessions(s.t.Context(), batch); err != nil {
			s.t.Fatal(err)
		}
		rest = rest[len(batch):]
	}
	return recs
}

var rowID = regexp.MustCompile(`<tr id="s-([^"]+)">`)

// rows are the ids of the sessions a list page shows, in its order.
func rows(page string) []string {
	var ids []string
	for _, m := range rowID.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// nextPage is the href of a list page's "Next page" link, "" for none.
func nextPage(page string) string {
	m := regexp.MustCompile(`<a href="([^"]+)" rel="next">Next page</a>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// cursorOf is the list's cursor after the session of id created at
// created (sqlstore.ListPage.Next), for a query.
func cursorOf(created int64, id string) string {
	return url.QueryEscape(fmt.Sprintf("%d.%s", created, id))
}

func ids(recs []*lifecycle.Record) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

// The list shows a session's title, linked to its page, with its id; a
// session without a title (every session recorded before titles) shows
// its id as the link. Its state is a badge in words.
func TestSessionsListShowsTitlesAndTheIDsOfUntitled(t *testing.T) {
	s := newSite(t, false)
	for _, rec := range []*lifecycle.Record{
		{ID: "old1", AgentName: "demo", State: lifecycle.Ended, Settings: lifecycle.DefaultSettings()},
		{ID: "new1", AgentName: "demo", State: lifecycle.Paused, Title: "Fix <the> build", Settings: lifecycle.DefaultSettings()},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK,
		`<a href="/sessions/new1">Fix &lt;the&gt; build</a><br><small><code>new1</code></small>`,
		`<a href="/sessions/old1"><code>old1</code></a>`,
		`<span class="badge state-paused">paused</span>`, `<span class="badge state-ended">ended</span>`)
}

// The list comes a page at a time, newest first; "Next page" goes on after
// the page's last session keeping the filters, the last page has none,
// and "Newest" goes back to the first. Oldest first is the same list the
// other way.
func TestSessionsListPagesWithTheCursorKeepingFilters(t *testing.T) {
	s := newSite(t, false)
	recs := s.storeGenerated(130)
	var newestPaused []string
	for _, r := range slices.Backward(recs) {
		if r.State == lifecycle.Paused {
			newestPaused = append(newestPaused, r.ID)
		}
	}
	c := s.browser()
	s.signIn(c)

	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK, `aria-sort="descending"`)
	newest := ids(recs)
	slices.Reverse(newest)
	if got := rows(body); !slices.Equal(got, newest[:50]) {
		t.Fatalf("the first page: %v, want the 50 newest %v", got, newest[:50])
	}
	var seen []string
	path := "/sessions?state=paused&limit=4"
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		resp, body := s.do(c, http.MethodGet, path, nil)
		want(t, resp, body, http.StatusOK)
		seen = append(seen, rows(body)...)
		if pages > 0 {
			want(t, resp, body, http.StatusOK, `<a href="/sessions?limit=4&amp;state=paused">Newest</a>`)
		}
		if path = nextPage(body); path != "" {
			if u, _ := url.Parse(path); u.Query().Get("state") != "paused" || u.Query().Get("limit") != "4" || u.Query().Get("cursor") == "" {
				t.Fatalf("the next page's link %q lost the filters", path)
			}
		}
	}
	if !slices.Equal(seen, newestPaused) {
		t.Fatalf("paused sessions page after page: %v, want %v", seen, newestPaused)
	}

	resp, body = s.do(c, http.MethodGet, "/sessions?order=oldest&limit=3", nil)
	want(t, resp, body, http.StatusOK, `aria-sort="ascending"`, `<a href="/sessions?limit=3">Newest first</a>`)
	if got := rows(body); !slices.Equal(got, ids(recs[:3])) {
		t.Fatalf("oldest first: %v, want %v", got, ids(recs[:3]))
	}
	_, body = s.do(c, http.MethodGet, nextPage(body), nil)
	if got := rows(body); !slices.Equal(got, ids(recs[3:6])) {
		t.Fatalf("oldest first, page 2: %v, want %v", got, ids(recs[3:6]))
	}
}

// A record that cannot be read is said above the list and logged; the
// other sessions are listed.
func TestSessionsListShowsTheOthersOfABrokenRecord(t *testing.T) {
	s := newSite(t, false)
	recs := s.storeGenerated(3)
	db, err := sql.Open("sqlite", filepath.Join(s.data, "blaise.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE sessions SET record = 'not a record' WHERE id = ?", recs[1].ID); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK, "Some sessions cannot be read, and are not listed: ", recs[1].ID)
	if got := rows(body); !slices.Equal(got, []string{recs[2].ID, recs[0].ID}) {
		t.Fatalf("rows %v, want the two others", got)
	}
	if !strings.Contains(s.logs.String(), "dashboard: listing sessions") {
		t.Fatalf("the broken record was not logged:\n%s", s.logs)
	}
}

// The search box finds sessions by their title's text, in any case, with
// the other filters; no match says so.
func TestSessionsListSearchesTitles(t *testing.T) {
	s := newSite(t, false)
	recs := s.storeGenerated(80)
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions?q=TASK+7", nil)
	want(t, resp, body, http.StatusOK, `<input type="search" id="q" name="q" value="TASK 7">`)
	var want7 []string
	for _, r := range slices.Backward(recs) {
		if strings.HasPrefix(r.Title, "task 7") {
			want7 = append(want7, r.ID)
		}
	}
	if got := rows(body); !slices.Equal(got, want7) {
		t.Fatalf("titles holding %q: %v, want %v", "task 7", got, want7)
	}
	resp, body = s.do(c, http.MethodGet, "/sessions?q=no+such+task", nil)
	want(t, resp, body, http.StatusOK, "<p>No sessions match.</p>")
}

// What the list cannot take is said, and the list shown as it can be: an
// unknown state, order or page size, or a cursor the list did not give,
// shows the first page of the newest.
func TestSessionsListBadParametersShowTheFirstPage(t *testing.T) {
	s := newSite(t, false)
	recs := s.storeGenerated(3)
	c := s.browser()
	s.signIn(c)
	for query, says := range map[string]string{
		"cursor=yesterday": "That page link is not one of this list: showing the first page.",
		"state=sleeping":   "Unknown state sleeping: showing every state.",
		"order=random":     "Unknown order random: showing the newest first.",
		"limit=0":          `Page size &#34;0&#34;: want a number from 1 to 1000; showing 50.`,
	} {
		resp, body := s.do(c, http.MethodGet, "/sessions?"+query, nil)
		want(t, resp, body, http.StatusOK, says)
		if got := rows(body); len(got) != 3 || got[0] != recs[2].ID {
			t.Errorf("%s: rows %v, want the 3 newest first", query, got)
		}
	}
}

// The first page of the newest refreshes itself: it names the list alone
// (/sessions/rows with its filters) for its script, which serves the rows
// and the pager without the page around them; later pages and the oldest
// first do not refresh, and neither is there a meta refresh.
func TestSessionsRowsPartForRefresh(t *testing.T) {
	s := newSite(t, false)
	s.storeGenerated(3)
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions?agent=demo", nil)
	want(t, resp, body, http.StatusOK, `<div id="session-list" data-refresh="/sessions/rows?agent=demo" data-version="`, `<script src="/assets/list.js" defer></script>`)
	if strings.Contains(body, "http-equiv") {
		t.Fatalf("the list refreshes with a meta refresh:\n%s", body)
	}
	version := regexp.MustCompile(`data-version="([^"]+)"`).FindStringSubmatch(body)[1]
	resp, part := s.do(c, http.MethodGet, "/sessions/rows?agent=demo", nil)
	want(t, resp, part, http.StatusOK, `<tr id="s-gen00000002">`, `<a href="/sessions?agent=demo">Refresh</a>`)
	if !strings.Contains(body, part) || resp.Header.Get("ETag") != `"`+version+`"` {
		t.Fatalf("the rows part (ETag %s) is not the page's list (version %s):\n%s", resp.Header.Get("ETag"), version, part)
	}
	// Unchanged, it is not sent again; changed, it is.
	if resp, part := s.do(c, http.MethodGet, "/sessions/rows?agent=demo", nil, "If-None-Match", `"`+version+`"`); resp.StatusCode != http.StatusNotModified || part != "" {
		t.Fatalf("the unchanged rows part: %s\n%s", resp.Status, part)
	}
	if _, err := s.store.UpdateSession(t.Context(), "gen00000002", func(r *lifecycle.Record) error { r.Title = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	resp, part = s.do(c, http.MethodGet, "/sessions/rows?agent=demo", nil, "If-None-Match", `"`+version+`"`)
	want(t, resp, part, http.StatusOK, ">renamed</a>")
	if strings.Contains(part, "<html") || strings.Contains(part, `<form method="get"`) {
		t.Fatalf("the rows come with the page around them:\n%s", part)
	}
	if got := rows(part); len(got) != 3 {
		t.Fatalf("the rows part lists %v", got)
	}
	for _, path := range []string{"/sessions?order=oldest", "/sessions?cursor=" + cursorOf(time.Now().UnixNano(), "gen00000002")} {
		if _, body := s.do(c, http.MethodGet, path, nil); strings.Contains(body, "data-refresh") {
			t.Errorf("%s refreshes itself", path)
		}
	}
	// Signed out, the part is not served.
	if resp, _ := s.do(s.browser(), http.MethodGet, "/sessions/rows", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the rows part, signed out: %s", resp.Status)
	}
}

// The question before ending a session names it by its title and id.
func TestEndQuestionNamesTheTitle(t *testing.T) {
	s := newSite(t, false)
	rec := &lifecycle.Record{ID: "p1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Title: "hello there", Settings: lifecycle.DefaultSettings()}
	if err := s.store.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	csrf := s.signIn(c)
	resp, body := s.do(c, http.MethodPost, "/sessions/p1/end", url.Values{"csrf": {csrf}})
	want(t, resp, body, http.StatusOK, `<h2 id="question">End session “hello there” (p1)?</h2>`)
}

// A session's page is headed by its title, as the list names it, and its
// card gives its id and title; a session without a title is headed by its
// id.
func TestASessionsPageIsHeadedByItsTitle(t *testing.T) {
	s := newSite(t, false)
	for _, rec := range []*lifecycle.Record{
		{ID: "t1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Title: "Fix <the> build", Settings: lifecycle.DefaultSettings()},
		{ID: "u1", AgentName: "demo", State: lifecycle.Paused, Runs: 1, Settings: lifecycle.DefaultSettings()},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions/t1", nil)
	want(t, resp, body, http.StatusOK, `<h1>Fix &lt;the&gt; build</h1>`, `<dt>Session</dt><dd><code>t1</code></dd>`, `<dt>Title</dt><dd>Fix &lt;the&gt; build</dd>`)
	resp, body = s.do(c, http.MethodGet, "/sessions/u1", nil)
	want(t, resp, body, http.StatusOK, `<h1>Session u1</h1>`, `<dt>Session</dt><dd><code>u1</code></dd>`)
	if strings.Contains(body, "<dt>Title</dt>") {
		t.Error("a session without a title has a Title row")
	}
}

// The list says its times relative to when it was read, each in a <time>
// element whose title (shown on hover) is the exact time in UTC, without
// script; a session whose last run ended says how long it took, one with
// a run in progress since when.
func TestSessionsListSaysTimesRelativeWithTheExactOneOnHover(t *testing.T) {
	s := newSite(t, false)
	now := time.Now().UTC()
	created := now.Add(-26 * time.Hour).Truncate(time.Second)
	expires := now.Add(50 * time.Hour).Truncate(time.Second)
	started := now.Add(-3 * time.Hour).Truncate(time.Second)
	for _, rec := range []*lifecycle.Record{
		{ID: "rested", AgentName: "demo", State: lifecycle.Paused, Created: created, ExpiresAt: expires, Runs: 1, Settings: lifecycle.DefaultSettings(),
			History: []lifecycle.RunRecord{{Run: 1, Kind: lifecycle.StartRun, Started: started, Ended: started.Add(125 * time.Second)}}},
		{ID: "running", AgentName: "demo", State: lifecycle.Active, Created: created, Runs: 1, Settings: lifecycle.DefaultSettings(),
			History: []lifecycle.RunRecord{{Run: 1, Kind: lifecycle.StartRun, Started: started}}},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	tag := func(at time.Time, text string) string {
		return fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`, at.Format(time.RFC3339), at.Format("2006-01-02 15:04:05")+" UTC", text)
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK,
		`<td data-label="Created">`+tag(created, "26 h ago")+`</td>`,
		`<td data-label="Expires">`+tag(expires, "in 2 days")+`</td>`,
		`<small>last run took 2m5s</small>`,
		`<small>running since `+tag(started, "3 h ago")+`</small>`)
}

// A session that waits for a person has a badge saying so, and why: an
// orphaned one (its teardown gave up) and a paused one whose last run
// failed; one that rests after an idle pause, or was ended, has none.
func TestSessionsListMarksTheSessionsThatWaitForAPerson(t *testing.T) {
	s := newSite(t, false)
	now := time.Now()
	for _, rec := range []*lifecycle.Record{
		{ID: "orphan", AgentName: "demo", State: lifecycle.Orphaned, Created: now.Add(-4 * time.Minute), Settings: lifecycle.DefaultSettings()},
		{ID: "failed", AgentName: "demo", State: lifecycle.Paused, Created: now.Add(-3 * time.Minute), Settings: lifecycle.DefaultSettings(),
			Pause: &lifecycle.PauseRecord{Reason: lifecycle.Failed, Error: "the agent crashed", At: now, Run: 1}},
		{ID: "idle", AgentName: "demo", State: lifecycle.Paused, Created: now.Add(-2 * time.Minute), Settings: lifecycle.DefaultSettings(),
			Pause: &lifecycle.PauseRecord{Reason: lifecycle.Idle, MayResume: true, At: now, Run: 1}},
		{ID: "ended", AgentName: "demo", State: lifecycle.Ended, EndReason: lifecycle.Failed, Created: now.Add(-time.Minute), Settings: lifecycle.DefaultSettings(),
			Pause: &lifecycle.PauseRecord{Reason: lifecycle.Failed, At: now, Run: 1}},
	} {
		if err := s.store.CreateSession(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	c := s.browser()
	s.signIn(c)
	resp, body := s.do(c, http.MethodGet, "/sessions", nil)
	want(t, resp, body, http.StatusOK)
	row := regexp.MustCompile(`<tr id="s-(\w+)">(?s:(.*?))</tr>`)
	badge := regexp.MustCompile(`<span class="badge waits">Waits for you</span> <small>([^<]+)</small>`)
	got := map[string]string{}
	for _, r := range row.FindAllStringSubmatch(body, -1) {
		if m := badge.FindStringSubmatch(r[2]); m != nil {
			got[r[1]] = m[1]
		}
	}
	wantBadges := map[string]string{"orphan": "clean up what its plugs left, then resolve it", "failed": "its last run failed"}
	if !maps.Equal(got, wantBadges) {
		t.Fatalf("badges %v, want %v\n%s", got, wantBadges, body)
	}
}
