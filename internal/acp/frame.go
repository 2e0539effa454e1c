// Package acp frames, classifies and patches the JSON-RPC 2.0 messages of the
// Agent Client Protocol (ACP) without re-encoding them, and describes the ACP
// methods with the types of github.com/coder/acp-go-sdk.
//
// A proxy reads a stream with a [Reader], which yields one [Message] per line;
// a Message keeps the line's bytes as they came and locates its members
// without decoding them, so that a message no one changed is forwarded byte
// for byte, and one that was changed differs only in the member that was
// replaced ([Message.WithParams], [Message.WithResult], [Message.WithError]).
// A [Writer] writes messages back to a stream.
package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
)

// Error codes of JSON-RPC 2.0 and ACP.
const (
	ParseError       = -32700
	InvalidRequest   = -32600
	MethodNotFound   = -32601
	InvalidParams    = -32602
	InternalError    = -32603
	RequestCancelled = -32800 // ACP: the request was cancelled
	AuthRequired     = -32000 // ACP: authentication required
)

// Kind is the kind of a JSON-RPC message.
type Kind uint8

// The kinds of JSON-RPC messages.
const (
	Request      Kind = iota + 1 // has a method and an id
	Notification                 // has a method and no id
	Response                     // has an id and a result or an error
	// Bundle: lines of session/update notifications toward the client,
	// which a session process checked and gave the client's session id
	// (Writer.WriteBundled), read by a checked Reader as one Message whose
	// Raw holds them all, each with its newline. It is passed on as it is.
	Bundle
)

