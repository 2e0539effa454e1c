package acp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// maxDepth is the deepest nesting of arrays and objects that a message may
// have. It is the limit of encoding/json, so that whatever Parse accepts the
// SDK types can decode.
const maxDepth = 10000

// A scanner validates JSON text in a single pass without decoding it.
type scanner struct {
	data []byte
	pos  int
	// checked: the text was checked by the process that wrote it, so the
	// strings of values are skipped to their closing quote without
	// checking their characters and escapes. They are most of a message's
	// bytes; its structure is still checked.
	checked bool
}

// syntaxError reports invalid JSON at the scanner's position.
func (s *scanner) syntaxError(what string) error {
	if s.pos >= len(s.data) {
		return fmt.Errorf("invalid JSON: unexpected end of input %s", what)
	}
	return fmt.Errorf("invalid JSON: invalid character %s %s at offset %d", quoteChar(s.data[s.pos]), what, s.pos)
}

func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c >= 0x20 && c < 0x7f:
		return "'" + string(c) + "'"
	}
	return fmt.Sprintf("%#02x", c)
}

// skipSpace moves past JSON whitespace.
func (s *scanner) skipSpace() {
	for s.pos < len(s.data) && isSpace(s.data[s.pos]) {
		s.pos++
	}
}

func isSpace(c byte) bool {
	// One comparison for the bytes that are not space: most of them.
	return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r')
}

// expect consumes c, after optional whitespace.
func (s *scanner) expect(c byte, what string) error {
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		return s.syntaxError(what)
	}
	s.pos++
	return nil
}

// special marks the bytes that end a run of plain string content: the
// closing quote, a backslash and the control characters JSON forbids there.
var special = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special8 sets the high bit of the first byte of x (read little-endian)
// that ends a run of plain string content: a quote, a backslash or a
// control character. Bits above it may be set too; none below it is.
func special8(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((q-lsb)&^q | (b-lsb)&^b | (x-lsb*0x20)&^x) & msb
}

// plainRun returns the offset of the first byte at or after i in d that ends
// a run of plain string content, or len(d). Short runs, such as keys, end
// within a few words, read eight bytes at a time; a long one is left to
// plainTail, whose *quote may remember where the next quote is.
func plainRun(d []byte, i int, quote *int) int {
	for short := min(i+32, len(d)); i+8 <= short; i += 8 {
		if m := special8(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return plainTail(d, i, quote)
}

// string moves past the string that starts at s.pos (at its opening quote)
// and reports whether it contains escapes.
func (s *scanner) string() (escaped bool, err error) {
	d := s.data
	i := s.pos + 1
	quote := -1
	for {
		i = plainRun(d, i, &quote)
		if i >= len(d) {
			s.pos = i
			return escaped, s.syntaxError("in string literal")
		}
		switch d[i] {
		case '"':
			s.pos = i + 1
			return escaped, nil
		case '\\':
			escaped = true
			i++
			if i >= len(d) {
				s.pos = i
				return escaped, s.syntaxError("in string escape code")
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(d) || !isHex(d[i]) {
						s.pos = i
						return escaped, s.syntaxError(`in \u hexadecimal character escape`)
					}
					i++
				}
			default:
				s.pos = i
				return escaped, s.syntaxError("in string escape code")
			}
		default:
			s.pos = i
			return escaped, s.syntaxError("in string literal")
		}
	}
}

// decodedValue is value for a value that readers of a message decode (its
// method, its id, its sessionId): its strings are checked even in checked
// text.
func (s *scanner) decodedValue(depth int) error {
	checked := s.checked
	s.checked = false
	err := s.value(depth)
	s.checked = checked
	return err
}

// skipString moves past the string that starts at s.pos (at its opening
// quote) in checked text: to the first quote that is not escaped, the one
// after an even number of backslashes. A key or a short value ends within
// a few words, read eight bytes at a time; a long one is searched with
// bytes.IndexByte.
func (s *scanner) skipString() error {
	d := s.data
	start := s.pos + 1
	i := start
	for short := min(i+32, len(d)); i+8 <= short; i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		q, b := x^(lsb*'"'), x^(lsb*'\\')
		if m := ((q-lsb)&^q | (b-lsb)&^b) & msb; m != 0 {
			// The first is exact: a quote with no backslash before it
			// ends the string.
			if j := i + bits.TrailingZeros64(m)>>3; d[j] == '"' {
				s.pos = j + 1
				return nil
			}
			break
		}
	}
	for {
		q := bytes.IndexByte(d[i:], '"')
		if q < 0 {
			s.pos = len(d)
			return s.syntaxError("in string literal")
		}
		q += i
		backslashes := 0
		for q-backslashes > start && d[q-backslashes-1] == '\\' {
			backslashes++
		}
		if backslashes%2 == 0 {
			s.pos = q + 1
			return nil
		}
		i = q + 1
	}
}

