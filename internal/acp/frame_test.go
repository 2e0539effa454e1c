package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseKinds(t *testing.T) {
	tests := []struct {
		line   string
		kind   Kind
		method string
		id     string
		params string
		result string
		error  string
	}{
		{line: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
			kind: Request, method: "initialize", id: "1", params: `{"protocolVersion":1}`},
		{line: `{"jsonrpc":"2.0","id":"a-1","method":"session/new"}`,
			kind: Request, method: "session/new", id: `"a-1"`},
		{line: `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
			kind: Notification, method: "session/cancel", params: `{"sessionId":"s"}`},
		{line: `{"jsonrpc":"2.0","method":"_x/ping"}`,
			kind: Notification, method: "_x/ping"},
		{line: `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`,
			kind: Response, id: "7", result: `{"stopReason":"end_turn"}`},
		{line: `{"jsonrpc":"2.0","id":7,"result":null}`,
			kind: Response, id: "7", result: `null`},
		{line: `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}`,
			kind: Response, id: `"x"`, error: `{"code":-32601,"message":"no"}`},
		{line: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
			kind: Response, id: `null`, error: `{"code":-32700,"message":"parse"}`},
		{line: "  {\t\"method\" : \"a\" , \"id\" : -1.5e3 }  ",
			kind: Request, method: "a", id: "-1.5e3"},
		{line: `{"meth\u006fd":"\u0061b","id":2}`,
			kind: Request, method: "ab", id: "2"},
		{line: `{"id":1,"method":"session/prompt","params":[1,2]}`,
			kind: Request, method: "session/prompt", id: "1", params: "[1,2]"},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.line))
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.line, err)
			continue
		}
		if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id ||
			string(m.Params) != tt.params || string(m.Result) != tt.result || string(m.Error) != tt.error {
			t.Errorf("Parse(%s) = %v %q id=%s params=%s result=%s error=%s", tt.line,
				m.Kind, m.Method, m.ID, m.Params, m.Result, m.Error)
		}
		if string(m.Raw) != tt.line {
			t.Errorf("Parse(%s).Raw = %s", tt.line, m.Raw)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ line, want string }{
		{``, "invalid JSON: unexpected end of input"},
		{`hello`, "invalid JSON: invalid character 'h'"},
		{`{"id":1,"method":"a"`, "invalid JSON: unexpected end of input"},
		{`{"id":1,"method":"a"} x`, "invalid JSON: invalid character 'x' after top-level value"},
		{`{"id":01,"method":"a"}`, "invalid JSON"},
		{`{"id":1,"method":"a\x01"}`, "invalid JSON"},
		{`{"id":1,"method":"a\q"}`, "invalid JSON"},
		{`{"id":1,"method":"a","params":{"a":1,}}`, "invalid JSON"},
		{`[{"id":1,"method":"a"}]`, "not a JSON-RPC message: not an object"},
		{`"x"`, "not a JSON-RPC message: not an object"},
		{`{}`, "not a JSON-RPC message: has no method and no id"},
		{`{"jsonrpc":"2.0","params":{}}`, "not a JSON-RPC message: has no method and no id"},
		{`{"id":1}`, "not a JSON-RPC message: has an id but no method, result or error"},
		{`{"id":1,"result":1,"error":{}}`, "not a JSON-RPC message: has a result and an error"},
		{`{"id":1,"method":"a","result":1}`, "not a JSON-RPC message: has a method and a result"},
		{`{"method":"a","error":{}}`, "not a JSON-RPC message: has a method and an error"},
		{`{"id":1,"method":2}`, "not a JSON-RPC message: method is not a string"},
		{`{"id":null,"method":"a"}`, "not a JSON-RPC message: id is null"},
		{`{"id":null,"result":1}`, "not a JSON-RPC message: id is null"},
		{`{"id":true,"result":1}`, "not a JSON-RPC message: id is not a number or a string"},
		{`{"id":{},"method":"a"}`, "not a JSON-RPC message: id is not a number or a string"},
		{`{"id":1,"method":"a","id":2}`, `not a JSON-RPC message: duplicate member "id"`},
		{`{"id":1,"method":"a","m\u0065thod":"b"}`, `not a JSON-RPC message: duplicate member "method"`},
		// A syntax error wins over an error of meaning before it.
		{`{"id":1,"method":2,]`, "invalid JSON"},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.line))
		if err == nil {
			t.Errorf("Parse(%s) = %v %q, want error %q", tt.line, m.Kind, m.Method, tt.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%s) error = %q, want prefix %q", tt.line, err, tt.want)
		}
	}
}

func TestParseDepth(t *testing.T) {
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		// The message object is one level.
		params := strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1)
		line := []byte(`{"method":"a","params":` + params + `}`)
		_, err := Parse(line)
		if (err == nil) != json.Valid(line) {
			t.Errorf("depth %d: Parse error %v, json.Valid %v", depth, err, json.Valid(line))
		}
	}
}

// Client and agent number their requests independently: the same id is in
// flight both ways (acp-notes.md, "The wire").
func TestCollidingIDs(t *testing.T) {
	req, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Parse([]byte(`{"jsonrpc":"2.0","id":1.0,"result":{"sessionId":"s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Kind != Request || resp.Kind != Response {
		t.Fatalf("kinds %v, %v", req.Kind, resp.Kind)
	}
	if IDKey(req.ID) != IDKey(resp.ID) {
		t.Errorf("IDKey(%s) = %q, IDKey(%s) = %q: want equal", req.ID, IDKey(req.ID), resp.ID, IDKey(resp.ID))
	}
	str, err := Parse([]byte(`{"jsonrpc":"2.0","id":"1","result":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if IDKey(str.ID) == IDKey(req.ID) {
		t.Errorf(`IDKey("1") == IDKey(1) == %q`, IDKey(req.ID))
	}
}

func TestIDKey(t *testing.T) {
	same := [][]string{
		{`1`, `1.0`, `1e0`, `10e-1`, `0.1e1`, `1.000`, `1E+0`},
		{`0`, `-0`, `0.0`, `0e5`, `-0.0e-3`},
		{`-7`, `-7.0`, `-70e-1`},
		{`1.5`, `15e-1`, `1.50`},
		{`100`, `1e2`, `1E2`, `100.0`},
		{`123456789012345678901234567890`, `1.23456789012345678901234567890e29`},
		{`"a"`, `"\u0061"`},
		{`"é"`, `"\u00e9"`},
		{`"a\"b"`, `"a\u0022b"`},
		{`null`},
		{`1e100`, `10e99`},
	}
	keys := map[string]string{}
	for _, group := range same {
		k := IDKey([]byte(group[0]))
		for _, id := range group[1:] {
			if got := IDKey([]byte(id)); got != k {
				t.Errorf("IDKey(%s) = %q, IDKey(%s) = %q: want equal", id, got, group[0], k)
			}
		}
		if other, ok := keys[k]; ok {
			t.Errorf("IDKey(%s) = IDKey(%s) = %q", group[0], other, k)
		}
		keys[k] = group[0]
	}
	for id, want := range map[string]string{`1`: "1", `1.0`: "1", `-0`: "0", `1e2`: "100", `1.5`: "15e-1", `"x"`: `"x"`} {
		if got := IDKey([]byte(id)); got != want {
			t.Errorf("IDKey(%s) = %q, want %q", id, got, want)
		}
	}
	if IDKey([]byte(`"1"`)) == IDKey([]byte(`1`)) {
		t.Error(`IDKey("1") == IDKey(1)`)
	}
}

func TestEscapesInParams(t *testing.T) {
	params := `{"text":"a \"quoted\" {brace} [bracket] , \\\" \\\\ \u007d \n","more":["}",{"\"id\"":1}],"method":"x"}`
	line := `{"jsonrpc":"2.0","method":"session/update","params":` + params + `}`
	m, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != Notification || m.ID != nil || string(m.Params) != params || m.Method != "session/update" {
		t.Errorf("got %v id=%s method=%q params=%s", m.Kind, m.ID, m.Method, m.Params)
	}
	if !json.Valid(m.Params) {
		t.Error("params not valid JSON")
	}
}

func parseLine(t testing.TB, line string) *Message {
	t.Helper()
	m, err := Parse([]byte(line))
	if err != nil {
		t.Fatalf("Parse(%s): %v", line, err)
	}
	return m
}

// checkConsistent checks that m is what parsing its Raw gives.
func checkConsistent(t testing.TB, m *Message) {
	t.Helper()
	p, err := Parse(bytes.Clone(m.Raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", m.Raw, err)
	}
	if p.Kind != m.Kind || p.Method != m.Method || !bytesEqual(p.ID, m.ID) || !bytesEqual(p.Params, m.Params) ||
		!bytesEqual(p.Result, m.Result) || !bytesEqual(p.Error, m.Error) || p.spans != m.spans || p.end != m.end ||
		!bytesEqual(p.SessionID(), m.SessionID()) || !bytesEqual(p.SessionUpdate(), m.SessionUpdate()) {
		t.Fatalf("message of %s:\n got %+v\nwant %+v", m.Raw, *m, *p)
	}
}

// bytesEqual is bytes.Equal that tells nil from empty.
func bytesEqual(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestSessionIDFoundWhileParsing checks that a message tells where its
// params' sessionId is, as parsing found it, so that the front end rewrites
// it without reading params again.
func TestSessionIDFoundWhileParsing(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionId":"inner"}}}`, `"s1"`},
		{`{"id":1,"method":"m","params":{"update":{"sessionId":"inner"}, "sessionId" : "s2" }}`, `"s2"`},
		{`{"method":"m","params":{"sessionId":"s3"},"id":"x"}`, `"s3"`},
		{`{"method":"m","params":{"sessionId":"a","sessionId":"b"}}`, `"b"`},
		{`{"method":"m","params":{"session\u0049d":"esc"}}`, `"esc"`},
		{`{"method":"m","params":{"sessionId":7}}`, `7`},
		{`{"method":"m","params":{"sessionid":"case"}}`, ``},
		{`{"method":"m","params":["sessionId","x"]}`, ``},
		{`{"method":"m","params":{}}`, ``},
		{`{"method":"m"}`, ``},
		{`{"id":1,"result":{"sessionId":"r"}}`, ``},
	} {
		m := parseLine(t, tc.line)
		if got := string(m.SessionID()); got != tc.want {
			t.Errorf("SessionID of %s = %s, want %s", tc.line, got, tc.want)
		}
		// Where it is moves with the members around it, and is found
		// again in params that replace the message's.
		if m.ID != nil {
			checkConsistent(t, m.WithID([]byte(`"a-longer-id"`)))
			checkConsistent(t, m.WithParams([]byte(`{"x":1,"sessionId":"new"}`)).WithID([]byte(`12`)))
		}
		if m.Kind != Response {
			checkConsistent(t, m.WithParams([]byte(`{"x":1,"sessionId":"new"}`)))
			checkConsistent(t, m.WithParams(nil))
		}
	}
}

// TestSessionUpdateFoundWhileParsing: a message tells the kind of its
// update (params.update.sessionUpdate), as checking it found it, so that
// the title's watch reads no update again; found again where params are
// replaced, and when asked of a message of checked text, whose values are
// skipped.
func TestSessionUpdateFoundWhileParsing(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"sessionUpdate\""}}}}`, `"agent_message_chunk"`},
		{`{"method":"session/update","params":{"update":{"content":{"sessionUpdate":"inner"},"sessionUpdate" : "session_info_update" },"sessionId":"s"}}`, `"session_info_update"`},
		{`{"id":2,"method":"m","params":{"upd\u0061te":{"session\u0055pdate":"esc"}}}`, `"esc"`},
		{`{"method":"m","params":{"update":{"sessionUpdate":"a","sessionUpdate":"b"}}}`, `"b"`},
		{`{"method":"m","params":{"sessionUpdate":"top"}}`, ``},
		{`{"method":"m","params":{"other":{"update":{"sessionUpdate":"deep"}}}}`, ``},
		{`{"method":"m","params":{"update":["sessionUpdate","x"]}}`, ``},
		{`{"id":1,"result":{"update":{"sessionUpdate":"r"}}}`, ``},
	} {
		m := parseLine(t, tc.line)
		if got := string(m.SessionUpdate()); got != tc.want {
			t.Errorf("SessionUpdate of %s = %s, want %s", tc.line, got, tc.want)
		}
		checked := &Message{Raw: []byte(tc.line)}
		if err := checked.parse("", true); err != nil || string(checked.SessionUpdate()) != tc.want {
			t.Errorf("SessionUpdate of checked %s = %s (%v), want %s", tc.line, checked.SessionUpdate(), err, tc.want)
		}
		if m.ID != nil {
			checkConsistent(t, m.WithID([]byte(`"a-longer-id"`)))
		}
		if m.Kind != Response {
			checkConsistent(t, m.WithParams([]byte(`{"x":1,"update":{"sessionUpdate":"new"}}`)))
		}
	}
}

func TestWithParams(t *testing.T) {
	line := `{"jsonrpc":"2.0", "_meta":{"trace":"t1"},"id":3,"method":"session/prompt","params":{"_meta":{"k":[1,2]},"sessionId":"s","prompt":[]} ,"zz":{"u":1}}`
	m := parseLine(t, line)
	if got := m.WithParams(m.Params); string(got.Raw) != line {
		t.Errorf("WithParams(Params) = %s", got.Raw)
	}

	n := m.WithParams([]byte(`{"_meta":{"k":[1,2]},"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}`))
	want := `{"jsonrpc":"2.0", "_meta":{"trace":"t1"},"id":3,"method":"session/prompt","params":{"_meta":{"k":[1,2]},"sessionId":"s","prompt":[{"type":"text","text":"hi"}]} ,"zz":{"u":1}}`
	if string(n.Raw) != want {
		t.Errorf("WithParams:\n got %s\nwant %s", n.Raw, want)
	}
	checkConsistent(t, n)
	if string(m.Raw) != line {
		t.Errorf("WithParams changed the original: %s", m.Raw)
	}

	// Line breaks are compacted away.
	n = m.WithParams([]byte("{\n  \"a\": 1\n}"))
	if want := `"params":{"a":1} ,"zz"`; !bytes.Contains(n.Raw, []byte(want)) {
		t.Errorf("WithParams(multi-line) = %s", n.Raw)
	}
	checkConsistent(t, n)

	// Removing and adding.
	n = m.WithParams(nil)
	want = `{"jsonrpc":"2.0", "_meta":{"trace":"t1"},"id":3,"method":"session/prompt" ,"zz":{"u":1}}`
	if string(n.Raw) != want || n.Params != nil {
		t.Errorf("WithParams(nil):\n got %s\nwant %s", n.Raw, want)
	}
	checkConsistent(t, n)
	n = n.WithParams([]byte(`{}`))
	want = `{"jsonrpc":"2.0", "_meta":{"trace":"t1"},"id":3,"method":"session/prompt" ,"zz":{"u":1},"params":{}}`
	if string(n.Raw) != want {
		t.Errorf("WithParams(added):\n got %s\nwant %s", n.Raw, want)
	}
	checkConsistent(t, n)

	first := parseLine(t, `{ "params" : [1] , "method":"a"}`)
	n = first.WithParams(nil)
	if string(n.Raw) != `{ "method":"a"}` {
		t.Errorf("WithParams(nil) of first member = %s", n.Raw)
	}
	checkConsistent(t, n)
}

