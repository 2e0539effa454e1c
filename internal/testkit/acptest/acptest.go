// Package acptest is a raw ACP client for tests: it sends JSON-RPC lines as
// they are written and reads the messages it receives one by one, so a test
// sees exactly what a client would.
//
// A Client reads from a channel of messages and writes through a function of
// a line, so it fits any transport: pipes (see Read and WriteLines), or a
// channel and a send function of a live session. Its methods fail the test
// on a timeout or the end of the stream, with the logs the test gives.
//
// It is not built on the client core (internal/acp/client's Conn) nor on
// acp-go-sdk's client side: both number their requests, answer the agent's
// requests and hide the frames, where a test writes its lines as they are
// (malformed ones, chosen ids, answers out of order) and sees every frame
// it receives, in order, byte for byte.
package acptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
)

// DefaultTimeout is how long a Client waits for a message by default.
const DefaultTimeout = 30 * time.Second

// Updates1KiB returns session/update notifications of 1 KiB each, streamed
// chunks of text, for benchmarks: Updates(256), made at first use, not at
// the start of every process of a test binary (2 ms: BenchmarkReady's).
var Updates1KiB = sync.OnceValue(func() []string { return Updates(256) })

// Updates returns n session/update notifications of 1 KiB each, streamed
// chunks of text. Their texts are words drawn at random (the same on
// every call), with the escaped line breaks and quotes of prose and code,
// and all of them together are far larger than a deflate window (32 KiB):
// a stream of them compresses as an agent's text does, not as one message
// repeated. The first ones are those of a smaller n.
func Updates(n int) []string {
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	tail := `"}}}}`
	words := strings.Fields(`the a to of and in is it that for on with as this be are was at by an
		not or from but have can will if we you they which one all their there been has more when
		file function return error value string type struct func package import test config plug
		session agent message request response prompt update chunk stream run server client
		read write open close start stop pause resume end time state store record transcript
		line block buffer byte write check parse encode decode call next handler context`)
	rng := rand.New(rand.NewPCG(1, 2))
	updates := make([]string, n)
	for i := range updates {
		var text strings.Builder
		for n := 1024 - len(head) - len(tail); text.Len() < n; {
			w := words[rng.IntN(len(words))]
			switch r := rng.IntN(40); {
			case r == 0:
				w = `\n` + w
			case r == 1:
				w = `\"` + w + `\"`
			case r < 6:
				w += ","
			}
			if text.Len() > 0 {
				w = " " + w
			}
			if text.Len()+len(w) > n {
				w = strings.Repeat(".", n-text.Len())
			}
			text.WriteString(w)
		}
		updates[i] = head + text.String() + tail
	}
	return updates
}

// Update1KiB returns the first of Updates1KiB.
func Update1KiB() string { return Updates1KiB()[0] }

// Flood is a minimal ACP agent for benchmarks, on in and out: it answers
// initialize and session/new, and a prompt whose text is N with N of
// Updates1KiB, one after the other, and then end_turn.
func Flood(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	w := bufio.NewWriterSize(out, 64<<10)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil || req.Method == "" {
			continue
		}
		result := `{}`
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":1,"agentCapabilities":{}}`
		case "session/new":
			result = `{"sessionId":"sess-1"}`
		case "session/prompt":
			n := 0
			if len(req.Params.Prompt) > 0 {
				n, _ = strconv.Atoi(req.Params.Prompt[0].Text)
			}
			updates := Updates1KiB()
			for i := 0; i < n; i++ {
				_, _ = w.WriteString(updates[i%len(updates)])
				_ = w.WriteByte('\n')
			}
			result = `{"stopReason":"end_turn"}`
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
		_ = w.Flush()
	}
}

// AllCapabilities are client capabilities for initialize: file reads and
// writes, and terminals.
const AllCapabilities = `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}`

// A Client is the test's end of an ACP connection.
type Client struct {
	T       testing.TB
	In      <-chan *acp.Message     // what the client receives
	Out     func(line string) error // sends one line, without its "\n"
	Timeout time.Duration           // per message; 0 means DefaultTimeout
	Logs    func() string           // if not nil, shown when a read fails

	bundled []*acp.Message // the messages of a bundle read, not returned yet
}

