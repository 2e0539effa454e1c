package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/demoagent"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
)

// fakeSessions is a lifecycle engine whose runs are demo agents in this
// process, with no plugs: enough to test the front end's routing, ids,
// pauses and resumes quickly and under the race detector.
type fakeSessions struct {
	agentDir string // the demo agents' state directory, shared by all runs

	mu       sync.Mutex
	recs     map[string]*lifecycle.Record
	n        int
	runs     []*fakeRun
	startErr error
	// bundled: the runs send the agent's session/updates in bundles with
	// the blaise id, as a session process of `blaise-agent acp` does.
	bundled bool
}

func newFakeSessions(dir string) *fakeSessions {
	return &fakeSessions{agentDir: dir, recs: map[string]*lifecycle.Record{}}
}

func (f *fakeSessions) Start(_ context.Context, config, dir string) (Run, error) {
	f.mu.Lock()
	if f.startErr != nil {
		f.mu.Unlock()
		return nil, f.startErr
	}
	f.n++
	id := fmt.Sprintf("bs%02d", f.n)
	f.recs[id] = &lifecycle.Record{ID: id, Config: config, Dir: dir, State: lifecycle.Active, Runs: 1, Resumable: true}
	f.mu.Unlock()
	return f.launch(id, 1), nil
}

// Claim: no fake run is ever adopted after a restart.
func (f *fakeSessions) Claim(context.Context, string) Run { return nil }

func (f *fakeSessions) Resume(_ context.Context, id string) (Run, error) {
	f.mu.Lock()
	rec, ok := f.recs[id]
	if !ok {
		f.mu.Unlock()
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound)
	}
	if rec.State != lifecycle.Paused {
		f.mu.Unlock()
		return nil, fmt.Errorf("session %s is %s; only a paused session can resume", id, rec.State)
	}
	rec.State, rec.Stop = lifecycle.Active, nil
	rec.Runs++
	n := rec.Runs
	f.mu.Unlock()
	return f.launch(id, n), nil
}

func (f *fakeSessions) End(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	if !ok {
		return lifecycle.ErrNotFound
	}
	rec.State, rec.EndReason = lifecycle.Ended, "closed"
	return nil
}

func (f *fakeSessions) Session(_ context.Context, id string) (*lifecycle.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.recs[id]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, lifecycle.ErrNotFound)
	}
	c := *rec
	return &c, nil
}

func (f *fakeSessions) List(context.Context) ([]*lifecycle.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*lifecycle.Record
	for _, r := range f.recs {
		c := *r
		out = append(out, &c)
	}
	return out, nil
}

func (f *fakeSessions) ReadTranscript(_ context.Context, id string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("session %s: no transcript", id)
}

func (f *fakeSessions) record(id string) lifecycle.Record {
	r, err := f.Session(context.Background(), id)
	if err != nil {
		return lifecycle.Record{}
	}
	return *r
}

// run returns the last run of a session.
func (f *fakeSessions) run(id string) *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.runs) - 1; i >= 0; i-- {
		if f.runs[i].id == id {
			return f.runs[i]
		}
	}
	return nil
}

// pauseIdle stops the session's run as idle, as the engine's inactivity
// timer does, and returns it once the session is paused.
func (f *fakeSessions) pauseIdle(t *testing.T, id string) *fakeRun {
	t.Helper()
	r := f.run(id)
	_ = r.StopIdle()
	if !r.wait(10 * time.Second) {
		t.Fatal("the run did not stop")
	}
	testsupport.Eventually(t, "the session to be paused", func() bool { return f.record(id).State == lifecycle.Paused })
	return r
}

func (f *fakeSessions) liveRuns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.runs {
		select {
		case <-r.done:
		default:
			n++
		}
	}
	return n
}

type fakeRun struct {
	f    *fakeSessions
	id   string
	num  int
	in   *io.PipeWriter
	w    *acp.Writer
	out  chan *acp.Message
	done chan struct{}

	mu      sync.Mutex
	stopped *lifecycle.StopRecord
	sent    []string // methods of the messages sent to it
}

