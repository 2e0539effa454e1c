package metrics

import (
	"strings"
	"testing"
	"time"
)

func TestWritesTheTextExpositionFormat(t *testing.T) {
	var r Registry
	c := r.Counter("x_requests_total", "Requests by route.", "route", "code")
	c.Inc("/v1/a", "200")
	c.Add(2, "/v1/a", "200")
	c.Inc(`say "hi"\`, "404")
	g := r.Gauge("x_open", "Open connections.")
	g.Add(3)
	g.Add(-1)
	r.Collected("x_sessions", "Sessions.\nBy state.", "gauge", func(add func(float64, ...string)) {
		add(5, "paused")
		add(1, "active")
	}, "state")
	r.Counter("x_refusals_total", "Refusals: scraped at 0 before the first.")
	h := r.Histogram("x_seconds", "Durations.", []float64{0.01, 1}, "verb")
	h.Observe(5*time.Millisecond, "select")
	h.Observe(2*time.Second, "select")
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP x_requests_total Requests by route.
# TYPE x_requests_total counter
x_requests_total{route="/v1/a",code="200"} 3
x_requests_total{route="say \"hi\"\\",code="404"} 1
# HELP x_open Open connections.
# TYPE x_open gauge
x_open 2
# HELP x_sessions Sessions.\nBy state.
# TYPE x_sessions gauge
x_sessions{state="active"} 1
x_sessions{state="paused"} 5
# HELP x_refusals_total Refusals: scraped at 0 before the first.
# TYPE x_refusals_total counter
x_refusals_total 0
# HELP x_seconds Durations.
# TYPE x_seconds histogram
x_seconds_bucket{verb="select",le="0.01"} 1
x_seconds_bucket{verb="select",le="1"} 1
x_seconds_bucket{verb="select",le="+Inf"} 2
x_seconds_sum{verb="select"} 2.005
x_seconds_count{verb="select"} 2
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWrongNumberOfLabelValuesPanics(t *testing.T) {
	var r Registry
	c := r.Counter("x_total", "X.", "a")
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	c.Inc()
}
