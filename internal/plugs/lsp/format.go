package lsp

import (
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/plugs/starfmt"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// requestFailed is LSP's error of a request that was valid but could not
// be done (a document that does not parse cannot be formatted).
const requestFailed jsonrpc2.Code = -32803

// formatting answers textDocument/formatting with what blaise-agent fmt
// makes of the open document: one edit of its whole text, or none when it
// is formatted already. A document that does not parse is left as it is,
// with fmt's error, which says where.
func (s *server) formatting(u protocol.DocumentURI) ([]protocol.TextEdit, error) {
	d := s.docs[u]
	if d == nil {
		return nil, jsonrpc2.Errorf(jsonrpc2.InvalidParams, "%s is not open", u)
	}
	out, err := starfmt.Source(d.path, []byte(d.text))
	if err != nil {
		return nil, jsonrpc2.Errorf(requestFailed, "%v", err)
	}
	if string(out) == d.text {
		return []protocol.TextEdit{}, nil
	}
	lines := strings.Split(d.text, "\n")
	last := lines[len(lines)-1]
	end := protocol.Position{Line: uint32(len(lines) - 1), Character: uint32(utf16OfByte(last, len(last)))}
	return []protocol.TextEdit{{Range: protocol.Range{End: end}, NewText: string(out)}}, nil
}