func TestWithResultErrorID(t *testing.T) {
	m := parseLine(t, `{"jsonrpc":"2.0","id":12,"result":{"stopReason":"end_turn","_meta":{"x":"}"}}}`)
	n := m.WithResult([]byte(`{"stopReason":"cancelled"}`))
	if want := `{"jsonrpc":"2.0","id":12,"result":{"stopReason":"cancelled"}}`; string(n.Raw) != want {
		t.Errorf("WithResult = %s, want %s", n.Raw, want)
	}
	checkConsistent(t, n)

	n = m.WithResult(nil).WithError([]byte(`{"code":-32800,"message":"cancelled"}`))
	if want := `{"jsonrpc":"2.0","id":12,"error":{"code":-32800,"message":"cancelled"}}`; string(n.Raw) != want {
		t.Errorf("WithResult(nil).WithError = %s, want %s", n.Raw, want)
	}
	checkConsistent(t, n)

	n = m.WithID([]byte(`"p-12"`))
	if want := `{"jsonrpc":"2.0","id":"p-12","result":{"stopReason":"end_turn","_meta":{"x":"}"}}}`; string(n.Raw) != want {
		t.Errorf("WithID = %s, want %s", n.Raw, want)
	}
	checkConsistent(t, n)
}

func TestNewMessages(t *testing.T) {
	tests := []struct {
		raw  []byte
		want string
	}{
		{NewRequest([]byte(`5`), "session/new", []byte(`{"cwd":"/"}`)),
			`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/"}}`},
		{NewRequest([]byte(`"a"`), "x", nil), `{"jsonrpc":"2.0","id":"a","method":"x"}`},
		{NewNotification("session/cancel", []byte(`{"sessionId":"s"}`)),
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`},
		{NewNotification("_a<b>&\"\n\x01\xff", nil), `{"jsonrpc":"2.0","method":"_a<b>&\"\n\u0001\ufffd"}`},
		{NewResponse([]byte(`5`), []byte(`{"stopReason":"end_turn"}`)),
			`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`},
		{NewResponse([]byte(`5`), nil), `{"jsonrpc":"2.0","id":5,"result":null}`},
		{NewErrorResponse([]byte(`5`), RequestCancelled, "cancelled <now>", nil),
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32800,"message":"cancelled <now>"}}`},
		{NewErrorResponse(nil, ParseError, "bad", []byte(`{"line":3}`)),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":{"line":3}}}`},
	}
	for _, tt := range tests {
		if string(tt.raw) != tt.want {
			t.Errorf("got  %s\nwant %s", tt.raw, tt.want)
		}
		if _, err := Parse(tt.raw); err != nil {
			t.Errorf("Parse(%s): %v", tt.raw, err)
		}
	}
}

// collect reads every message and line error from r until the end.
func collect(t *testing.T, r *Reader) (msgs []*Message, errs []*LineError) {
	t.Helper()
	for {
		m, err := r.Next()
		if err == io.EOF {
			return msgs, errs
		}
		var le *LineError
		switch {
		case errors.As(err, &le):
			errs = append(errs, le)
		case err != nil:
			t.Fatalf("Next: %v", err)
		default:
			msgs = append(msgs, m)
		}
	}
}

func TestReader(t *testing.T) {
	stream := "{\"id\":1,\"method\":\"a\"}\r\n" + // CRLF
		"\n   \r\n" + // blank lines
		"not json\n" +
		"{\"id\":2,\"result\":{}}\n" +
		"{\"x\":1}\n" +
		"{\"method\":\"b\"}" // no final newline
	for _, wrap := range []func(io.Reader) io.Reader{
		func(r io.Reader) io.Reader { return r },
		iotest.OneByteReader,
		iotest.DataErrReader,
	} {
		r := newReaderSize(wrap(strings.NewReader(stream)), 0, 16)
		msgs, errs := collect(t, r)
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Raw))
		}
		want := []string{`{"id":1,"method":"a"}`, `{"id":2,"result":{}}`, `{"method":"b"}`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("messages %q, want %q", got, want)
		}
		if len(errs) != 2 || errs[0].Line != 4 || string(errs[0].Prefix) != "not json" ||
			errs[1].Line != 6 || !strings.Contains(errs[1].Reason, "not a JSON-RPC message") {
			t.Errorf("line errors %v", errs)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("Next after EOF: %v", err)
		}
	}
}