// skipContainer moves past the object or array that starts at s.pos in
// checked text: to the bracket that closes it, matching the brackets
// outside strings. What lies between them is not looked at.
func (s *scanner) skipContainer() error {
	d := s.data
	var stackBuf [32]byte
	open := stackBuf[:0] // the closing bracket of each container open
	for i := s.pos; i < len(d); i++ {
		switch c := d[i]; c {
		case '"':
			s.pos = i
			if err := s.skipString(); err != nil {
				return err
			}
			i = s.pos - 1
		case '{', '[':
			if len(open) == maxDepth {
				s.pos = i
				return fmt.Errorf("invalid JSON: exceeded max depth at offset %d", i)
			}
			open = append(open, c+2) // '}' and ']' follow '{' and '[' by two
		case '}', ']':
			if open[len(open)-1] != c {
				s.pos = i
				return s.syntaxError("closing another bracket")
			}
			if open = open[:len(open)-1]; len(open) == 0 {
				s.pos = i + 1
				return nil
			}
		}
	}
	s.pos = len(d)
	return s.syntaxError("in an object or array not closed")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number moves past the number that starts at s.pos.
func (s *scanner) number() error {
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		s.pos = i
		return s.syntaxError("in numeric literal")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			s.pos = i
			return s.syntaxError("after decimal point in numeric literal")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			s.pos = i
			return s.syntaxError("in exponent of numeric literal")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	s.pos = i
	return nil
}

// literal moves past the literal word (true, false or null) at s.pos.
func (s *scanner) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if s.pos >= len(s.data) || s.data[s.pos] != word[k] {
			return s.syntaxError("in literal " + word + " (expecting '" + word[k:k+1] + "')")
		}
		s.pos++
	}
	return nil
}

