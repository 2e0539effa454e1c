package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
)

// The store of a direct run (runner protocol 7) is on connections its
// session process opens to the server (runstore.DialStore), not on its
// runner's: the server takes them (store) and serves them one after the
// other (serveDirect).

// store takes a store connection of a run on a runner of protocol 7,
// opened by its session process with the run's ticket; a probe (no ticket)
// is answered and closed.
func (rs *runners) store(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("probe") != "" {
		if conn, err := runstore.AcceptStore(w, r); err == nil {
			conn.Close()
		}
		return
	}
	run, err := strconv.Atoi(q.Get("run"))
	ref := runnerproto.RunRef{Session: q.Get("session"), Run: run}
	if err != nil || !rs.Store.RunTicketValid(ref.Session, ref.Run, bearer(r)) {
		runstore.RefuseStore(w, http.StatusForbidden, "not the ticket of a run")
		return
	}
	rs.mu.Lock()
	p := rs.procs[ref]
	rs.mu.Unlock()
	if p == nil || !p.direct {
		runstore.RefuseStore(w, http.StatusNotFound, fmt.Sprintf("session %s has no run %d on a runner here", ref.Session, ref.Run))
		return
	}
	conn, err := runstore.AcceptStore(w, r)
	if err != nil {
		return
	}
	p.takeStore(conn)
}

// serveDirect answers the calls of a direct run on its store connections,
// one after the other, until it exits or is failed: a connection that
// breaks is followed by the next the session process opens, where it sends
// again the calls it has no answer of. A connection is served while the
// run's runner has the run, as a store stream was: when the runner's
// connection breaks, the run's is cut, and the next one waits for the
// runner to come back with the run (or for the run's failure).
func (p *remoteProcess) serveDirect(store *runstore.Server) {
	defer p.storesServed()
	for {
		conn := p.nextStore()
		if conn == nil {
			return
		}
		a, err := p.current()
		if err != nil && !errors.Is(err, io.EOF) { // failed
			conn.Close()
			return
		}
		var gone <-chan struct{} // nil once the process has exited: its last calls are read
		if a != nil {
			gone = a.rc.gone
		}
		served := make(chan struct{})
		// Ends with the connection's serving. Once the process has exited,
		// what it sent before it arrives within storeGrace, on a
		// connection that did not break without a word.
		go func() {
			select {
			case <-gone:
				conn.Close()
			case <-p.exited:
				_ = conn.SetReadDeadline(time.Now().Add(storeGrace))
			case <-served:
			}
		}()
		err = store.Serve(context.Background(), conn)
		close(served)
		conn.Close()
		switch {
		case err == nil:
		case errors.Is(err, runstore.ErrTranscriptClose):
			p.runners.Log.Error("closing a run's transcript failed", "session", p.ref.Session, "run", p.ref.Run, "err", err)
		case errors.Is(err, runstore.ErrBroken):
			if a != nil { // the attachment it was served on
				p.sendSignal(a, true)
			}
			p.broken(err)
			return
		default:
			p.runners.Log.Debug("a run's store connection ended", "session", p.ref.Session, "run", p.ref.Run, "err", err)
		}
	}
}

// storeGrace is how long a direct run's store connection is read once
// its process exited.
const storeGrace = 10 * time.Second

// nextStore waits for the next store connection of a direct run; nil once
// it exited (and every connection it opened is served) or was failed.
func (p *remoteProcess) nextStore() net.Conn {
	for {
		p.mu.Lock()
		failed, changed := p.failed, p.changed
		p.mu.Unlock()
		if failed != nil {
			return nil
		}
		select {
		case conn := <-p.stores:
			return conn
		case <-changed:
		case <-p.exited:
			select {
			case conn := <-p.stores:
				return conn
			default:
				return nil
			}
		}
	}
}

// takeStore makes conn the store connection of a direct run: the one
// before it, which the session process lost, is closed; conn is, once the
// run is failed or its connections are served no more.
func (p *remoteProcess) takeStore(conn net.Conn) {
	p.mu.Lock()
	var closing []net.Conn
	if p.failed != nil || p.storesDone {
		closing = append(closing, conn)
	} else {
		closing = append(closing, p.store)
		select {
		case queued := <-p.stores:
			closing = append(closing, queued)
		default:
		}
		p.store = conn
		p.stores <- conn
	}
	p.mu.Unlock()
	// A TLS connection's close may wait for its peer: not under p.mu.
	for _, c := range closing {
		if c != nil {
			c.Close()
		}
	}
}

// storesServed says that the run's store connections are served no more:
// those queued and to come are closed.
func (p *remoteProcess) storesServed() {
	p.mu.Lock()
	p.storesDone = true
	var queued net.Conn
	select {
	case queued = <-p.stores:
	default:
	}
	p.mu.Unlock()
	if queued != nil {
		queued.Close()
	}
}
