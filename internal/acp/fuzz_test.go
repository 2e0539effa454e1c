package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
)

// reference classifies a line as Parse should, with encoding/json: the kind
// of message and its method, or ok false when it is not a message.
func reference(line []byte) (kind Kind, method string, members map[string][]byte, ok bool) {
	if !json.Valid(line) {
		return 0, "", nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, "", nil, false
	}
	members = map[string][]byte{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, "", nil, false
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, "", nil, false
		}
		switch key {
		case "jsonrpc", "method", "id", "params", "result", "error":
			if _, dup := members[key]; dup {
				return 0, "", nil, false
			}
			members[key] = raw
		}
	}
	id, hasID := members["id"]
	_, hasResult := members["result"]
	_, hasError := members["error"]
	if hasID {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case 'n':
			if _, hasMethod := members["method"]; hasMethod || !hasError {
				return 0, "", nil, false
			}
		default:
			return 0, "", nil, false
		}
	}
	if raw, ok := members["method"]; ok {
		if raw[0] != '"' || json.Unmarshal(raw, &method) != nil || hasResult || hasError {
			return 0, "", nil, false
		}
		if hasID {
			return Request, method, members, true
		}
		return Notification, method, members, true
	}
	if hasID && hasResult != hasError {
		return Response, "", members, true
	}
	return 0, "", nil, false
}

var parseSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"b\" {c}"}}}}`,
	`{"jsonrpc":"2.0","id":"x","result":{"stopReason":"end_turn","_meta":{}}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	`{ "id" : 1.0e0 , "method" : "a\u0062" , "params" : [ ] , "_meta" : null }`,
	`{"id":1,"method":"a","result":1}`,
	`{"params":{},"method":"x"}`,
	`{"id":1,"id":2,"result":1}`,
	`[1,2]`,
	`{"method":"a","params":"\ud800\udc00\\"}`,
	"{\"method\":\"\xff\"}",
	`{}`,
	`{"id":true,"result":1}`,
	`{"id":-0,"error":{"code":1}}`,
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		orig := bytes.Clone(line)
		m, err := Parse(line)
		// What a checked stream's reader makes of the line: the same
		// message, when Parse accepts it, and no panic otherwise.
		checked := &Message{Raw: line}
		checkedErr := checked.parse("", true)
		if err == nil {
			if checkedErr == nil && !bytes.Equal(checked.SessionUpdate(), m.SessionUpdate()) {
				t.Fatalf("checked parse of %q: sessionUpdate %q; Parse gives %q", orig, checked.SessionUpdate(), m.SessionUpdate())
			}
			// The rest alike: a checked message reads its update's kind when asked.
			unread := *checked
			unread.update, unread.updateUnread = m.update, false
			if checkedErr != nil || !reflect.DeepEqual(&unread, m) {
				t.Fatalf("checked parse of %q = %+v, %v; Parse gives %+v", orig, checked, checkedErr, m)
			}
		}
		kind, method, members, ok := reference(orig)
		if err != nil {
			if ok {
				t.Fatalf("Parse(%q): %v; encoding/json classifies it as a %v", orig, err, kind)
			}
			return
		}
		if !ok {
			t.Fatalf("Parse(%q) = %v; encoding/json does not classify it", orig, m.Kind)
		}
		if !bytes.Equal(line, orig) {
			t.Fatal("Parse modified its input")
		}
		if m.Kind != kind || m.Method != method {
			t.Fatalf("Parse(%q) = %v %q; encoding/json: %v %q", orig, m.Kind, m.Method, kind, method)
		}
		for name, got := range map[string][]byte{"id": m.ID, "params": m.Params, "result": m.Result, "error": m.Error} {
			if want, ok := members[name]; !bytesEqual(got, want) && !(got == nil && !ok) {
				t.Fatalf("Parse(%q): %s = %q, encoding/json %q", orig, name, got, want)
			}
		}

		var params map[string]json.RawMessage
		if json.Unmarshal(members["params"], &params) != nil {
			params = nil
		}
		if got, want := m.SessionID(), params["sessionId"]; !bytes.Equal(got, want) {
			t.Fatalf("Parse(%q): params.sessionId = %q, encoding/json %q", orig, got, want)
		}

		// Putting a member back as it was changes nothing (but for line
		// breaks, which With… removes).
		for _, n := range []*Message{m.WithParams(m.Params), m.WithResult(m.Result), m.WithError(m.Error), m.WithID(m.ID)} {
			if !bytes.Equal(n.Raw, orig) && !bytes.ContainsAny(orig, "\r\n") {
				t.Fatalf("With…(same) of %q = %q", orig, n.Raw)
			}
		}
		// Replacing, adding and removing params keeps the message what
		// parsing gives.
		n := m.WithParams([]byte(`{"a":[1,"}"]}`))
		checkConsistent(t, n)
		checkConsistent(t, n.WithParams(nil))
		checkConsistent(t, m.WithParams(nil))
		if m.Kind == Response {
			if m.Result != nil {
				checkConsistent(t, m.WithResult([]byte(`{"stopReason":"cancelled"}`)))
			} else {
				checkConsistent(t, m.WithError([]byte(`{"code":-32800,"message":"x"}`)))
			}
		}
		// A number's key is a number with the same key.
		if key := IDKey(m.ID); m.ID != nil && m.ID[0] != '"' && m.ID[0] != 'n' && IDKey([]byte(key)) != key {
			t.Fatalf("IDKey(%s) = %s, IDKey(%s) = %s", m.ID, key, key, IDKey([]byte(key)))
		}
		if !bytes.Equal(line, orig) {
			t.Fatal("With… modified the original")
		}
	})
}