func TestReaderLongLines(t *testing.T) {
	// A line longer than the buffer, one too long, and one exactly at the
	// limit with CRLF.
	long := `{"method":"a","params":"` + strings.Repeat("x", 100) + `"}`
	exact := `{"method":"b","params":"` + strings.Repeat("y", 50-26) + `"}`
	if len(exact) != 50 {
		t.Fatal(len(exact))
	}
	stream := long + "\n" + long + "x\n" + exact + "\r\n" + exact + "\n" + exact + "z"
	r := newReaderSize(strings.NewReader(stream), len(long), 16)
	msgs, errs := collect(t, r)
	if len(msgs) != 3 || string(msgs[0].Raw) != long || string(msgs[1].Raw) != exact || string(msgs[2].Raw) != exact {
		t.Errorf("got %d messages", len(msgs))
	}
	if len(errs) != 2 || errs[0].Line != 2 || errs[1].Line != 5 {
		t.Fatalf("line errors %v", errs)
	}
	if want := fmt.Sprintf("line of %d bytes exceeds the limit of %d bytes", len(long)+1, len(long)); errs[0].Reason != want {
		t.Errorf("reason %q, want %q", errs[0].Reason, want)
	}

	r = newReaderSize(strings.NewReader(stream), 50, 16)
	msgs, errs = collect(t, r)
	if len(msgs) != 2 || len(errs) != 3 {
		t.Errorf("maxLine 50: %d messages, %d errors", len(msgs), len(errs))
	}
}

