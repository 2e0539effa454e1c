package blaise

import (
	"io"
	"strings"

	"github.com/blaiseagent/blaise-agent/acp"
)

// Stream returns the run's ACP messages as a byte stream, one message per
// line, for a client connection: read the session's messages from r (it
// ends with the run) and write the client's to w.
func (l *Live) Stream() (r io.Reader, w io.Writer) {
	pr, pw := io.Pipe()
	go func() {
		for m := range l.Messages() {
			if _, err := pw.Write(append(append([]byte(nil), m.Raw...), '\n')); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return pr, liveWriter{l}
}

// liveWriter passes what the client writes to the session, line by line.
type liveWriter struct{ live *Live }

func (w liveWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line == "" {
			continue
		}
		m, err := acp.Parse([]byte(line))
		if err != nil {
			return 0, err
		}
		if err := w.live.Send(m); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
