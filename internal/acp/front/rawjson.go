package front

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The helpers below read and patch members of raw JSON objects without
// re-encoding them: a patched object differs from the original only in the
// member that was replaced or added, so _meta, unknown members, member order
// and escaping all survive the front end. The input is JSON that acp.Parse
// has already checked; the helpers never panic on anything else, they just
// report that the member was not found.

// member returns where the value of the top-level member key of the JSON
// object obj is: obj[start:end]. ok is false when obj is not an object or has
// no such member; of duplicate members the last counts, as in encoding/json.
func member(obj []byte, key string) (start, end int, ok bool) {
	p := skipSpace(obj, 0)
	if p >= len(obj) || obj[p] != '{' {
		return 0, 0, false
	}
	p = skipSpace(obj, p+1)
	if p < len(obj) && obj[p] == '}' {
		return 0, 0, false
	}
	for p < len(obj) {
		if obj[p] != '"' {
			return 0, 0, false
		}
		ks := p
		p = skipString(obj, p)
		if p < 0 {
			return 0, 0, false
		}
		k := obj[ks+1 : p-1]
		match := string(k) == key
		if !match && bytes.IndexByte(k, '\\') >= 0 {
			var s string
			match = json.Unmarshal(obj[ks:p], &s) == nil && s == key
		}
		p = skipSpace(obj, p)
		if p >= len(obj) || obj[p] != ':' {
			return 0, 0, false
		}
		p = skipSpace(obj, p+1)
		vs := p
		p = skipValue(obj, p)
		if p < 0 {
			return 0, 0, false
		}
		if match {
			start, end, ok = vs, p, true
		}
		p = skipSpace(obj, p)
		if p >= len(obj) {
			return 0, 0, false
		}
		if obj[p] == '}' {
			return start, end, ok
		}
		if obj[p] != ',' {
			return 0, 0, false
		}
		p = skipSpace(obj, p+1)
	}
	return 0, 0, false
}

// memberValue returns the raw value of the top-level member key, or nil.
func memberValue(obj []byte, key string) []byte {
	s, e, ok := member(obj, key)
	if !ok {
		return nil
	}
	return obj[s:e]
}

// stringMember returns the value of the top-level member key when it is a
// string.
func stringMember(obj []byte, key string) (string, bool) {
	v := memberValue(obj, key)
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// withString returns a copy of obj whose top-level member key is the
// string s, when the member is a string other than s; otherwise obj and
// false.
func withString(obj []byte, key, s string) ([]byte, bool) {
	start, end, ok := stringToReplace(obj, key, s)
	if !ok {
		return obj, false
	}
	q := quote(s)
	out := make([]byte, 0, len(obj)-(end-start)+len(q))
	out = append(out, obj[:start]...)
	out = append(out, q...)
	return append(out, obj[end:]...), true
}

// stringToReplace returns where the value of the top-level member key of
// obj is, obj[start:end], when it is a string other than s.
func stringToReplace(obj []byte, key, s string) (start, end int, ok bool) {
	start, end, ok = member(obj, key)
	if !ok || !otherString(obj[start:end], s) {
		return 0, 0, false
	}
	return start, end, true
}

// otherString reports whether the checked JSON value v is a string other
// than s.
func otherString(v []byte, s string) bool {
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		// The bytes between the quotes are the string.
		return string(v[1:len(v)-1]) != s
	}
	var old string
	return json.Unmarshal(v, &old) == nil && old != s
}

// withMember returns a copy of the object obj whose top-level member key has
// the raw value val: replaced where it is, or added at the end. It returns
// nil when obj is not an object.
func withMember(obj []byte, key string, val []byte) []byte {
	if s, e, ok := member(obj, key); ok {
		out := make([]byte, 0, len(obj)-(e-s)+len(val))
		out = append(out, obj[:s]...)
		out = append(out, val...)
		return append(out, obj[e:]...)
	}
	// Add it before the closing brace.
	p := skipSpace(obj, 0)
	if p >= len(obj) || obj[p] != '{' {
		return nil
	}
	end := skipValue(obj, p)
	if end < 0 {
		return nil
	}
	closing := end - 1
	k := closing - 1
	for k > p && isSpace(obj[k]) {
		k--
	}
	empty := k == p
	kq, _ := json.Marshal(key)
	out := make([]byte, 0, len(obj)+len(kq)+len(val)+2)
	out = append(out, obj[:k+1]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, kq...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, obj[k+1:]...)
}

// quote returns s as a JSON string, as json.Marshal writes it.
func quote(s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return b
		}
	}
	b := make([]byte, 0, len(s)+2)
	return append(append(append(b, '"'), s...), '"')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, p int) int {
	for p < len(b) && isSpace(b[p]) {
		p++
	}
	return p
}

// skipString returns the offset after the string starting at b[p] == '"',
// or -1.
func skipString(b []byte, p int) int {
	for q := p + 1; q < len(b); q++ {
		i := bytes.IndexByte(b[q:], '"')
		if i < 0 {
			return -1
		}
		q += i
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		k := q - 1
		for k > p && b[k] == '\\' {
			k--
		}
		if (q-1-k)%2 == 0 {
			return q + 1
		}
	}
	return -1
}

// skipValue returns the offset after the JSON value starting at b[p], or -1.
func skipValue(b []byte, p int) int {
	if p >= len(b) {
		return -1
	}
	switch b[p] {
	case '"':
		return skipString(b, p)
	case '{', '[':
		depth := 0
		for ; p < len(b); p++ {
			switch b[p] {
			case '"':
				p = skipString(b, p)
				if p < 0 {
					return -1
				}
				p--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return p + 1
				}
			}
		}
		return -1
	default:
		s := p
		for p < len(b) && !isSpace(b[p]) && b[p] != ',' && b[p] != '}' && b[p] != ']' {
			p++
		}
		if p == s {
			return -1
		}
		return p
	}
}

// rpcError is the error object of a JSON-RPC response.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// describeError renders a raw error object for logs and messages.
func describeError(raw []byte) string {
	var e rpcError
	if json.Unmarshal(raw, &e) != nil {
		return string(raw)
	}
	s := e.Message + " (" + strconv.Itoa(e.Code) + ")"
	if len(e.Data) > 0 {
		s += " " + string(e.Data)
	}
	return s
}
