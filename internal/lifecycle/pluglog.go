package lifecycle

import (
	"context"
	"time"
)

// A run keeps at most MaxPlugLogLines lines of its plugs' log, of
// MaxPlugLogBytes in all; then one line counts those it dropped, so that a
// chatty plug cannot fill the store.
const (
	MaxPlugLogLines = 5000
	MaxPlugLogBytes = 1 << 20
)

// PlugLogLine is one line a plug logged (ctx.log), redacted by its run.
type PlugLogLine struct {
	Run   int       `json:"run"`
	Seq   int       `json:"seq"` // from 1 in each run
	Time  time.Time `json:"time,omitzero"`
	Level string    `json:"level,omitempty"`
	Plug  string    `json:"plug,omitempty"`
	Msg   string    `json:"msg,omitempty"`
	// Attrs are the line's keyword arguments: a key, its value, the next
	// key…
	Attrs []string `json:"attrs,omitempty"`
	// Dropped, of a run's last line, is how many lines the run did not
	// keep past MaxPlugLogLines or MaxPlugLogBytes.
	Dropped int `json:"dropped,omitempty"`
}

// Size is what the line counts against MaxPlugLogBytes.
func (l *PlugLogLine) Size() int {
	n := len(l.Msg) + len(l.Plug) + len(l.Level)
	for _, a := range l.Attrs {
		n += len(a)
	}
	return n
}

// PlugLogs keeps the lines plugs log, per run. A store without it (an
// older one) keeps none, and its runs log on stderr only.
type PlugLogs interface {
	// AppendPlugLog appends lines of session's runs. A line whose run and
	// seq the store holds already (sent again after a reconnection) is
	// kept once.
	AppendPlugLog(ctx context.Context, session string, lines []PlugLogLine) error
	// PlugLog returns the session's lines, by run, then seq.
	PlugLog(ctx context.Context, session string) ([]PlugLogLine, error)
}
