package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/hashicorp/yamux"
)

// inProgress creates a session of agent whose run runs is in progress
// (paused: it paused since) on the runner of credential id runnerID,
// named r1, and returns its run ref.
func (l *lab) inProgress(agent, runnerID string, runs int, paused bool) runnerproto.RunRef {
	l.t.Helper()
	now := time.Now()
	rec := &lifecycle.Record{ID: l.store.NewSessionID(), Config: "/blaise.star", State: lifecycle.Active, Created: now, Updated: now,
		Settings: lifecycle.DefaultSettings(), Resumable: true, AgentName: agent, Runner: "r1", RunnerID: runnerID}
	for range runs {
		lifecycle.BeginRun(rec, lifecycle.StartRun, now)
	}
	if paused {
		lifecycle.ApplyPause(rec, lifecycle.Pause{Reason: lifecycle.Idle, MayResume: true}.Record(rec.Runs, now))
	}
	if err := l.store.CreateSession(l.t.Context(), rec); err != nil {
		l.t.Fatal(err)
	}
	return runnerproto.RunRef{Session: rec.ID, Run: 1}
}

// register registers another runner named name and returns its
// credential.
func (l *lab) register(name string) string {
	l.t.Helper()
	reg, err := l.store.MintRegistration(l.t.Context(), time.Hour)
	if err != nil {
		l.t.Fatal(err)
	}
	cred, _, err := l.store.Register(l.t.Context(), reg.Token, name)
	if err != nil {
		l.t.Fatal(err)
	}
	return cred
}

// hello connects a runner with the credential cred, which hands back refs
// in its hello; it returns the connection and the runs the server takes
// back.
func (l *lab) hello(cred string, refs ...runnerproto.RunRef) (*yamux.Session, []runnerproto.RunRef) {
	l.t.Helper()
	mux, _, taken := l.helloFrames(cred, refs...)
	return mux, taken
}

// nextFrame receives the next frame on conn; a frame that could not be
// read has the error as its kind.
func nextFrame(conn *runnerproto.Conn) <-chan runnerproto.Frame {
	got := make(chan runnerproto.Frame, 1)
	go func() {
		f, err := conn.Receive()
		if err != nil {
			f.Kind = runnerproto.Kind(err.Error())
		}
		got <- f
	}()
	return got
}

// helloFrames is hello, which also returns the connection's frames.
func (l *lab) helloFrames(cred string, refs ...runnerproto.RunRef) (*yamux.Session, *runnerproto.Conn, []runnerproto.RunRef) {
	l.t.Helper()
	return l.helloFramesOf(runnerproto.Relayed, cred, refs...)
}

// helloFramesOf is helloFrames of a runner of protocol version.
func (l *lab) helloFramesOf(version int, cred string, refs ...runnerproto.RunRef) (*yamux.Session, *runnerproto.Conn, []runnerproto.RunRef) {
	l.t.Helper()
	mux, st := l.runnerStreamOf(cred, version)
	frames := runnerproto.NewConn(st)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: version, Runner: "r1", Runs: refs}); err != nil {
		l.t.Fatal(err)
	}
	w, err := frames.Receive()
	if err != nil || w.Kind != runnerproto.KindWelcome || w.Error != "" {
		l.t.Fatalf("welcome: %+v %v", w, err)
	}
	return mux, frames, w.Runs
}

// openStreams opens the streams of ref on mux, the store's first, and
// returns the store's.
func (l *lab) openStreams(mux *yamux.Session, ref runnerproto.RunRef) *yamux.Stream {
	l.t.Helper()
	var store *yamux.Stream
	for _, ch := range []runnerproto.Channel{runnerproto.ChannelStore, runnerproto.ChannelStdin, runnerproto.ChannelStdout, runnerproto.ChannelControl} {
		st, err := mux.OpenStream()
		if err != nil {
			l.t.Fatal(err)
		}
		if err := runnerproto.WriteHeader(st, runnerproto.StreamHeader{RunRef: ref, Channel: ch}); err != nil {
			l.t.Fatal(err)
		}
		if ch == runnerproto.ChannelStore {
			store = st
		}
	}
	return store
}

