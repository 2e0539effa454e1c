package chain

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/charmbracelet/log"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// plugLogBatch bounds what one store call of a plug log takes, so that a
// call over a runner's connection stays small.
const plugLogBatch = 256 << 10

// PlugLog keeps the lines a run's plugs log (ctx.log) for its store
// (lifecycle.PlugLogs): redacted with the secrets registered so far, as
// the transcript is, and numbered. A run keeps lifecycle.MaxPlugLogLines
// lines of lifecycle.MaxPlugLogBytes at most, then counts the lines it
// drops in one last line. Logging never waits for the store: run stores
// the lines in the background.
type PlugLog struct {
	run    int
	redact func(string) string

	mu      sync.Mutex
	seq     int // lines kept
	size    int // their size
	dropped int
	pending []lifecycle.PlugLogLine
	more    chan struct{} // a line is pending
}

// NewPlugLog returns the plug log of run, redacting with redact.
func NewPlugLog(run int, redact func(string) string) *PlugLog {
	return &PlugLog{run: run, redact: redact, more: make(chan struct{}, 1)}
}

// Line takes a line plug logged.
func (l *PlugLog) Line(plug string, level log.Level, msg string, keyvals []any) {
	line := lifecycle.PlugLogLine{Run: l.run, Time: time.Now().UTC(), Level: level.String(), Plug: plug, Msg: l.redact(msg)}
	for _, kv := range keyvals {
		line.Attrs = append(line.Attrs, l.redact(fmt.Sprint(kv)))
	}
	l.mu.Lock()
	if l.seq >= lifecycle.MaxPlugLogLines || l.size+line.Size() > lifecycle.MaxPlugLogBytes {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.seq++
	line.Seq = l.seq
	l.size += line.Size()
	l.pending = append(l.pending, line)
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
}

// of is what gives l the lines plug logs; nil without a plug log.
func (l *PlugLog) of(plug string) func(log.Level, string, []any) {
	if l == nil {
		return nil
	}
	return func(level log.Level, msg string, keyvals []any) { l.Line(plug, level, msg, keyvals) }
}

// Run stores the lines taken with store until ctx is done, then those
// left and the count of those dropped. Once store fails (an older
// server knows no plug log), the lines go no more to the store, and
// failed is told, once: the run goes on.
func (l *PlugLog) Run(ctx context.Context, store func([]lifecycle.PlugLogLine) error, failed func(error)) {
	broken := false
	flush := func(last bool) {
		l.mu.Lock()
		lines := l.pending
		l.pending = nil
		if last && l.dropped > 0 {
			lines = append(lines, lifecycle.PlugLogLine{Run: l.run, Seq: l.seq + 1, Time: time.Now().UTC(), Dropped: l.dropped})
		}
		l.mu.Unlock()
		for len(lines) > 0 && !broken {
			n, size := 0, 0
			for n < len(lines) && (n == 0 || size+lines[n].Size() <= plugLogBatch) {
				size += lines[n].Size()
				n++
			}
			if err := store(lines[:n]); err != nil {
				broken = true
				failed(err)
			}
			lines = lines[n:]
		}
	}
	for {
		select {
		case <-l.more:
			flush(false)
		case <-ctx.Done():
			flush(true)
			return
		}
	}
}
