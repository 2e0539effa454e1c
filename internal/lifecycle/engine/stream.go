package engine

import (
	"bytes"
	"io"

	"github.com/blaiseagent/blaise-agent/internal/acp"
)

// Stream returns the run's ACP messages as a byte stream, one message per
// line, for a client connection: read the session's messages from r (it
// ends with the run) and write the client's to w. Closing r stops the
// stream; the run's later messages are then dropped.
func (l *Live) Stream() (r io.ReadCloser, w io.Writer) {
	pr, pw := io.Pipe()
	// Messages that arrive while the reader is busy go to it together.
	out := acp.NewWriter(pw)
	// Ends with the run's messages, which the run's end closes.
	go func() {
		failed := false
		msgs := l.Messages()
		for m := range msgs {
			// Drained to the end, so the run never waits on a reader
			// that has left.
			if !failed {
				pace := acp.Behind
				if len(msgs) > 0 {
					pace = acp.WithNext
				}
				failed = out.WriteMessage(m, pace) != nil
			}
			// Nothing keeps it: its block may be read into again once
			// written.
			m.Release()
		}
		_ = out.Flush()
		pw.Close()
	}()
	return pr, liveWriter{l}
}

// liveWriter passes what the client writes to the session, line by line.
type liveWriter struct{ live *Live }

func (w liveWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// Parse keeps the bytes it is given, and p is the caller's.
		m, err := acp.Parse(bytes.Clone(line))
		if err != nil {
			return 0, err
		}
		if err := w.live.Send(m); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