// handBack has the runner of l.cred hand ref back in its hello, opens the
// run's streams, and waits until the server has adopted it.
func (l *lab) handBack(ref runnerproto.RunRef) *yamux.Session {
	l.t.Helper()
	mux, _ := l.hello(l.cred, ref)
	l.openStreams(mux, ref)
	testsupport.Eventually(l.t, "the run is adopted", func() bool { return l.s.engine.Running(ref.Session) != nil })
	return mux
}

// TestRunsTheServerCannotTakeBackAreStopped: after a restart, a
// runner hands back the runs it still has; the server takes none whose
// record moved on (paused, at a later run), of another agent or runner, or
// of a session it does not have, so that the runner stops them, and their
// records stay as they were.
func TestRunsTheServerCannotTakeBackAreStopped(t *testing.T) {
	l := newLab(t)
	if _, err := l.store.CreateAgent(t.Context(), sqlstore.Agent{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	refs := []runnerproto.RunRef{
		l.inProgress("demo", l.runnerID, 1, true),  // paused since
		l.inProgress("demo", l.runnerID, 2, false), // at its next run
		l.inProgress("other", l.runnerID, 1, false),
		l.inProgress("demo", "another-runner", 1, false),
		{Session: "nosuchsess01", Run: 1},
	}
	before := map[string]time.Time{}
	for _, ref := range refs[:4] {
		rec, err := l.store.Session(t.Context(), ref.Session)
		if err != nil {
			t.Fatal(err)
		}
		before[ref.Session] = rec.Updated
	}
	if _, taken := l.hello(l.cred, refs...); len(taken) != 0 {
		t.Fatalf("the server took back %v", taken)
	}
	for id, updated := range before {
		if rec, err := l.store.Session(t.Context(), id); err != nil || !rec.Updated.Equal(updated) || l.s.engine.Running(id) != nil {
			t.Errorf("session %s changed: %+v %v", id, rec, err)
		}
	}
}

// TestARunnerOfTheSameNameCannotTakeARunBack: runner names are not unique, so
// the run goes back only to the runner of the credential it was launched on;
// another runner registered as r1 gets nothing.
func TestARunnerOfTheSameNameCannotTakeARunBack(t *testing.T) {
	l := newLab(t)
	ref, impostor := l.runOfR1WithAnImpostor()
	l.onlyItsRunnerTakesBack(ref, impostor, "took back")
}

// runOfR1WithAnImpostor creates a run in progress on the lab's runner r1
// and registers another runner named r1; it returns the run and the other
// runner's credential.
func (l *lab) runOfR1WithAnImpostor() (runnerproto.RunRef, string) {
	l.t.Helper()
	impostor := l.register("r1")
	return l.inProgress("demo", l.runnerID, 1, false), impostor
}

// onlyItsRunnerTakesBack checks that the runner of credential impostor
// gets nothing of ref in its hello, and that the run's own runner gets it
// (how says how).
func (l *lab) onlyItsRunnerTakesBack(ref runnerproto.RunRef, impostor, how string) {
	l.t.Helper()
	if _, taken := l.hello(impostor, ref); len(taken) != 0 {
		l.t.Fatalf("another runner named r1 %s %v", how, taken)
	}
	if _, taken := l.hello(l.cred, ref); !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		l.t.Fatalf("the run's own runner %s %v, want %v", how, taken, ref)
	}
}

// TestARunHandedBackTwiceIsTakenOnce: a run named twice in a hello is taken
// back once, and adopted once its streams are there.
func TestARunHandedBackTwiceIsTakenOnce(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, false)
	mux, taken := l.hello(l.cred, ref, ref)
	if !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		t.Fatalf("adopted: %v, want %v once", taken, ref)
	}
	l.openStreams(mux, ref)
	testsupport.Eventually(t, "the run is adopted", func() bool { return l.s.engine.Running(ref.Session) != nil })
}

