package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
)

// remoteProcess is a session process on a runner, as the engine sees it.
// Its streams come with an attachment to a runner's connection; when the
// connection breaks, the run waits for the runner to come back with it
// (a new attachment) for the lease, and is failed after that (L5).
type remoteProcess struct {
	runners  *runners
	ref      runnerproto.RunRef
	launched chan error
	exited   chan struct{}
	// carried, for a runner of protocol 4, is the run's stdout as the
	// engine reads it: the lines of its transcript appends, whose records
	// carry its messages. Nil: its stdout stream.
	carried *carriedStdout
	// action: an action run, whose output is on its stdout stream.
	action bool
	// parent, for a fork's start run, is the session forked, whose
	// persisted state the run reads (runstore.Server.Parent).
	parent string
	// direct, for a runner of protocol 7: the run's store is on
	// connections of its own (runnerproto.DialStore), which come on stores.
	direct bool
	stores chan net.Conn

	mu      sync.Mutex
	att     *attachment   // the complete attachment in use; nil until the first
	pending *attachment   // one whose streams are arriving
	changed chan struct{} // closed, and replaced, when att or failed changes
	status  string
	failed  error // the run was failed: it may not write any more
	// signalled is the strongest signal the engine asked for (SIGTERM,
	// SIGKILL): sent again on each new attachment, since a frame sent on a
	// connection that broke may never have reached the runner.
	signalled, killed bool
	store             net.Conn // the last store connection of a direct run
	storesDone        bool     // its connections are served no more
}

// attachment is a run's streams on one connection of its runner (runnerproto.RunChannels).
type attachment struct {
	rc      *runnerConn
	streams map[runnerproto.Channel]net.Conn
	ready   chan struct{} // every stream is there
}

func newAttachment(rc *runnerConn) *attachment {
	return &attachment{rc: rc, streams: map[runnerproto.Channel]net.Conn{}, ready: make(chan struct{})}
}

func (a *attachment) gone() bool {
	select {
	case <-a.rc.gone:
		return true
	default:
		return false
	}
}

func (a *attachment) close() {
	for _, st := range a.streams {
		st.Close()
	}
}

// launch starts a run on the runner and waits for its streams.
func (rc *runnerConn) launch(run engine.Launch) (*remoteProcess, error) {
	ref := runnerproto.RunRef{Session: run.Record.ID, Run: run.Record.Runs}
	select {
	case <-rc.welcomed:
	case <-rc.gone:
		return nil, fmt.Errorf("runner %s left before it was welcome", rc.name)
	}
	p, first := rc.newProcess(ref, run.Kind)
	p.parent = forkParent(run)
	forget := func(err error) (*remoteProcess, error) {
		rc.drop(p, err)
		return nil, err
	}
	launch := &runnerproto.Launch{RunRef: ref, Flags: run.Flags, Kind: run.Kind}
	if p.direct {
		launch.Ticket = rc.runners.Store.RunTicket(ref.Session, ref.Run)
	}
	if err := rc.frames.Send(runnerproto.Frame{Kind: runnerproto.KindLaunch, Launch: launch}); err != nil {
		return forget(fmt.Errorf("runner %s: %w", rc.name, err))
	}
	timeout := rc.runners.clock.After(rc.runners.lease)
	select {
	case err := <-p.launched:
		if err != nil {
			return forget(err)
		}
	case <-rc.gone:
		return forget(fmt.Errorf("runner %s left while starting the run", rc.name))
	case <-timeout:
		return forget(fmt.Errorf("runner %s did not start the run within %s", rc.name, rc.runners.lease))
	}
	if err := rc.streams(first, timeout); err != nil {
		return forget(err)
	}
	p.serveStore()
	rc.runners.metrics.runsStarted.Inc(rc.agent)
	return p, nil
}

