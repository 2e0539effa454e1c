package server

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/hashicorp/yamux"
)

// directRun has a runner of protocol 7 hand back a run in progress, opens
// its three streams and waits until the server has adopted it.
func (l *lab) directRun() (runnerproto.RunRef, *yamux.Session, *runnerproto.Conn) {
	l.t.Helper()
	ref := l.inProgress("demo", l.runnerID, 1, false)
	mux, frames, taken := l.helloFramesOf(runnerproto.Version, l.cred, ref)
	if !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		l.t.Fatalf("adopted: %v", taken)
	}
	l.directStreams(mux, ref)
	testsupport.Eventually(l.t, "the run is adopted", func() bool { return l.s.engine.Running(ref.Session) != nil })
	return ref, mux, frames
}

// directStreams opens the streams of a direct run on mux: no store.
func (l *lab) directStreams(mux *yamux.Session, ref runnerproto.RunRef) {
	l.t.Helper()
	for _, ch := range runnerproto.RunChannels(runnerproto.Version) {
		st, err := mux.OpenStream()
		if err != nil {
			l.t.Fatal(err)
		}
		if err := runnerproto.WriteHeader(st, runnerproto.StreamHeader{RunRef: ref, Channel: ch}); err != nil {
			l.t.Fatal(err)
		}
	}
}

// directClient is the store of a direct run as its session process has
// it: on connections to the lab's server, with the run's ticket.
func (l *lab) directClient(ref runnerproto.RunRef) *runstore.Client {
	l.t.Helper()
	ticket := l.store.RunTicket(ref.Session, ref.Run)
	r, err := runstore.Redial(l.t.Context(), func(ctx context.Context) (net.Conn, error) {
		return runstore.DialStore(ctx, l.srv.URL, ref.Session, ref.Run, ticket)
	})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { r.Close() })
	return runstore.NewClient(r)
}

// TestADirectRunsCallsWaitWhileItsRunnerIsAway: while its runner's
// connection is broken, a direct run's calls on its own store connection
// are not applied, as they were not on a store stream: they are once the
// runner is back with the run.
func TestADirectRunsCallsWaitWhileItsRunnerIsAway(t *testing.T) {
	l := newLab(t)
	ref, mux, _ := l.directRun()
	c := l.directClient(ref)
	if _, err := c.Session(t.Context(), ref.Session); err != nil {
		t.Fatal(err)
	}
	mux.Close()
	testsupport.Eventually(t, "the connection is gone", func() bool { return l.connected() == 0 })
	titled := make(chan error, 1)
	go func() { titled <- c.Titled(context.Background(), ref.Session, "while away") }()
	select {
	case err := <-titled:
		t.Fatalf("a call answered while the runner was away: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if rec, err := l.store.Session(t.Context(), ref.Session); err != nil || rec.Title == "while away" {
		t.Fatalf("the record while the runner was away: %+v %v", rec, err)
	}
	mux, _, taken := l.helloFramesOf(runnerproto.Version, l.cred, ref)
	defer mux.Close()
	if !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		t.Fatalf("taken back: %v", taken)
	}
	l.directStreams(mux, ref)
	if err := <-titled; err != nil {
		t.Fatalf("the call once the runner is back: %v", err)
	}
	if rec, err := l.store.Session(t.Context(), ref.Session); err != nil || rec.Title != "while away" {
		t.Fatalf("the record once the runner is back: %+v %v", rec, err)
	}
}

// TestL7_ADirectRunsStoreIsOnConnectionsOfItsOwn: the run of a runner of
// protocol 7 has its store on connections to the server's PathStore, with
// its ticket, which holds after the server restarted (it is sealed with
// the store key); a connection that breaks is followed by another, on
// which the run's calls go on. Another run's ticket, or none, is refused.
func TestL7_ADirectRunsStoreIsOnConnectionsOfItsOwn(t *testing.T) {
	l := newLab(t)
	ref, _, _ := l.directRun()
	ticket := l.store.RunTicket(ref.Session, ref.Run)
	var conns []net.Conn
	r, err := runstore.Redial(t.Context(), func(ctx context.Context) (net.Conn, error) {
		conn, err := runstore.DialStore(ctx, l.srv.URL, ref.Session, ref.Run, ticket)
		if err == nil {
			conns = append(conns, conn)
		}
		return conn, err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := runstore.NewClient(r)
	if rec, err := c.Session(t.Context(), ref.Session); err != nil || rec.ID != ref.Session {
		t.Fatalf("the run's record: %+v %v", rec, err)
	}
	conns[0].Close()
	if err := c.Titled(t.Context(), ref.Session, "after a cut"); err != nil {
		t.Fatalf("a call after the connection broke: %v", err)
	}
	if rec, err := l.store.Session(t.Context(), ref.Session); err != nil || rec.Title != "after a cut" {
		t.Fatalf("the record after the cut: %+v %v", rec, err)
	}
	if len(conns) != 2 {
		t.Fatalf("%d connections, want 2", len(conns))
	}
	if _, err := runstore.DialStore(t.Context(), l.srv.URL, ref.Session, ref.Run+1, ticket); !errors.Is(err, runstore.ErrTicket) {
		t.Fatalf("the ticket of run %d for run %d: %v, want it refused", ref.Run, ref.Run+1, err)
	}
	if _, err := runstore.DialStore(t.Context(), l.srv.URL, ref.Session, ref.Run+1, l.store.RunTicket(ref.Session, ref.Run+1)); !errors.Is(err, runstore.ErrNoRun) {
		t.Fatalf("a run the server does not have: %v, want ErrNoRun", err)
	}
	if _, err := runstore.DialStore(t.Context(), l.srv.URL, ref.Session, ref.Run, l.cred); !errors.Is(err, runstore.ErrTicket) {
		t.Fatalf("the runner's credential as a ticket: %v, want it refused", err)
	}
	probe, err := runstore.DialStore(t.Context(), l.srv.URL, "", 0, "")
	if err != nil {
		t.Fatalf("a probe: %v", err)
	}
	if n, err := probe.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("a probe's connection: %d bytes, %v, want it closed", n, err)
	}
}

// TestADirectRunsStoreThatFailsFailsTheRun: on a store connection of its
// own as on a store stream, calls that break the protocol (a call after
// calls that never came) fail the run, kill its process and are logged.
func TestADirectRunsStoreThatFailsFailsTheRun(t *testing.T) {
	l := newLab(t)
	ref, mux, frames := l.directRun()
	conn, err := runstore.DialStore(t.Context(), l.srv.URL, ref.Session, ref.Run, l.store.RunTicket(ref.Session, ref.Run))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	l.brokenCallsFailTheRun(ref, mux, frames, conn)
}
