package listen

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/charmbracelet/log"
)

// TestTheRunnersNamesReachTheServerEscaped: an agent or runner name with
// "&" or a space reaches the server as it is, not cut into other
// parameters of the connection's URL.
func TestTheRunnersNamesReachTheServerEscaped(t *testing.T) {
	got := make(chan url.Values, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == runnerproto.PathRunner {
			got <- r.URL.Query()
		}
		http.Error(w, "refused", http.StatusUnauthorized)
	}))
	defer srv.Close()
	r := &Runner{Server: srv.URL, Agent: "a&runner=b c", Name: "x y&z", HTTPClient: srv.Client(), Log: log.New(io.Discard)}
	if err := r.connect(t.Context()); !errors.Is(err, ErrRefused) {
		t.Fatalf("connect: %v, want a refusal", err)
	}
	q := <-got
	if q.Get("agent") != r.Agent || q.Get("runner") != r.Name || len(q) != 2 {
		t.Fatalf("the server got %v, want agent %q and runner %q", q, r.Agent, r.Name)
	}
}