func (f *fakeSessions) launch(id string, num int) *fakeRun {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &fakeRun{f: f, id: id, num: num, in: inW, w: acp.NewWriter(inW), out: make(chan *acp.Message, 64), done: make(chan struct{})}
	f.mu.Lock()
	f.runs = append(f.runs, r)
	f.mu.Unlock()
	agentDone := make(chan error, 1)
	go func() {
		err := demoagent.Run(context.Background(), inR, outW, demoagent.Options{StateDir: f.agentDir})
		outW.Close()
		inR.Close()
		agentDone <- err
	}()
	go func() {
		rd := acp.NewReader(outR, 0)
		if f.bundled {
			rd = bundling(outR, id)
		}
		for {
			m, err := rd.Next()
			if err != nil {
				break
			}
			if m.Kind == acp.Response {
				if sid, ok := stringMember(m.Result, "sessionId"); ok {
					f.mu.Lock()
					f.recs[id].ACPSessionID = sid
					f.mu.Unlock()
				}
			}
			r.out <- m
		}
		close(r.out)
		err := <-agentDone
		r.mu.Lock()
		stop := r.stopped
		r.mu.Unlock()
		f.mu.Lock()
		rec := f.recs[id]
		switch {
		case stop != nil && stop.MayResume:
			rec.State = lifecycle.Paused
			rec.Pause = &lifecycle.PauseRecord{Reason: stop.Reason, MayResume: true, Run: num}
		case stop != nil:
			rec.State, rec.EndReason = lifecycle.Ended, stop.Reason
			rec.Pause = &lifecycle.PauseRecord{Reason: stop.Reason, Run: num}
		default: // the agent went away on its own: a failed run, which may resume
			rec.State = lifecycle.Paused
			rec.Pause = &lifecycle.PauseRecord{Reason: "failed", MayResume: true, Run: num, Error: fmt.Sprint(err)}
		}
		f.mu.Unlock()
		close(r.done)
	}()
	return r
}

// bundling returns a checked Reader of the agent's output as a session
// process with a bundled client writes it.
func bundling(agentOut io.Reader, id string) *acp.Reader {
	pr, pw := io.Pipe()
	go func() {
		rd, w := acp.NewReader(agentOut, 0), acp.NewWriter(pw)
		for {
			m, err := rd.Next()
			if err != nil {
				break
			}
			if m.Kind == acp.Notification && m.Method == "session/update" {
				_ = w.WriteBundled(m, m.SessionID(), quote(id), acp.Now)
			} else {
				_ = w.WriteMessage(m, acp.Now)
			}
		}
		_ = w.Flush()
		pw.Close()
	}()
	return acp.NewCheckedReader(pr, 0)
}

func (r *fakeRun) SessionID() string             { return r.id }
func (r *fakeRun) Number() int                   { return r.num }
func (r *fakeRun) Messages() <-chan *acp.Message { return r.out }
func (r *fakeRun) Done() <-chan struct{}         { return r.done }
func (r *fakeRun) StopIdle() error {
	return r.Stop(lifecycle.Stop{Reason: lifecycle.Idle, MayResume: true})
}
func (r *fakeRun) wait(d time.Duration) bool { return waitClosed(r.done, d) }
func (r *fakeRun) methods() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.sent, ",")
}
func waitClosed(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

func (r *fakeRun) Send(m *acp.Message) error {
	select {
	case <-r.done:
		return errors.New("the run has ended")
	default:
	}
	r.mu.Lock()
	if m.Method != "" {
		r.sent = append(r.sent, m.Method)
	}
	r.mu.Unlock()
	if m.Kind == acp.Request && (m.Method == "session/new" || m.Method == "session/load") {
		// As engine.Live does: what a resume loads the session with.
		cwd, _ := stringMember(m.Params, "cwd")
		r.f.mu.Lock()
		r.f.recs[r.id].CWD, r.f.recs[r.id].MCPServers = cwd, memberValue(m.Params, "mcpServers")
		r.f.mu.Unlock()
	}
	return r.w.Write(m.Raw)
}

// Stop records the stop, then closes the agent's input: the demo agent
// ends its turns and returns.
func (r *fakeRun) Stop(s lifecycle.Stop) error {
	r.mu.Lock()
	if r.stopped != nil {
		r.mu.Unlock()
		return nil
	}
	r.stopped = &lifecycle.StopRecord{Stop: s, Run: r.num}
	r.mu.Unlock()
	r.f.mu.Lock()
	r.f.recs[r.id].Stop = r.stopped
	r.f.mu.Unlock()
	go func() {
		_ = r.w.Flush()
		r.in.Close()
	}()
	return nil
}