// A 50 MiB line, as an image in a prompt (acp-notes.md: large lines).
func TestReaderHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("50 MiB line")
	}
	data := bytes.Repeat([]byte("QUJD"), 50<<20/4)
	var huge bytes.Buffer
	huge.WriteString(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"image","mimeType":"image/png","data":"`)
	huge.Write(data)
	huge.WriteString(`"}]}}`)
	next := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`
	stream := bytes.Join([][]byte{[]byte(next), huge.Bytes(), []byte(next)}, []byte("\n"))

	r := NewReader(bytes.NewReader(stream), 64<<20)
	msgs, errs := collect(t, r)
	if len(errs) != 0 || len(msgs) != 3 {
		t.Fatalf("64 MiB: %d messages, errors %v", len(msgs), errs)
	}
	if !bytes.Equal(msgs[1].Raw, huge.Bytes()) || msgs[1].Method != "session/prompt" || len(msgs[1].Params) < 50<<20 {
		t.Errorf("huge message: %d bytes, method %q", len(msgs[1].Raw), msgs[1].Method)
	}

	r = NewReader(bytes.NewReader(stream), 1<<20)
	msgs, errs = collect(t, r)
	if len(errs) != 1 || len(msgs) != 2 || errs[0].Line != 2 || string(msgs[1].Raw) != next {
		t.Fatalf("1 MiB: %d messages, errors %v", len(msgs), errs)
	}
	if !strings.HasPrefix(errs[0].Reason, fmt.Sprintf("line of %d bytes exceeds", huge.Len())) || len(errs[0].Prefix) != prefixLen {
		t.Errorf("error %v", errs[0])
	}
}

func TestReaderIOError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("{\"method\":\"a\"}\n{\"meth"), iotest.ErrReader(boom)), 0)
	if m, err := r.Next(); err != nil || m.Method != "a" {
		t.Fatalf("Next = %v, %v", m, err)
	}
	for range 2 {
		if _, err := r.Next(); err != boom {
			t.Errorf("Next error = %v, want %v", err, boom)
		}
	}
}

func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("{\"method\":\"a\"}\n{\"method\":\"b\"}\n"), 0)
	for _, want := range []bool{true, false} {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if r.Buffered() != want {
			t.Errorf("Buffered() = %v, want %v", r.Buffered(), want)
		}
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	in := "{\"id\":1,\"method\":\"a\",\"params\":{\"x\":\"<&>\\u2028\"}}\n{ \"id\" : 1 , \"result\" : [ ] }\n"
	var out bytes.Buffer
	r, w := NewReader(strings.NewReader(in), 0), NewWriter(&out)
	each(t, r, func(m *Message) {
		if err := w.Write(m.Raw); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("round trip changed the stream:\n%q\n%q", in, out.String())
	}
}

// Every special byte at every offset, before and after the short run the
// scanner checks byte by byte and the long runs it searches, and behind
// escapes (an escaped quote ahead of the closing one among them): Parse
// agrees with encoding/json.
func TestScanStringAlignment(t *testing.T) {
	specials := []string{`\"`, `\\`, `\u00e9`, `"`, "\x01", "\x1f", `\x`, "\xff", " ", "~"}
	long := strings.Repeat("b", 40)
	for n := 0; n < 80; n++ {
		for _, sp := range specials {
			for _, tail := range []string{"", "abcdefghijklmnop", long + `\"` + long + "\x02", `\n` + long + `\"` + long} {
				line := []byte(`{"method":"` + strings.Repeat("a", n) + sp + tail + `"}`)
				_, err := Parse(line)
				if (err == nil) != json.Valid(line) {
					t.Errorf("Parse(%q): %v; json.Valid %v", line, err, json.Valid(line))
				}
			}
		}
	}
}