func (k Kind) String() string {
	switch k {
	case Request:
		return "request"
	case Notification:
		return "notification"
	case Response:
		return "response"
	case Bundle:
		return "bundle"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Indexes of the members of a Message that can be replaced.
const (
	memberID = iota
	memberParams
	memberResult
	memberError
	numMembers
)

var memberNames = [numMembers]string{"id", "params", "result", "error"}

// A span locates a member of a message's top-level object in its Raw bytes.
// The zero span means the member is absent: a key never starts at offset 0.
type span struct {
	key        int // offset of the key's opening quote
	start, end int // offsets of the value
}

// A Message is one JSON-RPC 2.0 message: the bytes of its line, and where its
// parts are within them.
//
// The byte slices of a Message alias Raw; none of them may be modified. A
// Message is immutable, so it may be shared between goroutines.
type Message struct {
	// Raw is the line of the message without its line terminator.
	Raw []byte

	Kind   Kind
	Method string // the method of a request or notification; unescaped

	// The raw JSON values of the id, params, result and error members, as
	// sub-slices of Raw; nil when the member is absent. An absent id is nil;
	// an id of null is "null".
	ID     []byte
	Params []byte
	Result []byte
	Error  []byte

	spans [numMembers]span // where the members above are in Raw
	end   int              // offset just after the last member's value
	// session is where the value of params.sessionId is in Raw (its key
	// is not kept): found while params is checked, so that a front end
	// rewrites it without reading params again. Zero: params has none;
	// sessionStale: params was replaced, and is read when asked.
	session      span
	sessionStale bool
	// update is where params.update.sessionUpdate is, found the same way
	// (a session/update's kind); stale with session, and read when asked
	// in checked text too (updateUnread), whose values are skipped.
	update       span
	updateUnread bool

	// blk is the block of the Reader that read the message, on which the
	// message has a hold; nil for other messages.
	blk *block
	// line is Raw and the "\n" after it in blk, with the capacity of the
	// rest of blk, so that a Writer can write consecutive lines as one
	// piece; nil when Raw did not end in "\n" there.
	line []byte
}

// Release drops m's hold on its Reader's block, which is read into again,
// and its Messages reused, once no message holds it: neither m nor
// anything taken from it may be used afterwards. A message never released
// is left to the garbage collector, so only its last user releases it, and
// only when no one else can have kept it.
func (m *Message) Release() {
	if m.blk != nil {
		m.blk.release(1)
	}
}

// errNotJSONRPC formats the error for JSON that is not a JSON-RPC message.
func errNotJSONRPC(format string, args ...any) error {
	return fmt.Errorf("not a JSON-RPC message: "+format, args...)
}

// Bits for the top-level members Parse knows, to find duplicates.
const (
	seenJSONRPC = 1 << iota
	seenMethod
	seenID
	seenParams
	seenResult
	seenError
)

// Parse parses one line that holds a JSON-RPC 2.0 message: a JSON object,
// optionally surrounded by whitespace, with no line terminator.
//
// Parse checks that line is valid JSON and classifies it: a method and an id
// make a [Request], a method without an id a [Notification], an id with a
// result or an error (but not both) a [Response]. Ids are numbers or strings;
// null is accepted only in error responses. A message with a duplicate
// JSON-RPC member (id, method, params, result, error, jsonrpc) is rejected as
// ambiguous. Params, result and error may be any JSON value; the jsonrpc
// member is not checked.
//
// Parse does not copy line: the returned Message keeps it as Raw, and the
// caller must not modify it afterwards.
func Parse(line []byte) (*Message, error) {
	m := &Message{Raw: line}
	if err := m.parse("", false); err != nil {
		return nil, err
	}
	return m, nil
}

// parse parses m.Raw. last is the method of the message read before it, if
// any: a stream repeats its methods, whose strings are then shared. checked
// tells that the process that wrote m.Raw checked it (see NewCheckedReader).
func (m *Message) parse(last string, checked bool) error {
	s := scanner{data: m.Raw, checked: checked}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] != '{' {
		if err := s.value(0); err != nil {
			return err
		}
		if err := s.end(); err != nil {
			return err
		}
		return errNotJSONRPC("not an object")
	}
	if err := s.expect('{', "looking for beginning of value"); err != nil {
		return err
	}

	seen, methodRaw, semantic, err := m.members(&s)
	if err != nil {
		return err
	}
	if err := s.end(); err != nil {
		return err
	}
	if semantic != nil {
		return semantic
	}

	for i, sp := range m.spans {
		if sp.key != 0 {
			m.setMember(i, m.Raw[sp.start:sp.end])
		}
	}
	return m.classify(seen, methodRaw, last)
}

// members reads the members of the object at s.pos, past its opening
// brace, noting the spans of those Parse knows. seen has the bit of each
// member, methodRaw is the method's value, semantic the first error in
// meaning: syntax errors (err) come first.
func (m *Message) members(s *scanner) (seen int, methodRaw []byte, semantic, err error) {
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return 0, nil, nil, nil
	}
	for {
		s.skipSpace()
		keyStart := s.pos
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return 0, nil, nil, s.syntaxError("looking for beginning of object key string")
		}
		keyEsc, err := s.string()
		if err != nil {
			return 0, nil, nil, err
		}
		key := s.data[keyStart+1 : s.pos-1]
		if keyEsc {
			key = []byte(unquote(s.data[keyStart:s.pos]))
		}
		if err := s.expect(':', "after object key"); err != nil {
			return 0, nil, nil, err
		}
		s.skipSpace()
		start := s.pos
		name, bit, member := memberOf(key)
		if member == memberParams && s.pos < len(s.data) && s.data[s.pos] == '{' {
			// Checked as any value would be, and where its sessionId
			// and the kind of an update are is noted on the way.
			update := innerKey{in: "update", key: "sessionUpdate"}
			vs, ve, err := s.object(1, "sessionId", &update)
			if err != nil {
				return 0, nil, nil, err
			}
			m.session, m.update, m.updateUnread = span{start: vs, end: ve}, update.at, s.checked
		} else if member == memberParams || member == memberResult || member == memberError {
			if err := s.value(1); err != nil {
				return 0, nil, nil, err
			}
		} else if err := s.decodedValue(1); err != nil {
			return 0, nil, nil, err
		}
		end := s.pos
		m.end = end

		if seen&bit != 0 && semantic == nil {
			semantic = errNotJSONRPC("duplicate member %q", name)
		}
		seen |= bit
		if member >= 0 {
			m.spans[member] = span{keyStart, start, end}
		}
		if bit == seenMethod {
			methodRaw = s.data[start:end]
			if methodRaw[0] != '"' && semantic == nil {
				semantic = errNotJSONRPC("method is not a string")
			}
		}

		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			continue
		}
		if err := s.expect('}', "after object key:value pair"); err != nil {
			return 0, nil, nil, err
		}
		return seen, methodRaw, semantic, nil
	}
}