// value moves past the JSON value at s.pos, after optional whitespace,
// checking its syntax. depth is the nesting depth of the value's container.
func (s *scanner) value(depth int) error {
	var stackBuf [32]byte
	stack := stackBuf[:0] // '{' or '[' for each open container
	for {
		// A value starts here.
		s.skipSpace()
		if s.pos >= len(s.data) {
			return s.syntaxError("looking for beginning of value")
		}
		switch c := s.data[s.pos]; c {
		case '{', '[':
			if s.checked {
				if err := s.skipContainer(); err != nil {
					return err
				}
				break
			}
			if depth+len(stack)+1 > maxDepth {
				return fmt.Errorf("invalid JSON: exceeded max depth at offset %d", s.pos)
			}
			s.pos++
			s.skipSpace()
			if c == '{' {
				if s.pos < len(s.data) && s.data[s.pos] == '}' {
					s.pos++
					break
				}
				if err := s.key(); err != nil {
					return err
				}
			} else if s.pos < len(s.data) && s.data[s.pos] == ']' {
				s.pos++
				break
			}
			stack = append(stack, c)
			continue
		case '"':
			// The commonest value, kept out of scalar's call.
			if s.checked {
				if err := s.skipString(); err != nil {
					return err
				}
			} else if _, err := s.string(); err != nil {
				return err
			}
		default:
			if err := s.scalar(c); err != nil {
				return err
			}
		}
		// A value ended here: close containers until one continues.
		for {
			if len(stack) == 0 {
				return nil
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				return s.syntaxError("after value")
			}
			top := stack[len(stack)-1]
			c := s.data[s.pos]
			if c == ',' {
				s.pos++
				if top == '{' {
					s.skipSpace()
					if err := s.key(); err != nil {
						return err
					}
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				s.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			if top == '{' {
				return s.syntaxError("after object key:value pair")
			}
			return s.syntaxError("after array element")
		}
	}
}

// scalar moves past the literal or number that starts with c at s.pos,
// checking its syntax.
func (s *scanner) scalar(c byte) error {
	switch c {
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	if c != '-' && !isDigit(c) {
		return s.syntaxError("looking for beginning of value")
	}
	return s.number()
}

// object moves past the object that starts at s.pos (at its opening brace),
// checking its syntax as value does, and returns where the value of its
// member key is (of duplicates, the last): s.data[start:end], with end 0
// when it has none. depth is the nesting depth of the object's container.
// With inner, the value of its member inner.in, when an object, is read
// by object too, and where its member inner.key is goes in inner.at
// (not in checked text, whose values are skipped).
func (s *scanner) object(depth int, key string, inner *innerKey) (start, end int, err error) {
	if depth+1 > maxDepth {
		return 0, 0, fmt.Errorf("invalid JSON: exceeded max depth at offset %d", s.pos)
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return 0, 0, nil
	}
	for {
		keyStart := s.pos
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return 0, 0, s.syntaxError("looking for beginning of object key string")
		}
		escaped, err := s.string()
		if err != nil {
			return 0, 0, err
		}
		lit := s.data[keyStart:s.pos]
		match := string(lit[1:len(lit)-1]) == key
		in := inner != nil && !s.checked && string(lit[1:len(lit)-1]) == inner.in
		if escaped {
			name := unquote(lit)
			match, in = name == key, inner != nil && !s.checked && name == inner.in
		}
		if err := s.expect(':', "after object key"); err != nil {
			return 0, 0, err
		}
		s.skipSpace()
		vs := s.pos
		switch {
		case in && !match && s.pos < len(s.data) && s.data[s.pos] == '{':
			is, ie, err := s.object(depth+1, inner.key, nil)
			if err != nil {
				return 0, 0, err
			}
			inner.at = span{start: is, end: ie}
		case match:
			if err := s.decodedValue(depth + 1); err != nil {
				return 0, 0, err
			}
		default:
			if err := s.value(depth + 1); err != nil {
				return 0, 0, err
			}
		}
		if match {
			start, end = vs, s.pos
		}
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.skipSpace()
			continue
		}
		if s.pos >= len(s.data) {
			return 0, 0, s.syntaxError("after value")
		}
		if s.data[s.pos] != '}' {
			return 0, 0, s.syntaxError("after object key:value pair")
		}
		s.pos++
		return start, end, nil
	}
}

// innerKey is a member of a member of an object that object finds on its
// way: key, in the object that is the value of in.
type innerKey struct {
	in, key string
	at      span // where the value of key is; end 0: not found
}

// key moves past an object key at s.pos and the colon after it.
func (s *scanner) key() error {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return s.syntaxError("looking for beginning of object key string")
	}
	if s.checked {
		if err := s.skipString(); err != nil {
			return err
		}
	} else if _, err := s.string(); err != nil {
		return err
	}
	return s.expect(':', "after object key")
}

// end checks that only whitespace follows the value.
func (s *scanner) end() error {
	s.skipSpace()
	if s.pos < len(s.data) {
		return s.syntaxError("after top-level value")
	}
	return nil
}
