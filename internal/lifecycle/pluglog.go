package lifecycle

import (
	"context"
	"fmt"
	"strings"
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

// AttrText is the line's attributes as key=value, space separated.
func (l PlugLogLine) AttrText() string {
	var b strings.Builder
	for i := 0; i+1 < len(l.Attrs); i += 2 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(l.Attrs[i] + "=" + l.Attrs[i+1])
	}
	return b.String()
}

// String is the line as a log shows it: its time (UTC), level, plug,
// message and attributes.
func (l PlugLogLine) String() string {
	at := l.Time.UTC().Format("2006-01-02 15:04:05")
	if l.Dropped > 0 {
		return fmt.Sprintf("%s %d more lines were not kept (a run keeps %d lines, %d KiB)", at, l.Dropped, MaxPlugLogLines, MaxPlugLogBytes>>10)
	}
	s := fmt.Sprintf("%s %-5s %s: %s", at, strings.ToUpper(l.Level), l.Plug, l.Msg)
	if a := l.AttrText(); a != "" {
		s += " " + a
	}
	return s
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