// FuzzReader checks the Reader against splitting the stream by hand. The
// first byte of the input picks the line limit, the second the size of the
// reads.
func FuzzReader(f *testing.F) {
	f.Add([]byte("\x40\x00" + parseSeeds[0] + "\n" + parseSeeds[1] + "\r\n\nnot json\n" + parseSeeds[2]))
	f.Add([]byte("\x10\x01{\"method\":\"a\"}\n{\"method\":\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}\n{\"id\":1,\"result\":2}"))
	f.Add([]byte("\x20\x02\r\n\r\n{\"method\":\"a\"}\r\r\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		maxLine := int(data[0])%128 + 1
		oneByte := data[1]%2 == 1
		stream := data[2:]

		var src io.Reader = bytes.NewReader(stream)
		if oneByte {
			src = iotest.OneByteReader(src)
		}
		r := newReaderSize(src, maxLine, 16)

		// What the Reader should return, line by line.
		lines := bytes.SplitAfter(stream, []byte("\n"))
		var kept []*Message
		var keptRaw []string
		lineNo := 0
		for _, line := range lines {
			if len(line) == 0 {
				continue
			}
			lineNo++
			body := trimEOL(line)
			if blank(body) {
				continue
			}
			m, err := r.Next()
			if len(body) > maxLine {
				var le *LineError
				reason := fmt.Sprintf("line of %d bytes exceeds the limit of %d bytes", len(body), maxLine)
				if !errors.As(err, &le) || le.Line != lineNo || !bytes.HasPrefix(body, le.Prefix) || le.Reason != reason {
					t.Fatalf("line %d of %d bytes > %d: Next = %v, %v", lineNo, len(body), maxLine, m, err)
				}
				continue
			}
			want, perr := Parse(bytes.Clone(body))
			if perr != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line != lineNo || le.Reason != perr.Error() {
					t.Fatalf("line %d %q: Next = %v, %v; want LineError %v", lineNo, body, m, err, perr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("line %d %q: %v", lineNo, body, err)
			}
			if !bytes.Equal(m.Raw, body) || m.Kind != want.Kind || m.Method != want.Method {
				t.Fatalf("line %d: got %q, want %q", lineNo, m.Raw, body)
			}
			checkConsistent(t, m)
			if m.line != nil && string(m.line) != string(body)+"\n" {
				t.Fatalf("line %d: line %q for %q", lineNo, m.line, body)
			}
			// Every other message is released at once, so that its block
			// may be read into again; the others are kept.
			if lineNo%2 == 0 {
				m.Release()
			} else {
				kept = append(kept, m)
				keptRaw = append(keptRaw, string(body))
			}
		}
		if m, err := r.Next(); err != io.EOF {
			t.Fatalf("at the end: Next = %v, %v", m, err)
		}
		for i, m := range kept {
			if string(m.Raw) != keptRaw[i] {
				t.Fatalf("a kept message changed to %q from %q", m.Raw, keptRaw[i])
			}
		}
	})
}

// trimEOL removes a trailing "\n" or "\r\n".
func trimEOL(line []byte) []byte {
	if line, ok := bytes.CutSuffix(line, []byte("\n")); ok {
		line, _ = bytes.CutSuffix(line, []byte("\r"))
		return line
	}
	return line
}

// FuzzBundles writes the lines of the input, each a session/update with
// the line as its text, bundled where its first byte is odd, and reads
// them back with a checked Reader in small blocks and reads of one byte:
// the lines come back in order and whole, bundled or not, with no line
// error. The same input read as it is by a checked Reader must not make it
// fail in any other way than a LineError.
func FuzzBundles(f *testing.F) {
	f.Add([]byte("a\nb\nc\x01\n\x03\"\\\n"))
	f.Add([]byte("+3 1\n{}\n+12 2\n{\"a\":1}\n{}\n"))
	f.Add([]byte("+99999999999 1\n+5 9\n{\"method\":\"x\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As it is: bad heads, cut bundles, lines that are not JSON.
		raw := newReaderSize(iotest.OneByteReader(bytes.NewReader(data)), 64, 16)
		raw.checked = true
		for {
			m, err := raw.Next()
			var le *LineError
			if errors.As(err, &le) {
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == Bundle && (m.line[0] != '{' || m.line[len(m.line)-1] != '\n') {
				t.Fatalf("a bundle not of whole lines: %q", m.line)
			}
		}

		var out bytes.Buffer
		w := NewWriter(&out)
		var want strings.Builder
		for i, text := range strings.Split(string(data), "\n") {
			line := NewNotification("session/update", fmt.Appendf(nil, `{"sessionId":"s","update":{"text":%s}}`, jsonstr.Append(nil, text)))
			want.Write(line)
			want.WriteByte('\n')
			m := mustParse(line)
			var err error
			if len(text) > 0 && text[0]%2 == 1 || i%3 == 0 {
				err = w.WriteBundled(m, nil, nil, WithNext)
			} else {
				err = w.WriteMessage(m, Behind)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r := newReaderSize(iotest.OneByteReader(&out), 0, 16)
		r.checked = true
		var got strings.Builder
		for {
			m, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reading back: %v", err)
			}
			got.Write(m.Raw)
			got.WriteByte('\n')
		}
		if got.String() != want.String() {
			t.Fatalf("read back\n%q\nwant\n%q", got.String(), want.String())
		}
	})
}
