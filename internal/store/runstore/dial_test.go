package runstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/store/storetest"
)

// storeServer serves a run's store connections as a Blaise server does
// (runner protocol 7): each new one is served once the one before it has
// ended, which it cuts.
type storeServer struct {
	t      *testing.T
	srv    *Server
	ticket string
	// serve, when set, serves a connection instead of srv.
	serve func(net.Conn)

	mu    sync.Mutex
	conns []net.Conn
}

func (s *storeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Query().Get("run") != "1":
		RefuseStore(w, http.StatusNotFound, "no such run here")
		return
	case r.Header.Get("Authorization") != "Bearer "+s.ticket:
		RefuseStore(w, http.StatusForbidden, "not the run's ticket")
		return
	}
	conn, err := AcceptStore(w, r)
	if err != nil {
		s.t.Errorf("accept: %v", err)
		return
	}
	s.mu.Lock()
	if n := len(s.conns); n > 0 {
		s.conns[n-1].Close()
	}
	s.conns = append(s.conns, conn)
	serve := s.serve
	s.mu.Unlock()
	if serve != nil {
		serve(conn)
		return
	}
	_ = s.srv.Serve(context.Background(), conn)
	conn.Close()
}

// cut closes the connection in use, as a broken network would: the last
// one taken, which is the one in use once a call was answered on it.
func (s *storeServer) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[len(s.conns)-1].Close()
}

func (s *storeServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// dialedClient returns a client of the run's store on connections to ts
// that it dials with ticket.
func dialedClient(t *testing.T, ts *httptest.Server, id, ticket string) (*Client, error) {
	r, err := Redial(t.Context(), func(ctx context.Context) (net.Conn, error) {
		return DialStore(ctx, ts.URL, id, 1, ticket)
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { r.Close() })
	return NewClient(r), nil
}

func newStoreServer(t *testing.T, srv *Server) (*storeServer, *httptest.Server) {
	s := &storeServer{t: t, srv: srv, ticket: "t1"}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// TestL7_AStoreOnConnectionsOfItsOwnSurvivesTheirCuts: a run whose store
// is on connections of its own dials the next when one is cut, sends
// again what was not answered, and the server applies each call once: the
// transcript holds every line once, in order, and a persisted write made
// across the cuts is there.
func TestL7_AStoreOnConnectionsOfItsOwnSurvivesTheirCuts(t *testing.T) {
	store, id := newStore(t)
	s, ts := newStoreServer(t, &Server{Store: store, Session: id, Run: 1})
	c, err := dialedClient(t, ts, id, "t1")
	if err != nil {
		t.Fatal(err)
	}
	// A call answered: the server has the connection, which cut cuts.
	if _, err := c.Session(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Transcript(t.Context(), id)
	var want strings.Builder
	for i := range 200 {
		line := fmt.Sprintf("{\"seq\":%d,\"text\":%q}\n", i, strings.Repeat("x", 1000))
		want.WriteString(line)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if i%50 == 25 {
			s.cut()
			if err := c.Persisted().Set(t.Context(), id, "p", "acme/p", fmt.Appendf(nil, `{"v":%d}`, i)); err != nil {
				t.Fatalf("a persisted write after a cut: %v", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	if got := storetest.ReadTranscript(t, store, id); got != want.String() {
		t.Fatalf("the transcript holds %d bytes, want %d: each line once, in order", len(got), want.Len())
	}
	if v, ok, err := store.Persisted().Get(t.Context(), id, "p"); err != nil || !ok || string(v) != `{"v":175}` {
		t.Fatalf("persisted: %q %v %v", v, ok, err)
	}
	if n := s.count(); n < 5 {
		t.Fatalf("%d connections, want 5 or more: one, and one after each of 4 cuts", n)
	}
}

// TestAnAnswerCutShortIsDroppedAndItsCallSentAgain: the part of an answer
// that a broken connection let through never reaches the client, which
// sends the call again on the next connection and gets its answer there.
func TestAnAnswerCutShortIsDroppedAndItsCallSentAgain(t *testing.T) {
	store, id := newStore(t)
	srv := &Server{Store: store, Session: id, Run: 1}
	s, ts := newStoreServer(t, srv)
	s.serve = func(conn net.Conn) {
		// The first connection reads a call and breaks within its answer.
		s.mu.Lock()
		s.serve = nil
		s.mu.Unlock()
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			t.Errorf("the first call: %v", err)
		}
		fmt.Fprint(conn, `{"id":1,"record":{"id":"`)
		conn.Close()
	}
	c, err := dialedClient(t, ts, id, "t1")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Session(t.Context(), id)
	if err != nil || rec.ID != id {
		t.Fatalf("session: %+v %v", rec, err)
	}
	if n := s.count(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestAStoreConnectionIsRefusedWithAnotherTicket: the server's refusal of
// the ticket ends the dialing with ErrTicket; a run the server does not
// have is ErrNoRun, which a Redialer dials again after.
func TestAStoreConnectionIsRefusedWithAnotherTicket(t *testing.T) {
	store, id := newStore(t)
	_, ts := newStoreServer(t, &Server{Store: store, Session: id, Run: 1})
	if _, err := dialedClient(t, ts, id, "t2"); !errors.Is(err, ErrTicket) {
		t.Fatalf("another ticket: %v, want ErrTicket", err)
	}
	if _, err := DialStore(t.Context(), ts.URL, id, 2, "t1"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("another run: %v, want ErrNoRun", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if _, err := DialStore(t.Context(), plain.URL, id, 1, "t1"); err == nil || errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a server without store connections: %v, want its answer, not ErrNoRun", err)
	}
}

// TestARedialerClosedEndsItsClient: Close ends the client's reading, and
// the client's calls fail from then on.
func TestARedialerClosedEndsItsClient(t *testing.T) {
	store, id := newStore(t)
	_, ts := newStoreServer(t, &Server{Store: store, Session: id, Run: 1})
	r, err := Redial(t.Context(), func(ctx context.Context) (net.Conn, error) { return DialStore(ctx, ts.URL, id, 1, "t1") })
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(r)
	if _, err := c.Session(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Session(t.Context(), id)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still answered after Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTheFirstStoreConnectionIsDialledAgainUntilTheServerHasTheRun: a
// server that has no such run yet (404: after a restart, until the
// runner is back) is dialled again; the Redialer is made once it answers
// 101.
func TestTheFirstStoreConnectionIsDialledAgainUntilTheServerHasTheRun(t *testing.T) {
	store, id := newStore(t)
	s, ts := newStoreServer(t, &Server{Store: store, Session: id, Run: 1})
	dials := 0
	r, err := Redial(t.Context(), func(ctx context.Context) (net.Conn, error) {
		dials++
		run := 1
		if dials <= 3 {
			run = 2 // a run the test's server does not have
		}
		return DialStore(ctx, ts.URL, id, run, s.ticket)
	})
	if err != nil {
		t.Fatalf("after %d dials: %v", dials, err)
	}
	defer r.Close()
	if dials != 4 {
		t.Fatalf("%d dials, want 4: three refused, then the run's", dials)
	}
	if rec, err := NewClient(r).Session(t.Context(), id); err != nil || rec.ID != id {
		t.Fatalf("session: %+v %v", rec, err)
	}
}