// newProcess makes the run ref, of kind, a run of rc, whose streams are to
// come on the attachment it returns.
func (rc *runnerConn) newProcess(ref runnerproto.RunRef, kind lifecycle.Kind) (*remoteProcess, *attachment) {
	p := &remoteProcess{runners: rc.runners, ref: ref, launched: make(chan error, 1), exited: make(chan struct{}), changed: make(chan struct{}), action: kind == lifecycle.ActionRun}
	if p.carries(rc.version) {
		p.carried = newCarriedStdout()
	}
	if runnerproto.DirectStore(rc.version) {
		p.direct, p.stores = true, make(chan net.Conn, 1)
	}
	first := newAttachment(rc)
	p.pending = first
	rc.adopt(p)
	return p, first
}

// drop fails p, which never got going on rc, and forgets it.
func (rc *runnerConn) drop(p *remoteProcess, err error) {
	rc.mu.Lock()
	if rc.procs[p.ref] == p {
		delete(rc.procs, p.ref)
	}
	rc.mu.Unlock()
	p.fail(err)
	p.forget() // out of the server's runs too
}

// streams waits until the runner has opened every stream of a, or until
// timeout.
func (rc *runnerConn) streams(a *attachment, timeout <-chan time.Time) error {
	select {
	case <-a.ready:
		return nil
	case <-rc.gone:
		return fmt.Errorf("runner %s left before it opened the run's streams", rc.name)
	case <-timeout:
		return fmt.Errorf("runner %s did not open the run's streams within %s", rc.name, rc.runners.lease)
	}
}

// serveStore answers the run's store calls, on the store stream of each
// attachment in turn. One store server for the whole run: a call the run
// sends again on a new stream after a reconnection is answered, not
// applied twice.
func (p *remoteProcess) serveStore() {
	store := &runstore.Server{Store: p.runners.Store, Session: p.ref.Session, Run: p.ref.Run, MayWrite: p.mayWrite, Parent: p.parent}
	if p.carried != nil {
		store.Forward = p.carried.w
	}
	// Ends with the run's last attachment, as the run fails or exits (nextAttachment).
	go func() {
		defer func() {
			if p.carried != nil {
				// No more messages: the engine reads the run's output to its
				// end.
				p.carried.w.Close()
			}
			if err := store.Close(); err != nil {
				p.runners.Log.Error("closing a run's transcript failed", "session", p.ref.Session, "run", p.ref.Run, "err", err)
			}
		}()
		if p.direct {
			p.serveDirect(store)
			return
		}
		var last *attachment
		for {
			a := p.nextAttachment(last)
			if a == nil {
				return
			}
			last = a
			st := a.streams[runnerproto.ChannelStore]
			// The run's calls are answered as long as the run lasts, across
			// its runner's connections: no request's ctx bounds them.
			err := store.Serve(context.Background(), cutStream{st, a})
			if err == nil {
				// The run closed its side: so does the server, rather than
				// leave the stream to the close timeout of both ends.
				_ = st.Close()
				continue
			}
			if errors.Is(err, runstore.ErrTranscriptClose) {
				p.runners.Log.Error("closing a run's transcript failed", "session", p.ref.Session, "run", p.ref.Run, "err", err)
				_ = st.Close()
				continue
			}
			// Broken calls are told first: a cut never breaks them (a call
			// cut short is an unexpected end), and a run whose store broke
			// must not send its calls again on a next stream, where the
			// appends forwarded and not committed would be forwarded twice.
			if !errors.Is(err, runstore.ErrBroken) && p.cut(a, err) {
				p.runners.Log.Debug("a run's store stream ended", "session", p.ref.Session, "run", p.ref.Run, "err", err)
				continue
			}
			if !errors.Is(err, runstore.ErrBroken) {
				// The stream failed on a connection still up (a write that
				// timed out on a stalled link, a reset): the runner
				// reconnects, and the run sends again what was not answered.
				p.runners.Log.Warn("a run's store stream failed: the runner's connection is closed for it to reconnect", "session", p.ref.Session, "run", p.ref.Run, "err", err)
				_ = a.rc.mux.Close()
				continue
			}
			p.sendSignal(a, true)
			p.broken(err)
			return
		}
	}()
}

