package acp

import (
	"bytes"
	"encoding/json"
)

// WithParams returns a copy of m whose params member is params, added at the
// end of the object when m has none; nil or empty params removes the member.
// Every other byte of Raw stays as it was: member order, whitespace, _meta
// and unknown members. m itself does not change.
//
// params must be a single valid JSON value; it is not checked, but line
// breaks in it are removed (as by [json.Compact]) to keep the message on one
// line. The copy keeps m's Kind and Method: the caller keeps the message a
// valid JSON-RPC message of its kind.
func (m *Message) WithParams(params []byte) *Message { return m.with(memberParams, params) }

// WithResult is like [Message.WithParams] for the result member of a response.
func (m *Message) WithResult(result []byte) *Message { return m.with(memberResult, result) }

// WithError is like [Message.WithParams] for the error member of a response.
func (m *Message) WithError(errorObject []byte) *Message { return m.with(memberError, errorObject) }

// WithID is like [Message.WithParams] for the id member.
func (m *Message) WithID(id []byte) *Message { return m.with(memberID, id) }

func (m *Message) with(member int, v []byte) *Message {
	if bytes.IndexByte(v, '\n') >= 0 || bytes.IndexByte(v, '\r') >= 0 {
		v = oneLine(v)
	}
	sp := m.spans[member]
	raw := m.Raw

	// Replace raw[lo:hi] by ins.
	var lo, hi int
	var ins []byte
	var nsp span // the member's new span
	switch {
	case len(v) == 0 && sp.key == 0:
		c := *m
		if c.blk != nil {
			// The copy aliases the block too: it keeps it with a hold of
			// its own, never released, whatever becomes of m.
			c.blk.retain()
		}
		return &c
	case len(v) == 0:
		lo, hi = removal(raw, sp)
	case sp.key != 0:
		lo, hi, ins = sp.start, sp.end, v
		nsp = span{sp.key, lo, lo + len(v)}
	default:
		lo, hi = m.end, m.end
		k := lo - 1
		for k >= 0 && isSpace(raw[k]) {
			k--
		}
		if k < 0 || raw[k] != '{' {
			ins = append(ins, ',')
		}
		nsp.key = lo + len(ins)
		ins = append(ins, '"')
		ins = append(ins, memberNames[member]...)
		ins = append(ins, '"', ':')
		nsp.start = lo + len(ins)
		ins = append(ins, v...)
		nsp.end = lo + len(ins)
	}

	n := len(raw) - (hi - lo) + len(ins)
	out := make([]byte, 0, n)
	out = append(out, raw[:lo]...)
	out = append(out, ins...)
	out = append(out, raw[hi:]...)

	c := &Message{Raw: out, Kind: m.Kind, Method: m.Method}
	delta := len(ins) - (hi - lo)
	shift := func(off int) int {
		if off > lo {
			return off + delta
		}
		return off
	}
	for i, s := range m.spans {
		switch {
		case i == member:
			s = nsp
		case s.key != 0:
			s = span{shift(s.key), shift(s.start), shift(s.end)}
		}
		c.spans[i] = s
		if s.key != 0 {
			c.setMember(i, out[s.start:s.end])
		}
	}
	c.end = shift(m.end)
	if sp.key == 0 {
		c.end = nsp.end
	}
	if member == memberParams {
		c.sessionStale = true
	} else {
		if m.session.end > 0 {
			c.session = span{start: shift(m.session.start), end: shift(m.session.end)}
		}
		if m.update.end > 0 {
			c.update = span{start: shift(m.update.start), end: shift(m.update.end)}
		}
	}
	c.sessionStale = c.sessionStale || m.sessionStale
	c.updateUnread = m.updateUnread
	return c
}

// oneLine returns v without line breaks: compacted when it is valid JSON,
// else with line breaks turned into spaces.
func oneLine(v []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return buf.Bytes()
	}
	out := make([]byte, len(v))
	for i, c := range v {
		if c == '\n' || c == '\r' {
			c = ' '
		}
		out[i] = c
	}
	return out
}

// removal returns the bytes raw[lo:hi] to cut to remove the member at sp
// with one of the commas around it.
func removal(raw []byte, sp span) (lo, hi int) {
	k := sp.key - 1
	for isSpace(raw[k]) {
		k--
	}
	if raw[k] == ',' {
		// Cut from the end of the previous value.
		k--
		for isSpace(raw[k]) {
			k--
		}
		return k + 1, sp.end
	}
	// The first member: cut up to the next key, if any.
	k = sp.end
	for k < len(raw) && isSpace(raw[k]) {
		k++
	}
	if k < len(raw) && raw[k] == ',' {
		k++
		for k < len(raw) && isSpace(raw[k]) {
			k++
		}
		return sp.key, k
	}
	return sp.key, sp.end
}
