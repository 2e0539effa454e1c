package sessiongen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// TranscriptBatch is how many bytes of lines Transcript writes at once:
// each write is a chunk of a store's transcript, as a runner's batch of
// appends is.
const TranscriptBatch = 1 << 20

// Transcript writes a transcript of updates session updates, about 1.2 KB
// each, the same for the same seed: runs of 50 turns, each a prompt, a
// plan, the agent's answer in chunks (most updates), tool calls with two
// updates each, now and then a thought, and the prompt's answer; one turn
// in 97 answers in 20,000 chunks.
func Transcript(w io.Writer, updates int, seed uint64) error {
	out := bufio.NewWriterSize(w, TranscriptBatch)
	g := &transcriptGen{out: out, rnd: rand.New(rand.NewPCG(seed, seed)), at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for turn := 0; g.updates < updates; turn++ {
		if turn%50 == 0 {
			g.seq = 0 // a run's records count from 1
		}
		g.turn(turn, updates)
		if g.err != nil {
			return g.err
		}
	}
	return out.Flush()
}

type transcriptGen struct {
	out     *bufio.Writer
	rnd     *rand.Rand
	at      time.Time
	seq     int
	updates int
	calls   int
	err     error
}

var words = strings.Fields("the test fails because the fixture writes to a shared directory so the second run reads what the first one left and the assertion compares the wrong files which we fix by giving each test its own temporary directory and cleaning it afterwards")

// text is about n bytes of words.
func (g *transcriptGen) text(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[g.rnd.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func (g *transcriptGen) record(dir, kind, method, id, message string) {
	if g.err != nil {
		return
	}
	g.seq++
	g.at = g.at.Add(10 * time.Millisecond)
	idField := ""
	if id != "" {
		idField = `,"id":` + id
	}
	methodField := ""
	if method != "" {
		methodField = `,"method":"` + method + `"`
	}
	_, g.err = fmt.Fprintf(g.out, `{"seq":%d,"time":%q,"direction":%q,"kind":%q%s%s,"message":%s}`+"\n",
		g.seq, g.at.Format(time.RFC3339Nano), dir, kind, methodField, idField, message)
}

func (g *transcriptGen) update(u string) {
	g.updates++
	g.record("from_agent", "notification", "session/update", "", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"gen","update":`+u+`}}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (g *transcriptGen) turn(turn, updates int) {
	id := fmt.Sprint(turn + 1)
	g.record("to_agent", "request", "session/prompt", id, `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"gen","prompt":[{"type":"text","text":`+quote(g.text(200))+`}]}}`)
	g.update(`{"sessionUpdate":"plan","entries":[{"content":"find the cause","priority":"high","status":"in_progress"},{"content":"fix it","priority":"medium","status":"pending"}]}`)
	n := 50 + g.rnd.IntN(150)
	if turn%97 == 13 {
		n = 20_000
	}
	for i := 0; i < n && g.updates < updates; i++ {
		switch r := g.rnd.IntN(100); {
		case r < 80 || n == 20_000:
			g.update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + quote(g.text(1000)) + `}}`)
		case r < 85:
			g.update(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":` + quote(g.text(600)) + `}}`)
		default:
			g.calls++
			call := fmt.Sprintf(`"call-%d"`, g.calls)
			g.update(`{"sessionUpdate":"tool_call","toolCallId":` + call + `,"title":"Run the tests","kind":"execute","status":"pending"}`)
			g.update(`{"sessionUpdate":"tool_call_update","toolCallId":` + call + `,"status":"in_progress"}`)
			g.update(`{"sessionUpdate":"tool_call_update","toolCallId":` + call + `,"status":"completed","content":[{"type":"content","content":{"type":"text","text":` + quote(g.text(1500)) + `}}]}`)
		}
	}
	g.record("from_agent", "response", "", id, `{"jsonrpc":"2.0","id":`+id+`,"result":{"stopReason":"end_turn"}}`)
}