// update1KiB is a session/update notification of about 1 KiB, as agents
// stream them during a turn.
var update1KiB = func() []byte {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 19)
	params := fmt.Sprintf(`{"sessionId":"sess_01HZX3K8Q9V7M2N4P6R8T0W2Y4","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q,"annotations":{"audience":["user"],"priority":0.5}},"_meta":{"messageId":"msg_0042"}}}`, text+"\n\"done\"")
	line := NewNotification("session/update", []byte(params))
	return line
}()

func BenchmarkParse1KiB(b *testing.B) {
	line := update1KiB
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Parse(line)
		if err != nil || m.Kind != Notification {
			b.Fatal(err)
		}
	}
}

// loopReader repeats a stream forever.
type loopReader struct {
	data []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

// BenchmarkReader1KiB reads a stream of 1 KiB notifications, checking
// them, and as the front end reads a session process's checked stream.
func BenchmarkReader1KiB(b *testing.B) {
	line := append(bytes.Clone(update1KiB), '\n')
	for _, reader := range []struct {
		name string
		new  func(io.Reader, int) *Reader
	}{{"checking", NewReader}, {"checked", NewCheckedReader}} {
		b.Run(reader.name, func(b *testing.B) {
			r := reader.new(&loopReader{data: bytes.Repeat(line, 64)}, 0)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := r.Next()
				if err != nil || m.Kind != Notification {
					b.Fatal(err)
				}
				m.Release()
			}
		})
	}
}