// Read reads r until it ends, sending its messages on the returned channel,
// which is closed at the end. bad, if not nil, is called (from another
// goroutine) with each line that is not a message, which is skipped.
func Read(r io.Reader, bad func(err error)) <-chan *acp.Message {
	ch := make(chan *acp.Message, 4096)
	// Ends with r, which the caller closes.
	go func() {
		defer close(ch)
		rd := acp.NewReader(r, 0)
		for {
			m, err := rd.Next()
			var lineErr *acp.LineError
			if errors.As(err, &lineErr) {
				if bad != nil {
					bad(lineErr)
				}
				continue
			}
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

// WriteLines returns a Client's Out writing each line to w.
func WriteLines(w io.Writer) func(line string) error {
	return func(line string) error {
		_, err := io.WriteString(w, line+"\n")
		return err
	}
}

// Send sends one raw line as the client.
func (c *Client) Send(line string) {
	c.T.Helper()
	if err := c.Out(line); err != nil {
		c.T.Fatalf("send: %v", err)
	}
}

// Next returns the next message the client receives.
func (c *Client) Next() *acp.Message {
	c.T.Helper()
	return c.next(0)
}

// next is Next, telling on failure how many messages were read while
// waiting.
func (c *Client) next(read int) *acp.Message {
	c.T.Helper()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	var waited string
	if read > 0 {
		waited = fmt.Sprintf(" (%d other messages read while waiting)", read)
	}
	if len(c.bundled) > 0 {
		m := c.bundled[0]
		c.bundled = c.bundled[1:]
		return m
	}
	select {
	case m, ok := <-c.In:
		if ok && m.Kind == acp.Bundle {
			// An engine's updates, together (acp.Bundle): a client gets
			// them one by one.
			for line := range bytes.SplitSeq(m.Raw, []byte("\n")) {
				u, err := acp.Parse(bytes.Clone(line))
				if err != nil {
					c.T.Fatalf("a line of a bundle: %v", err)
				}
				c.bundled = append(c.bundled, u)
			}
			m.Release()
			return c.next(read)
		}
		if ok {
			return m
		}
		c.T.Fatalf("the client's stream ended%s%s", waited, c.logs())
	case <-time.After(timeout):
		c.T.Fatalf("no message for the client in %s%s%s", timeout, waited, c.logs())
	}
	return nil
}

func (c *Client) logs() string {
	if c.Logs == nil {
		return ""
	}
	return "\nlog:\n" + c.Logs()
}

// Until reads messages until one satisfies ok, and returns those before it
// and it.
func (c *Client) Until(ok func(*acp.Message) bool) ([]*acp.Message, *acp.Message) {
	c.T.Helper()
	var before []*acp.Message
	for {
		m := c.next(len(before))
		if ok(m) {
			return before, m
		}
		before = append(before, m)
	}
}

// Drain reads and discards, in another goroutine, whatever the client
// receives from now on.
func (c *Client) Drain() {
	// Ends with c.In, as the client's stream ends.
	go func() {
		for range c.In {
		}
	}()
}

// ResponseTo matches the response with id, given as JSON (`3`, `"x"`).
func ResponseTo(id string) func(*acp.Message) bool {
	return func(m *acp.Message) bool { return m.Kind == acp.Response && string(m.ID) == id }
}

// RequestOf matches a request of method.
func RequestOf(method string) func(*acp.Message) bool {
	return func(m *acp.Message) bool { return m.Kind == acp.Request && m.Method == method }
}

// Initialize sends initialize with id 1 and the given client capabilities
// (a JSON object), and returns its response.
func (c *Client) Initialize(capabilities string) *acp.Message {
	c.T.Helper()
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":` + capabilities + `}}`)
	_, resp := c.Until(ResponseTo("1"))
	return resp
}

// NewSession sends session/new with id 2 in cwd and returns the new
// session's id.
func (c *Client) NewSession(cwd string) string {
	c.T.Helper()
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, cwd))
	_, resp := c.Until(ResponseTo("2"))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		c.T.Fatalf("session/new: %s", resp.Raw)
	}
	return r.SessionID
}

// Open initializes the agent with AllCapabilities and creates a session in
// cwd; it returns the session id.
func (c *Client) Open(cwd string) string {
	c.T.Helper()
	c.Initialize(AllCapabilities)
	return c.NewSession(cwd)
}

// LoadSession sends session/load of session sid in cwd with id.
func (c *Client) LoadSession(id int, sid, cwd string) {
	c.T.Helper()
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":%q,"mcpServers":[]}}`, id, sid, cwd))
}

// Prompt sends a session/prompt of one text block with id.
func (c *Client) Prompt(id int, sid, text string) {
	c.T.Helper()
	b, _ := json.Marshal(text)
	c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, id, sid, b))
}

// Turn sends a prompt and returns what the client received until its
// response, and the response.
func (c *Client) Turn(id int, sid, text string) ([]*acp.Message, *acp.Message) {
	c.T.Helper()
	c.Prompt(id, sid, text)
	return c.Until(ResponseTo(fmt.Sprint(id)))
}

// Chunks returns the texts of the agent_message_chunk updates among ms.
func Chunks(ms []*acp.Message) []string {
	var out []string
	for _, m := range ms {
		if m.Method != "session/update" {
			continue
		}
		var p struct {
			Update struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		if json.Unmarshal(m.Params, &p) == nil && p.Update.Kind == "agent_message_chunk" {
			out = append(out, p.Update.Content.Text)
		}
	}
	return out
}

// Texts joins with "|" the texts of the message chunks among ms, a user's
// chunk (replayed history) marked "> ", and fails t when an update names
// another session than sid.
func Texts(t testing.TB, sid string, ms []*acp.Message) string {
	t.Helper()
	var out []string
	for _, m := range ms {
		if m.Method != "session/update" {
			continue
		}
		var u struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &u)
		if u.SessionID != sid {
			t.Errorf("an update for %s names session %q: %s", sid, u.SessionID, m.Raw)
		}
		switch u.Update.Kind {
		case "agent_message_chunk":
			out = append(out, u.Update.Content.Text)
		case "user_message_chunk":
			out = append(out, "> "+u.Update.Content.Text)
		}
	}
	return strings.Join(out, "|")
}

// Records parses a transcript of acp.JSONLRecorder, one record a line.
func Records(t testing.TB, transcript string) []acp.Record {
	t.Helper()
	var out []acp.Record
	for _, line := range strings.Split(strings.TrimSpace(transcript), "\n") {
		if line == "" {
			continue
		}
		var r acp.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// NoopPlugs writes n plugs into dir whose on_message passes every message
// on unchanged, for benchmarks of the pipeline, and returns their use(...)
// calls for a configuration in dir.
func NoopPlugs(tb testing.TB, dir string, n int) []string {
	tb.Helper()
	uses := make([]string, n)
	for i := range uses {
		name := fmt.Sprintf("noop%d.star", i)
		src := fmt.Sprintf("plug(name = \"noop%d\")\ndef on_message(ctx, message, next):\n    return next(message)\n", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			tb.Fatal(err)
		}
		uses[i] = fmt.Sprintf("use(%q)", "./"+name)
	}
	return uses
}
