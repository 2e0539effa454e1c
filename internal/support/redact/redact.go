// Package redact replaces secret values in what leaves a session: messages
// toward the client, the transcript, logs and errors. A secret is found in
// its own form and in the forms it takes on the way (JSON-escaped, base64,
// URL-encoded), and replaced by [REDACTED:name].
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
)

// MinLength is the shortest secret value New accepts: a shorter one would
// redact ordinary words.
const MinLength = 4

// Secret is a value to redact and the name that replaces it.
type Secret struct {
	Name  string
	Value string
}

// pattern is one form of a secret.
type pattern struct {
	form        []byte
	replacement []byte
}

// Redactor finds every form of its secrets. It is safe for concurrent use.
//
// The scan is Wu and Manber's: it looks at the text two bytes at a time at
// the end of a window as long as the shortest form, and skips ahead as far
// as those two bytes allow; only where no skip is possible does it compare
// the forms that begin at the window's start.
type Redactor struct {
	// shift is, by two bytes, how far the window may move when they end it.
	shift [1 << 16]uint8
	// byPrefix holds the forms by their first two bytes, longest first.
	byPrefix map[uint16][]pattern
	minLen   int // of the forms, at most maxShift+1
	maxLen   int
	// prefixes are the proper prefixes of every form, for Stream.
	prefixes map[string]bool
}

// maxShift bounds the window, so that a shift fits a byte.
const maxShift = 255

// New returns a Redactor of secrets. A value shorter than MinLength is an
// error, as is an empty name.
func New(secrets []Secret) (*Redactor, error) {
	r := &Redactor{byPrefix: map[uint16][]pattern{}, prefixes: map[string]bool{}}
	for _, s := range secrets {
		if s.Name == "" {
			return nil, fmt.Errorf("a secret needs a name")
		}
		if len(s.Value) < MinLength {
			return nil, fmt.Errorf("secret %s: its value is %d bytes long; one shorter than %d would redact ordinary words", s.Name, len(s.Value), MinLength)
		}
		repl := []byte("[REDACTED:" + s.Name + "]")
		for _, form := range forms(s.Value) {
			p := pattern{form: []byte(form), replacement: repl}
			key := uint16(form[0])<<8 | uint16(form[1])
			r.byPrefix[key] = append(r.byPrefix[key], p)
			if r.minLen == 0 || len(form) < r.minLen {
				r.minLen = len(form)
			}
			r.maxLen = max(r.maxLen, len(form))
			for i := 1; i < len(form); i++ {
				r.prefixes[form[:i]] = true
			}
		}
	}
	for key, bucket := range r.byPrefix {
		// The longest form first: a secret that contains another is
		// replaced whole.
		slices.SortFunc(bucket, func(a, b pattern) int { return len(b.form) - len(a.form) })
		r.byPrefix[key] = bucket
	}
	r.minLen = min(r.minLen, maxShift+1)
	// A block of two bytes that ends a window may be followed, within a
	// form, by as many bytes as the form has after it; one found in no
	// form's first minLen bytes lets the window move past it.
	def := uint8(r.minLen - 1)
	for i := range r.shift {
		r.shift[i] = def
	}
	for _, bucket := range r.byPrefix {
		for _, p := range bucket {
			for j := 0; j+2 <= r.minLen; j++ {
				key := uint16(p.form[j])<<8 | uint16(p.form[j+1])
				r.shift[key] = min(r.shift[key], uint8(r.minLen-2-j))
			}
		}
	}
	return r, nil
}

// forms are the ways value may appear: as it is, escaped inside a JSON
// string, base64 (standard and URL alphabets, with and without padding), and
// URL-encoded (query and path). Forms of fewer than two bytes are left out.
func forms(value string) []string {
	out := []string{
		value,
		jsonString(value, true),
		jsonString(value, false),
		base64.StdEncoding.EncodeToString([]byte(value)),
		base64.RawStdEncoding.EncodeToString([]byte(value)),
		base64.URLEncoding.EncodeToString([]byte(value)),
		base64.RawURLEncoding.EncodeToString([]byte(value)),
		url.QueryEscape(value),
		url.PathEscape(value),
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(f string) bool { return len(f) < 2 })
}

// jsonString is value as it is written inside a JSON string, with <, > and
// & escaped (as Go writes them) or not (as most do).
func jsonString(value string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(value) // a string always encodes
	quoted := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(quoted[1 : len(quoted)-1])
}

// Bytes returns b with every form of every secret replaced. It returns b
// itself, unchanged and without allocating, when there is nothing to
// replace.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || r.minLen == 0 || len(b) < r.minLen {
		return b
	}
	var out []byte
	last := 0
	// end is the index of the last byte of a window of minLen bytes.
	for end := r.minLen - 1; end < len(b); {
		if d := r.shift[uint16(b[end-1])<<8|uint16(b[end])]; d > 0 {
			end += int(d)
			continue
		}
		start := end - r.minLen + 1
		p, ok := match(r.byPrefix[uint16(b[start])<<8|uint16(b[start+1])], b[start:])
		if !ok {
			end++
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(append(out, b[last:start]...), p.replacement...)
		last = start + len(p.form)
		end = last + r.minLen - 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string {
	if r == nil || r.minLen == 0 || len(s) < r.minLen {
		return s
	}
	b := []byte(s)
	out := r.Bytes(b)
	if &out[0] == &b[0] && len(out) == len(b) {
		return s
	}
	return string(out)
}

// match returns the first pattern of bucket that b starts with.
func match(bucket []pattern, b []byte) (pattern, bool) {
	for _, p := range bucket {
		if bytes.HasPrefix(b, p.form) {
			return p, true
		}
	}
	return pattern{}, false
}

// Stream redacts a text that arrives in pieces, such as the chunks of an
// agent's answer: a piece that ends with the beginning of a secret keeps
// that end back until the next piece shows whether the secret follows.
type Stream struct {
	r     *Redactor
	carry []byte
}

// Stream returns a Stream of r's secrets.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Next takes the next piece and returns what of the text so far can be let
// out, redacted; the rest waits for the next piece or Flush.
func (s *Stream) Next(piece string) string {
	text := append(s.carry, piece...)
	s.carry = nil
	keep := s.held(text)
	out := s.r.Bytes(text[:len(text)-keep])
	if keep > 0 {
		s.carry = append([]byte(nil), text[len(text)-keep:]...)
	}
	return string(out)
}

// Flush returns the text kept back, redacted, and empties the stream.
func (s *Stream) Flush() string {
	out := string(s.r.Bytes(s.carry))
	s.carry = nil
	return out
}

// Held reports whether text is kept back.
func (s *Stream) Held() bool { return len(s.carry) > 0 }

// held is the length of the longest end of text that begins a form of a
// secret (and is not a whole form: Bytes replaces those).
func (s *Stream) held(text []byte) int {
	for k := min(len(text), s.r.maxLen-1); k > 0; k-- {
		if s.r.prefixes[string(text[len(text)-k:])] {
			return k
		}
	}
	return 0
}