// TestACheckedStreamsStringsAreSkippedNotChecked: a reader of a
// stream that its writer checked (the front end reading a session process)
// finds the end of each string by its unescaped quote, passes on what it
// does not check, and still refuses a line whose structure is broken.
func TestACheckedStreamsStringsAreSkippedNotChecked(t *testing.T) {
	stream := strings.Join([]string{
		// A control character and a bad escape in a string: passed on.
		"{\"method\":\"session/update\",\"params\":{\"sessionId\":\"s1\",\"text\":\"a\x01b\\qc\"}}",
		// Escaped quotes and backslashes before the closing quote.
		`{"method":"session/update","params":{"text":"say \"hi\\\\\" \\\\","sessionId":"s2"}}`,
		// A value not read whose inside is broken: passed on; one whose
		// brackets do not match or do not close: refused.
		`{"method":"session/update","params":{"sessionId":"s3","update":{"a":,"b":[1 2]}}}`,
		`{"method":"session/update","params":{"update":{"a":[1}},"sessionId":"s4"}}`,
		`{"method":"session/update","params":{"sessionId":"s5","update":{"a":[1]}}`,
		// A string that never ends, then a member missing its value.
		`{"method":"session/update","params":{"text":"open}}`,
		`{"method":"session/update","params":{"sessionId":}}`,
		`{"id":1,"result":{"stopReason":"end_turn"}}`,
	}, "\n") + "\n"
	if _, err := Parse([]byte(strings.SplitN(stream, "\n", 2)[0])); err == nil {
		t.Fatal("Parse accepts a control character in a string: the first line proves nothing")
	}
	r := NewCheckedReader(strings.NewReader(stream), 0)
	var got []string
	var lineErrs []int
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		var lineErr *LineError
		if errors.As(err, &lineErr) {
			lineErrs = append(lineErrs, lineErr.Line)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %s", m.Kind, m.SessionID()))
	}
	want := []string{`notification "s1"`, `notification "s2"`, `notification "s3"`, `response `}
	if !slices.Equal(got, want) {
		t.Errorf("messages = %q, want %q", got, want)
	}
	if !slices.Equal(lineErrs, []int{4, 5, 6, 7}) {
		t.Errorf("bad lines = %v, want [4 5 6 7]", lineErrs)
	}
}