// broken fails the run whose store err broke (a call out of order, a call
// missing, a bad line): nothing reads its calls any more. Its process is
// killed, rather than left waiting for answers that do not come.
func (p *remoteProcess) broken(err error) {
	p.runners.Log.Error("a run's store failed: the run is failed", "session", p.ref.Session, "run", p.ref.Run, "err", err)
	p.fail(fmt.Errorf("its store: %w", err))
}

// cut reports whether the store stream of a ended with err because its
// connection broke, the run's process exited, the run was failed, or a
// later attachment replaced a, after which the run's store goes on (or is
// over): not a failure of the store.
func (p *remoteProcess) cut(a *attachment, err error) bool {
	if errors.Is(err, errStreamCut) || a.gone() || a.rc.mux.IsClosed() {
		return true
	}
	select {
	case <-p.exited: // its runner stopped reading the store
		return true
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed != nil || p.att != a
}

// nextAttachment waits for an attachment in use other than last; nil once
// the run has none to come: it was failed, or it exited with no other.
func (p *remoteProcess) nextAttachment(last *attachment) *attachment {
	for {
		p.mu.Lock()
		a, failed, changed := p.att, p.failed, p.changed
		p.mu.Unlock()
		if failed != nil {
			return nil
		}
		if a != nil && a != last && !a.gone() {
			return a
		}
		select {
		case <-changed:
		case <-p.exited:
			p.mu.Lock()
			a = p.att
			p.mu.Unlock()
			if a == nil || a == last {
				return nil
			}
		}
	}
}

// errStreamCut ends a store stream whose connection broke: the run's store
// goes on on the next attachment's.
var errStreamCut = errors.New("its runner's connection broke")

// cutStream is a store stream that tells its end from a cut: yamux ends
// the streams of a connection that broke as if their peer closed them.
type cutStream struct {
	net.Conn
	a *attachment
}

func (c cutStream) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == io.EOF && (c.a.gone() || c.a.rc.mux.IsClosed()) {
		return n, errStreamCut
	}
	return n, err
}

// adopt makes p a run of rc, whose streams are to come.
func (rc *runnerConn) adopt(p *remoteProcess) {
	rc.runners.mu.Lock()
	rc.runners.procs[p.ref] = p
	rc.runners.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.procs[p.ref] = p
}

// detached returns the run ref of the runner of credential id runner, if
// the server has it and its connection is gone.
func (rs *runners) detached(ref runnerproto.RunRef, runner string) *remoteProcess {
	rs.mu.Lock()
	p := rs.procs[ref]
	rs.mu.Unlock()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.att == nil || !p.att.gone() || p.att.rc.id != runner {
		return nil
	}
	return p
}

// reattach adopts the run ref on rc, a new connection of its runner:
// it reports whether the server still has the run.
func (rc *runnerConn) reattach(ref runnerproto.RunRef) bool {
	p := rc.runners.detached(ref, rc.id)
	if p == nil {
		return false
	}
	p.mu.Lock()
	if p.failed != nil || (p.carried != nil) != p.carries(rc.version) || p.direct != runnerproto.DirectStore(rc.version) {
		// A runner now of another protocol version would carry the run's
		// messages, or its store, another way.
		p.mu.Unlock()
		return false
	}
	p.pending = newAttachment(rc)
	p.mu.Unlock()
	rc.adopt(p)
	rc.runners.Log.Info("run re-attached", "session", ref.Session, "run", ref.Run, "runner", rc.name)
	return true
}

// carries reports whether the run, on a runner of version v, carries its
// messages in its transcript: an action run has none, and writes its
// output on its stdout.
func (p *remoteProcess) carries(v int) bool {
	return runnerproto.Carries(v) && !p.action
}

// OldRunnerError is the error of an action run on a runner whose protocol
// version has no action runs.
type OldRunnerError struct {
	Runner  string
	Version int
	Lacks   string // what it does not do: actions ("") or forks
}

func (e *OldRunnerError) Error() string {
	return fmt.Sprintf("runner %s speaks runner protocol version %d, which does not do %s; upgrade it to a blaise-agent of the server's version (protocol %d) and start its listen again", e.Runner, e.Version, cmp.Or(e.Lacks, "actions"), runnerproto.Version)
}

