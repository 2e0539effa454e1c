package redact

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry is the redaction of a whole run: the secrets its plugs register
// as they learn them, replaced in everything the run lets out (its log, its
// transcript, the pauses, teardowns and errors it reports). A nil Registry
// redacts nothing. It is safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	secrets []Secret
	r       atomic.Pointer[Redactor]
}

// Register adds secrets to those the registry redacts; one already there
// is not added again. A bad secret (see New) is an error, and adds nothing.
func (g *Registry) Register(secrets []Secret) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	all := slices.Clone(g.secrets)
	for _, s := range secrets {
		for _, part := range lines(s) {
			if !slices.Contains(all, part) {
				all = append(all, part)
			}
		}
	}
	if len(all) == len(g.secrets) {
		return nil
	}
	r, err := New(all)
	if err != nil {
		return err
	}
	g.secrets = all
	g.r.Store(r)
	return nil
}

// lines is s, and, for a value of several lines, each line long enough to
// redact: a log's text format writes the lines of a field apart, each
// behind a margin.
func lines(s Secret) []Secret {
	out := []Secret{s}
	if !strings.Contains(s.Value, "\n") {
		return out
	}
	for line := range strings.Lines(s.Value) {
		line = strings.TrimRight(line, "\r\n")
		if len(strings.TrimSpace(line)) >= MinLength {
			out = append(out, Secret{Name: s.Name, Value: line})
		}
	}
	return out
}

// Redactor is the redactor of the secrets registered so far: nil, which
// redacts nothing, before any.
func (g *Registry) Redactor() *Redactor {
	if g == nil {
		return nil
	}
	return g.r.Load()
}

// String returns s redacted.
func (g *Registry) String(s string) string { return g.Redactor().String(s) }

// Error returns err with its message redacted; errors.Is and errors.As
// still see err. Nil stays nil.
func (g *Registry) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := g.String(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Writer returns a writer that writes to w what it is given, redacted, a
// line at a time: a secret is found whole however the writes split it. An
// unfinished last line waits for its end or Close.
func (g *Registry) Writer(w io.Writer) *Writer { return &Writer{g: g, w: w} }

// Writer is what Registry.Writer returns.
type Writer struct {
	g    *Registry
	mu   sync.Mutex
	w    io.Writer
	tail []byte // the unfinished line
}

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(p)
}

// write is Write with w.mu held.
func (w *Writer) write(p []byte) (int, error) {
	end := bytes.LastIndexByte(p, '\n') + 1
	if end == 0 {
		w.tail = append(w.tail, p...)
		return len(p), nil
	}
	lines := p[:end]
	if len(w.tail) > 0 {
		lines = append(w.tail, lines...)
	}
	if _, err := w.w.Write(w.g.Redactor().Bytes(lines)); err != nil {
		return 0, err
	}
	w.tail = append(w.tail[:0], p[end:]...)
	return len(p), nil
}

// Close writes the unfinished line, then closes the writer underneath when
// it is an io.Closer.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if len(w.tail) > 0 {
		_, err = w.w.Write(w.g.Redactor().Bytes(w.tail))
		w.tail = nil
	}
	if c, ok := w.w.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
