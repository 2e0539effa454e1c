package dashboard

import (
	"bytes"

	"github.com/blaiseagent/blaise-agent/client"
	"github.com/blaiseagent/blaise-agent/sessionview"
)

// renderer renders a transcript's lines as `sessions log` does, as they
// come: what the client received, redacted as it was. A line that cannot
// be read is said so in the text.
type renderer struct {
	out     bytes.Buffer
	term    *client.Terminal
	log     *sessionview.Log
	partial []byte // a line whose newline has not come yet
}

func newRenderer() *renderer {
	r := &renderer{}
	r.term = &client.Terminal{Out: &r.out, Err: &r.out}
	r.log = &sessionview.Log{Term: r.term, Err: &r.out}
	return r
}

// feed renders the complete lines of b and returns the text they add.
func (r *renderer) feed(b []byte) string {
	r.partial = append(r.partial, b...)
	for {
		line, rest, ok := bytes.Cut(r.partial, []byte("\n"))
		if !ok {
			break
		}
		if len(bytes.TrimSpace(line)) > 0 {
			r.log.Record(line)
		}
		r.partial = rest
	}
	text := r.out.String()
	r.out.Reset()
	return text
}

// end closes an open turn and returns the text that adds.
func (r *renderer) end() string {
	r.term.EndTurn("")
	text := r.out.String()
	r.out.Reset()
	return text
}