// An 8 MiB image in a prompt, for the throughput of long strings.
func BenchmarkParse8MiB(b *testing.B) {
	line := NewRequest([]byte("1"), "session/prompt",
		[]byte(`{"sessionId":"s","prompt":[{"type":"image","mimeType":"image/png","data":"`+strings.Repeat("iVBORw0KGgo", 8<<20/11)+`"}]}`))
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWithParams1KiB(b *testing.B) {
	m, err := Parse(update1KiB)
	if err != nil {
		b.Fatal(err)
	}
	params := bytes.Replace(m.Params, []byte("quick"), []byte("QUICK"), 1)
	b.SetBytes(int64(len(update1KiB)))
	b.ReportAllocs()
	for b.Loop() {
		m.WithParams(params)
	}
}

// TestPlainRunEndsAtTheFirstSpecialByte checks the word-at-a-time search of
// string content against a byte-by-byte one: for runs of every length up to
// past the vectorised threshold, plain bytes (ASCII and UTF-8 alike) then a
// quote, a backslash or a control character at every offset.
func TestPlainRunEndsAtTheFirstSpecialByte(t *testing.T) {
	naive := func(d []byte, i int) int {
		for i < len(d) && !special[d[i]] {
			i++
		}
		return i
	}
	for _, fill := range []byte{'x', 0x7f, 0x80, 0xa0, 0xe9, 0xff, ' '} {
		for n := 0; n < 80; n++ {
			for _, c := range []byte{'"', '\\', 0, '\n', 0x1f} {
				for at := 0; at <= n; at++ {
					d := bytes.Repeat([]byte{fill}, n)
					if at < n {
						d[at] = c
					}
					for start := 0; start <= min(n, 9); start++ {
						quote := -1
						if got, want := plainRun(d, start, &quote), naive(d, start); got != want {
							t.Fatalf("plainRun(%q, %d) = %d, want %d", d, start, got, want)
						}
					}
				}
			}
		}
	}
}

// Long runs, where plainRun leaves the words after the first to plainTail
// (SSE2 on amd64), end at the first special byte wherever it is.
func TestPlainRunOfLongRuns(t *testing.T) {
	for _, n := range []int{100, 255, 256, 257, 1000, 1031} {
		for at := 0; at <= n; at++ {
			for _, c := range []byte{'"', '\\', 0x1f} {
				d := bytes.Repeat([]byte{0xfe}, n)
				if at < n {
					d[at] = c
				}
				for _, start := range []int{0, 1, 7, 33} {
					want := max(at, start)
					if at < start {
						want = n
					}
					quote := -1
					if got := plainRun(d, start, &quote); got != want {
						t.Fatalf("plainRun of %d bytes from %d with %q at %d = %d, want %d", n, start, c, at, got, want)
					}
				}
			}
		}
	}
}

// A stream that repeats a method not in the SDK's tables (an extension's,
// say) shares one string for it: reading its messages allocates nothing .
func TestReaderSharesARepeatedMethod(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","method":"_vendor/progress","params":{"sessionId":"s","n":1}}` + "\n")
	r := NewReader(&loopReader{data: bytes.Repeat(line, 64)}, 0)
	if allocs := testing.AllocsPerRun(1000, func() {
		m, err := r.Next()
		if err != nil || m.Method != "_vendor/progress" {
			t.Fatalf("Next: %v, %v", m, err)
		}
	}); allocs != 0 {
		t.Errorf("reading a message allocates %v times", allocs)
	}
}
