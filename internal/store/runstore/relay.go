package runstore

import (
	"io"
	"sync"
)

// Relay is what a runner keeps of a run's store between its session
// process and the run's store streams, one after the other: which frames
// of the process go on the stream in use (Pass), and the answers of each
// stream, passed on to the process in order (Attach). The zero Relay is
// ready; its methods are safe for concurrent use.
type Relay struct {
	mu sync.Mutex
	// gen is the generation of the stream in use, from 1 (the launch's).
	// On a new one the process is told (Notice) and sends again what was
	// not answered: what it sends before its OpResync of gen is dropped
	// (resyncing), since it comes again after it.
	gen       uint64
	resyncing bool
	pulled    chan struct{} // closed once the last stream's answers are passed on
}

// Attach begins the run's next store stream, st: a goroutine passes its
// answers, whole, to the process's end w, once those of the stream before
// are, after the notice of the new stream (generation 2 and up). end, if
// set, gets what ended the reading of st: io.EOF, an error of a cut
// (within a frame: io.ErrUnexpectedEOF), or of a line the relay could not
// read; nil when a write to w failed (the process is gone).
func (r *Relay) Attach(w io.Writer, st io.Reader, end func(error)) {
	r.mu.Lock()
	r.gen++
	gen := r.gen
	r.resyncing = gen > 1
	before, done := r.pulled, make(chan struct{})
	r.pulled = done
	r.mu.Unlock()
	// Ends with st; the next stream's waits for it (pulled).
	go func() {
		defer close(done)
		if before != nil {
			<-before
		}
		err := pull(w, st, gen)
		if end != nil {
			end(err)
		}
	}()
}

// pull passes the answers on st to w, after the notice of gen. Once w
// fails (the process is gone), what is left of st is read and dropped, so
// that the server's writes of answers do not wait for a reader.
func pull(w io.Writer, st io.Reader, gen uint64) error {
	if gen > 1 {
		if _, err := w.Write(Notice(gen)); err != nil {
			_, _ = io.Copy(io.Discard, st)
			return nil
		}
	}
	fr := NewFrameReader(st)
	for {
		f, err := fr.Next()
		if err != nil {
			return err // a part of an answer cut by a broken connection is dropped
		}
		if _, err := w.Write(f.Bytes); err != nil {
			_, _ = io.Copy(io.Discard, st)
			return nil
		}
	}
}

// Pass reports whether f, the process's next frame, goes on the stream in
// use: not while the stream waits for the process's OpResync, which f may
// be (and then it goes, and so does what follows it).
func (r *Relay) Pass(f Frame) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.resyncing && f.IsResync(r.gen) {
		r.resyncing = false
	}
	return !r.resyncing
}
