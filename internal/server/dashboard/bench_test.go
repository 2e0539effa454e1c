package dashboard_test

import (
	"net/http"
	"testing"
)

// BenchmarkSessionsList renders pages of the sessions list of a server
// that stores 10,000 sessions (SQLite), as a signed-in browser asks for
// them: the first page (the default size, and the largest), a search of
// the titles, a state, and a page far down the list.
func BenchmarkSessionsList(b *testing.B) {
	s := newSite(b, false)
	recs := s.storeGenerated(10_000)
	c := s.browser()
	s.signIn(c)
	far := recs[len(recs)-1-100*50] // the last of the 100th page of 50
	for _, bc := range []struct{ name, path string }{
		{"first-page", "/sessions"},
		{"page-of-1000", "/sessions?limit=1000"},
		{"search", "/sessions?q=flaky+test+in+package+7"},
		{"state-paused", "/sessions?state=paused"},
		{"page-101", "/sessions?cursor=" + cursorOf(far.Created.UnixNano(), far.ID)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if resp, body := s.do(c, http.MethodGet, bc.path, nil); resp.StatusCode != http.StatusOK || len(rows(body)) == 0 {
					b.Fatalf("%s: %s, %d rows", bc.path, resp.Status, len(rows(body)))
				}
			}
		})
	}
}