// attach adds a stream of rc to the run; the attachment is complete with
// the last of its channels (runnerproto.RunChannels).
func (p *remoteProcess) attach(rc *runnerConn, ch runnerproto.Channel, st net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.pending
	channels := runnerproto.RunChannels(rc.version)
	if a == nil || a.rc != rc || p.failed != nil || !slices.Contains(channels, ch) {
		return false
	}
	if _, dup := a.streams[ch]; dup {
		return false
	}
	a.streams[ch] = st
	if len(a.streams) == len(channels) {
		close(a.ready)
		if p.att != nil {
			p.att.close()
		}
		p.att, p.pending = a, nil
		p.signal()
		if p.signalled {
			// Ends once the frame is sent on a's connection, or the send fails.
			go p.sendSignal(a, p.killed)
		}
	}
	return true
}

// signal tells the waiters that the attachment or the failure changed;
// p.mu is held.
func (p *remoteProcess) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// current returns the attachment in use, waiting while the run is
// detached; its error says the run was failed.
func (p *remoteProcess) current() (*attachment, error) {
	for {
		p.mu.Lock()
		a, failed, changed := p.att, p.failed, p.changed
		p.mu.Unlock()
		if failed != nil {
			return nil, failed
		}
		if a != nil && !a.gone() {
			return a, nil
		}
		if a == nil {
			<-changed
			continue
		}
		select {
		case <-changed:
		case <-p.exited:
			return nil, io.EOF
		}
	}
}

func (p *remoteProcess) fail(err error) {
	p.mu.Lock()
	if p.failed != nil {
		p.mu.Unlock()
		return
	}
	p.failed = err
	for _, a := range []*attachment{p.att, p.pending} {
		if a != nil {
			a.close()
		}
	}
	if p.carried != nil {
		// Its messages go nowhere any more, as its writes are refused.
		p.carried.r.CloseWithError(err)
	}
	p.signal()
	store := p.store
	p.mu.Unlock()
	if store != nil {
		// Ends its serving. A TLS connection's close may wait for its
		// peer: not under p.mu.
		store.Close()
	}
}

func (p *remoteProcess) exit(status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
	default:
		p.status = status
		close(p.exited)
	}
}

func (p *remoteProcess) Stdin() io.WriteCloser { return p.relay(runnerproto.ChannelStdin) }
func (p *remoteProcess) Stdout() io.ReadCloser {
	if p.carried != nil {
		return p.carried.r
	}
	return p.relay(runnerproto.ChannelStdout)
}
func (p *remoteProcess) Control() io.ReadWriteCloser { return p.relay(runnerproto.ChannelControl) }
func (p *remoteProcess) CarriesMessages() bool       { return p.carried != nil }
func (p *remoteProcess) PID() int                    { return 0 }

// Wait waits for the runner to report the process's end. While the run is
// detached from its runner, it waits the lease for the runner to come back
// with it; then the run is failed, and may no longer write (L5).
func (p *remoteProcess) Wait() error {
	defer p.forget()
	for {
		a, err := p.current()
		if errors.Is(err, io.EOF) {
			return p.exitErr()
		}
		if err != nil {
			return err
		}
		p.mu.Lock()
		changed, failed := p.changed, p.failed
		p.mu.Unlock()
		if failed != nil {
			return failed
		}
		select {
		case <-p.exited:
			return p.exitErr()
		case <-changed: // failed (its store broke), or re-attached
			continue
		case <-a.rc.gone:
		}
		p.mu.Lock()
		reattached, changed, failed := p.att != a, p.changed, p.failed
		p.mu.Unlock()
		if failed != nil {
			// Failed as its runner went: the select above may have taken
			// the runner's going over the failure.
			return failed
		}
		if reattached {
			continue
		}
		select {
		case <-p.exited:
			return p.exitErr()
		case <-changed: // re-attached, or failed
		case <-p.runners.clock.After(p.runners.lease):
			err := fmt.Errorf("runner %s is gone and did not come back within %s", a.rc.name, p.runners.lease)
			p.fail(err)
			return err
		}
	}
}