// TestADroppedRunLeavesItsSuccessor: a run the server gives up forgets only
// itself, not another process of the same run ref that the connection has
// since.
func TestADroppedRunLeavesItsSuccessor(t *testing.T) {
	l := newLab(t)
	l.s.init()
	rc := &runnerConn{runners: l.s.runners, name: "r1", gone: make(chan struct{}), welcomed: make(chan struct{}), procs: map[runnerproto.RunRef]*remoteProcess{}}
	ref := runnerproto.RunRef{Session: "sess", Run: 1}
	old, _ := rc.newProcess(ref, lifecycle.StartRun)
	successor, _ := rc.newProcess(ref, lifecycle.StartRun)
	rc.drop(old, errors.New("given up"))
	if got := rc.proc(&ref); got != successor {
		t.Fatalf("after the old process was dropped the connection has %p, want its successor %p", got, successor)
	}
}

// TestARunSettledBeforeItsStreamsWritesNothing: a run handed back whose
// session was settled (failed, by the sweep after AdoptUntil) before its
// streams were there is not adopted, and its store calls are not applied.
func TestARunSettledBeforeItsStreamsWritesNothing(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, false)
	mux, taken := l.hello(l.cred, ref)
	if len(taken) != 1 {
		t.Fatalf("adopted: %v", taken)
	}
	if _, err := l.store.UpdateSession(t.Context(), ref.Session, func(r *lifecycle.Record) error {
		lifecycle.ApplyPause(r, lifecycle.Pause{Reason: lifecycle.Failed, MayResume: true, Err: errors.New("its runner did not hand it back")}.Record(1, time.Now()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	store := runstore.NewClient(l.openStreams(mux, ref))
	if err := store.Persisted().Set(context.Background(), ref.Session, "p", "acme/p", []byte(`"late"`)); err == nil {
		t.Fatal("a persisted write of a run that was not adopted was applied")
	}
	if _, ok, err := l.store.PersistedPlug(t.Context(), ref.Session, "p"); ok || err != nil {
		t.Fatalf("the write of a run not adopted is in the store: %v %v", ok, err)
	}
}

// TestARunnerOfTheSameNameCannotReattachARun: a run whose runner's connection
// broke goes back only to a connection of the same credential, not to another
// runner registered as r1.
func TestARunnerOfTheSameNameCannotReattachARun(t *testing.T) {
	l := newLab(t)
	ref, impostor := l.runOfR1WithAnImpostor()
	mux := l.handBack(ref)
	mux.Close()
	testsupport.Eventually(t, "the connection is gone", func() bool { return l.connected() == 0 })
	l.onlyItsRunnerTakesBack(ref, impostor, "re-attached")
}

// TestL5_ASignalLostWithItsConnectionIsSentAgain (L5): a kill the
// server sent on a connection that broke before the runner read it is
// sent again once the run is re-attached; else a run that ignores its
// stop would outlive its kill.
func TestL5_ASignalLostWithItsConnectionIsSentAgain(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, false)
	mux := l.handBack(ref)
	l.s.runners.mu.Lock()
	p := l.s.runners.procs[ref]
	l.s.runners.mu.Unlock()
	// Sent, never read: the connection breaks with the frames in it.
	p.Signal(false)
	p.Signal(true)
	mux.Close()
	testsupport.Eventually(t, "the connection is gone", func() bool { return l.connected() == 0 })
	mux, frames, taken := l.helloFrames(l.cred, ref)
	if !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		t.Fatalf("adopted: %v", taken)
	}
	l.openStreams(mux, ref)
	got := nextFrame(frames)
	select {
	case f := <-got:
		if f.Kind != runnerproto.KindSignal || f.Run == nil || *f.Run != ref || !f.Kill {
			t.Fatalf("after the re-attachment the runner got %+v, want SIGKILL for %v", f, ref)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the kill sent on the broken connection was not sent again")
	}
}

// TestAStoreStreamThatFailsFailsTheRun: a store stream that ends
// with an error other than a cut (here a call after calls that never
// came) leaves nobody to read the run's calls: the server logs it as an
// error, kills the run's process, closes its streams and fails the run,
// instead of leaving the run waiting for answers.
func TestAStoreStreamThatFailsFailsTheRun(t *testing.T) {
	l := newLab(t)
	ref := l.inProgress("demo", l.runnerID, 1, false)
	mux, frames, taken := l.helloFrames(l.cred, ref)
	if !slices.Equal(taken, []runnerproto.RunRef{ref}) {
		t.Fatalf("adopted: %v", taken)
	}
	store := l.openStreams(mux, ref)
	testsupport.Eventually(t, "the run is adopted", func() bool { return l.s.engine.Running(ref.Session) != nil })
	l.brokenCallsFailTheRun(ref, mux, frames, store)
}

// brokenCallsFailTheRun sends, on the run's store (stream or connection),
// call 5 after calls 1 to 4 that never came, and checks that the server
// kills the run's process, closes its store, fails the run and logs why.
func (l *lab) brokenCallsFailTheRun(ref runnerproto.RunRef, mux *yamux.Session, frames *runnerproto.Conn, store io.ReadWriter) {
	t := l.t
	t.Helper()
	got := nextFrame(frames)
	line, _ := json.Marshal(map[string]any{"id": 5, "op": runstore.OpSession, "session": ref.Session})
	if _, err := store.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-got:
		if f.Kind != runnerproto.KindSignal || f.Run == nil || *f.Run != ref || !f.Kill {
			t.Fatalf("the runner got %+v, want SIGKILL for %v", f, ref)
		}
	case <-time.After(testsupport.Patience):
		t.Fatal("the run whose store failed was not killed")
	}
	if _, err := io.ReadAll(store); err != nil {
		t.Fatalf("the store: %v", err)
	}
	// Killed, the process ends, and so do its streams.
	mux.Close()
	testsupport.Eventually(t, "the run's end", func() bool { return l.s.engine.Running(ref.Session) == nil })
	rec, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pause == nil || !strings.Contains(rec.Pause.Error, "calls 1 to 4 are missing") {
		t.Fatalf("the run ended with %+v, want it failed by its store", rec.Pause)
	}
	logs := l.logs.String()
	if !strings.Contains(logs, "ERRO") || !strings.Contains(logs, "calls 1 to 4 are missing") || !strings.Contains(logs, ref.Session) {
		t.Fatalf("the server's log does not report the store's failure with its session:\n%s", logs)
	}
}

// TestAWelcomedRunnerIsOneOfItsAgents: once a runner has its
// welcome, it is one of its agent's runners, so that a session started as
// soon as it says it is connected finds it. The runner used to be added
// after its welcome was sent: on a loaded machine a session started
// meanwhile found no runner (the lifecycle suite on PostgreSQL failed so
// once); here the window is too short to be hit each time, and the test
// guards the order rather than proves it.
func TestAWelcomedRunnerIsOneOfItsAgents(t *testing.T) {
	l := newLab(t)
	for i := 0; i < 20; i++ {
		mux, _ := l.hello(l.cred)
		if n := l.connected(); n != 1 {
			t.Fatalf("connection %d: %d runners of the agent when the runner was welcomed", i, n)
		}
		mux.Close()
		testsupport.Eventually(t, "the runner is gone", func() bool { return l.connected() == 0 })
	}
}

// TestARunnerOfVersion3IsServed: a server serves the runners of
// the version before its own, whose runs send their messages on their
// stdout streams; a runner that offers both versions speaks the newest,
// whose runs carry their messages in their transcripts.
func TestARunnerOfVersion3IsServed(t *testing.T) {
	l := newLab(t)
	ws, _, err := l.dialRunner(l.cred, runnerproto.Subprotocol(runnerproto.Version), runnerproto.Subprotocol(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := ws.Subprotocol(); got != runnerproto.Subprotocol(runnerproto.Version) {
		t.Errorf("a runner offering both versions speaks %q", got)
	}
	ws.CloseNow()
	for _, version := range []int{3, runnerproto.Version} {
		ref := l.inProgress("demo", l.runnerID, 1, false)
		mux, st := l.runnerStreamOf(l.cred, version)
		frames := runnerproto.NewConn(st)
		if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: version, Runner: "r1", Runs: []runnerproto.RunRef{ref}}); err != nil {
			t.Fatal(err)
		}
		if w, err := frames.Receive(); err != nil || w.Error != "" || !slices.Contains(w.Runs, ref) {
			t.Fatalf("version %d: welcome %+v %v", version, w, err)
		}
		l.openStreams(mux, ref)
		testsupport.Eventually(t, "the run is adopted", func() bool { return l.s.engine.Running(ref.Session) != nil })
		l.s.runners.mu.Lock()
		p := l.s.runners.procs[ref]
		l.s.runners.mu.Unlock()
		if p == nil || p.CarriesMessages() != (version >= 4) || p.direct != (version >= 7) {
			t.Errorf("a run of a runner of version %d: %+v, carries its messages in its transcript: %v, its store on connections of its own: %v", version, p, p != nil && p.CarriesMessages(), p != nil && p.direct)
		}
		mux.Close()
	}
}

// TestARunnerThatDoesNotSayItsConfigurationLeavesNoneInTheSession: a
// session records the configuration and directory of the runner that
// takes its run, as the runner's hello says them. A runner from before
// hello carried them says neither, and the session then has none: not
// another runner's, nor the front end's.
func TestARunnerThatDoesNotSayItsConfigurationLeavesNoneInTheSession(t *testing.T) {
	l := newLab(t)
	_, frames, _ := l.helloFrames(l.cred) // a hello without config and dir
	ref := l.inProgress("demo", l.runnerID, 1, true)
	if _, err := l.store.UpdateSession(t.Context(), ref.Session, func(r *lifecycle.Record) error {
		r.Config, r.Dir = "/srv/other-runner/blaise.star", "/srv/other-runner"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rec, err := l.store.Session(t.Context(), ref.Session)
	if err != nil {
		t.Fatal(err)
	}
	launched := make(chan error, 1)
	go func() {
		_, err := l.s.runners.Launch(t.Context(), engine.Launch{Record: rec})
		launched <- err
	}()
	f, err := frames.Receive()
	if err != nil || f.Kind != runnerproto.KindLaunch {
		t.Fatalf("the runner got %+v %v, want a launch", f, err)
	}
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunched, Run: &f.Launch.RunRef, Error: "not this time"}); err != nil {
		t.Fatal(err)
	}
	if err := <-launched; err == nil || !strings.Contains(err.Error(), "not this time") {
		t.Fatalf("launch: %v", err)
	}
	if rec, err = l.store.Session(t.Context(), ref.Session); err != nil {
		t.Fatal(err)
	}
	if rec.Runner != "r1" || rec.Config != "" || rec.Dir != "" {
		t.Fatalf("the session of a runner that said nothing: runner %q, config %q, directory %q; want r1 and none", rec.Runner, rec.Config, rec.Dir)
	}
}

// A runner whose connection ended was last seen then, not when it
// connected (the runners page shows it).
func TestARunnerIsLastSeenWhenItsConnectionEnds(t *testing.T) {
	l := newLab(t)
	seen := func() time.Time {
		rs, err := l.store.Runners(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.ID == l.runnerID {
				return r.LastSeen
			}
		}
		t.Fatalf("no runner %s in %v", l.runnerID, rs)
		return time.Time{}
	}
	mux, _ := l.hello(l.cred)
	connected := seen()
	mux.Close()
	if !testsupport.Wait(func() bool { return seen().After(connected) }) {
		t.Fatalf("the runner is still last seen at %s, as it connected; the server's log:\n%s", seen().Format(time.RFC3339Nano), l.logs.String())
	}
}