// classify sets m's Kind and Method from the members seen (see Parse).
// last is the method of the message read before it.
func (m *Message) classify(seen int, methodRaw []byte, last string) error {
	if m.ID != nil {
		switch c := m.ID[0]; {
		case c == '"' || c == '-' || isDigit(c):
		case c == 'n':
			if seen&seenMethod != 0 || seen&seenError == 0 {
				return errNotJSONRPC("id is null")
			}
		default:
			return errNotJSONRPC("id is not a number or a string")
		}
	}
	switch {
	case seen&seenMethod != 0:
		if seen&(seenResult|seenError) != 0 {
			if seen&seenResult != 0 {
				return errNotJSONRPC("has a method and a result")
			}
			return errNotJSONRPC("has a method and an error")
		}
		m.Kind = Notification
		if seen&seenID != 0 {
			m.Kind = Request
		}
		if bytes.IndexByte(methodRaw, '\\') >= 0 || !utf8.Valid(methodRaw) {
			m.Method = unquote(methodRaw)
		} else if name := methodRaw[1 : len(methodRaw)-1]; string(name) == last {
			m.Method = last
		} else {
			m.Method = internMethod(name)
		}
	case seen&seenID == 0:
		return errNotJSONRPC("has no method and no id")
	case seen&seenResult != 0 && seen&seenError != 0:
		return errNotJSONRPC("has a result and an error")
	case seen&(seenResult|seenError) == 0:
		return errNotJSONRPC("has an id but no method, result or error")
	default:
		m.Kind = Response
	}
	return nil
}

// memberOf returns the name, seen bit and member index of a top-level key
// that Parse knows; member is -1 for the keys that are not spanned.
func memberOf(key []byte) (name string, bit, member int) {
	switch string(key) {
	case "jsonrpc":
		return "jsonrpc", seenJSONRPC, -1
	case "method":
		return "method", seenMethod, -1
	case "id":
		return "id", seenID, memberID
	case "params":
		return "params", seenParams, memberParams
	case "result":
		return "result", seenResult, memberResult
	case "error":
		return "error", seenError, memberError
	}
	return "", 0, -1
}

// internMethod returns method as a string, sharing the names of known methods
// rather than allocating.
func internMethod(method []byte) string {
	if m, ok := Methods[string(method)]; ok {
		return m.Name
	}
	return string(method)
}

// unquote decodes a valid JSON string literal.
func unquote(lit []byte) string {
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		panic("acp: unquote of a checked string failed: " + err.Error())
	}
	return s
}

// setMember sets the exported field of member i.
func (m *Message) setMember(i int, v []byte) {
	switch i {
	case memberID:
		m.ID = v
	case memberParams:
		m.Params = v
	case memberResult:
		m.Result = v
	case memberError:
		m.Error = v
	}
}

// SessionID returns the raw JSON value of the member sessionId of m's
// params (of duplicates, the last), a slice of Raw; nil when params is not
// an object or has no sessionId.
func (m *Message) SessionID() []byte {
	if !m.sessionStale {
		if m.session.end == 0 {
			return nil
		}
		return m.Raw[m.session.start:m.session.end]
	}
	return m.readParams("sessionId", nil)
}

// readParams reads params again, for what the check did not note (params
// that WithParams put in, values checked text skipped): the value of its
// member key, or with inner, inner's. A value that is not JSON has none.
func (m *Message) readParams(key string, inner *innerKey) []byte {
	sp := m.spans[memberParams]
	if sp.key == 0 || m.Raw[sp.start] != '{' {
		return nil
	}
	s := scanner{data: m.Raw[:sp.end], pos: sp.start}
	start, end, err := s.object(1, key, inner)
	if inner != nil {
		start, end = inner.at.start, inner.at.end
	}
	if err != nil || end == 0 {
		return nil
	}
	return m.Raw[start:end]
}