func (p *remoteProcess) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == "" || p.status == "exit status 0" {
		return nil
	}
	return errors.New(p.status)
}

// forget drops the run from the server and from the connection it is
// attached to.
func (p *remoteProcess) forget() {
	p.runners.mu.Lock()
	if p.runners.procs[p.ref] == p {
		delete(p.runners.procs, p.ref)
	}
	p.runners.mu.Unlock()
	p.mu.Lock()
	a := p.att
	p.mu.Unlock()
	if a == nil {
		return
	}
	a.rc.mu.Lock()
	defer a.rc.mu.Unlock()
	if a.rc.procs[p.ref] == p {
		delete(a.rc.procs, p.ref)
	}
}

// mayWrite refuses the writes of a run the server has failed.
func (p *remoteProcess) mayWrite(ctx context.Context) error {
	p.mu.Lock()
	failed := p.failed
	p.mu.Unlock()
	if failed != nil {
		return fmt.Errorf("session %s: run %d was failed (%v): its writes are refused", p.ref.Session, p.ref.Run, failed)
	}
	run, _, err := p.runners.Store.CurrentRun(ctx, p.ref.Session)
	if err != nil {
		return err
	}
	if run != p.ref.Run {
		return fmt.Errorf("session %s: run %d is over (the session is at run %d): its writes are refused", p.ref.Session, p.ref.Run, run)
	}
	return nil
}

// Signal asks the runner to signal the run's processes. The signal is
// kept: a re-attachment sends it again (the frame may have been lost with
// the connection it was sent on).
func (p *remoteProcess) Signal(kill bool) {
	p.mu.Lock()
	p.signalled = true
	p.killed = p.killed || kill
	p.mu.Unlock()
	if a, err := p.current(); err == nil {
		p.sendSignal(a, kill)
	}
}

func (p *remoteProcess) sendSignal(a *attachment, kill bool) {
	_ = a.rc.frames.Send(runnerproto.Frame{Kind: runnerproto.KindSignal, Run: &p.ref, Kill: kill})
}

// relay is a channel of the run across its attachments: a read or a write
// cut by a broken connection goes on with the next attachment.
type relay struct {
	p  *remoteProcess
	ch runnerproto.Channel
}

func (p *remoteProcess) relay(ch runnerproto.Channel) relay { return relay{p, ch} }

func (r relay) Read(b []byte) (int, error) {
	for {
		a, err := r.p.current()
		if err != nil {
			return 0, err
		}
		n, err := a.streams[r.ch].Read(b)
		if n > 0 || err == nil {
			return n, nil
		}
		// The runner ends a stream when the process has ended, and then
		// says so; a stream cut with its connection goes on with the next
		// attachment.
		r.p.mu.Lock()
		changed := r.p.changed
		r.p.mu.Unlock()
		select {
		case <-r.p.exited:
			return 0, err
		case <-a.rc.gone:
		case <-changed:
		}
	}
}

func (r relay) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		if r.ch == runnerproto.ChannelControl {
			// A stop goes only to a connected runner (L3): it is not held
			// for one that may come back.
			r.p.mu.Lock()
			a := r.p.att
			r.p.mu.Unlock()
			if a == nil || a.gone() {
				return written, errors.New("its runner is not connected")
			}
		}
		a, err := r.p.current()
		if err != nil {
			return written, err
		}
		n, err := a.streams[r.ch].Write(b[written:])
		written += n
		if err != nil && !a.gone() {
			return written, err
		}
	}
	return written, nil
}

// Close closes the channel's stream of the attachment in use.
func (r relay) Close() error {
	r.p.mu.Lock()
	a := r.p.att
	r.p.mu.Unlock()
	if a == nil {
		return nil
	}
	return a.streams[r.ch].Close()
}

// carriedStdout is a run's output made of the lines its store server
// forwards. A pipe: the store server waits while the engine is slow to
// read, as a stream does; once the engine closes its end, what is
// forwarded is dropped.
type carriedStdout struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func newCarriedStdout() *carriedStdout {
	r, w := io.Pipe()
	return &carriedStdout{r, w}
}