// SessionUpdate returns the raw JSON value of params.update.sessionUpdate
// (of duplicates, the last), the kind of a session/update
// (`"agent_message_chunk"`), a slice of Raw; nil when there is none.
func (m *Message) SessionUpdate() []byte {
	if !m.sessionStale && !m.updateUnread {
		if m.update.end == 0 {
			return nil
		}
		return m.Raw[m.update.start:m.update.end]
	}
	return m.readParams("", &innerKey{in: "update", key: "sessionUpdate"})
}

// IDKey returns a canonical key for a raw JSON-RPC id, for tables of pending
// requests: ids that denote the same JSON value get the same key, and a
// number never has the key of a string ("1" differs from `"1"`).
//
// Numbers are keyed by their exact decimal value (1, 1.0 and 1e0 are the same
// key, "1"), strings by their decoded text in quotes, null by "null". An id
// that is not a valid JSON number, string or null is keyed by its raw text.
func IDKey(id []byte) string {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return ""
	}
	switch c := id[0]; {
	case c == '"':
		if bytes.IndexByte(id, '\\') < 0 {
			return string(id)
		}
		var s string
		if json.Unmarshal(id, &s) != nil {
			return string(id)
		}
		return `"` + s + `"`
	case c == '-' || isDigit(c):
		return numberKey(id)
	}
	return string(id)
}

// maxIntDigits bounds the digits numberKey writes out in full: larger or
// smaller magnitudes are written in exponent form.
const maxIntDigits = 40

// numberKey returns the canonical decimal text of a JSON number: an integer
// without sign for zero, leading zeros, fraction or exponent where it is
// integral and not huge, else digits with an exponent ("15e-1" for 1.5).
func numberKey(num []byte) string {
	s := scanner{data: num}
	if s.number() != nil || s.pos != len(num) {
		return string(num)
	}
	// The common case: an integer already in canonical form.
	plain := true
	for i, c := range num {
		if !isDigit(c) && !(c == '-' && i == 0) {
			plain = false
			break
		}
	}
	if plain && string(num) != "-0" {
		return string(num)
	}

	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant, exp, _ := strings.Cut(string(num), "e")
	if i := strings.IndexByte(mant, 'E'); i >= 0 {
		mant, exp = mant[:i], mant[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
	if exp == "" {
		e, err = 0, nil
	}
	if err != nil {
		return string(num) // an exponent too large for an int
	}
	e -= len(frac)
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	e += len(digits) - len(trimmed)
	digits = trimmed

	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(digits)
	if e >= 0 && len(digits)+e <= maxIntDigits {
		b.WriteString(strings.Repeat("0", e))
	} else {
		b.WriteByte('e')
		b.WriteString(strconv.Itoa(e))
	}
	return b.String()
}

// NewRequest returns a request with the given raw id and params; nil params
// leaves out the params member.
func NewRequest(id []byte, method string, params []byte) []byte {
	b := newMessage(len(id) + len(method) + len(params) + 64)
	b = append(b, `,"id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = jsonstr.Append(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return endMessage(b)
}

// NewNotification returns a notification with the given params; nil params
// leaves out the params member.
func NewNotification(method string, params []byte) []byte {
	b := newMessage(len(method) + len(params) + 64)
	b = append(b, `,"method":`...)
	b = jsonstr.Append(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return endMessage(b)
}

// NewResponse returns a successful response to the request with the given
// raw id; nil result is written as null.
func NewResponse(id []byte, result []byte) []byte {
	if result == nil {
		result = []byte("null")
	}
	b := newMessage(len(id) + len(result) + 64)
	b = append(b, `,"id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return endMessage(b)
}

// NewErrorResponse returns an error response to the request with the given
// raw id (nil for null). data, the raw JSON of the error's data member, is
// left out when nil.
func NewErrorResponse(id []byte, code int, message string, data []byte) []byte {
	if id == nil {
		id = []byte("null")
	}
	b := newMessage(len(id) + len(message) + len(data) + 96)
	b = append(b, `,"id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = jsonstr.Append(b, message)
	if data != nil {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = append(b, '}')
	return endMessage(b)
}

func newMessage(size int) []byte {
	return append(make([]byte, 0, size), `{"jsonrpc":"2.0"`...)
}

// endMessage closes the object.
func endMessage(b []byte) []byte {
	return append(b, '}')
}
