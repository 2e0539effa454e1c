// Package lsp is a Language Server Protocol server for .star plugs,
// configurations and modules: completion and hover from the user
// documentation, diagnostics with the messages of `blaise-agent check`, and
// go to definition through load() and use().
package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/blaiseagent/blaise-agent/internal/plugs/plugdoc"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
	"go.starlark.net/syntax"
)

// A document is a file open in the editor.
type document struct {
	uri     protocol.DocumentURI
	path    string // absolute
	text    string
	version int32
	// plug is the last plug the document loaded as, for the schemas of
	// ctx.inputs and ctx.persisted.value while an edit breaks it.
	plug *interp.Plug
}

// server holds the open documents. The connection calls its handler for
// one message at a time, so it needs no lock.
type server struct {
	conn      jsonrpc2.Conn
	newLoader func() *interp.Loader
	model     *model
	version   string
	docs      map[protocol.DocumentURI]*document
	exited    chan struct{} // closed by the exit notification
}

// Serve speaks LSP on r and w until the client exits or closes the stream.
// newLoader makes the loader of `blaise-agent check`, so that diagnostics
// say what check says.
func Serve(ctx context.Context, r io.Reader, w io.Writer, newLoader func() *interp.Loader, version string) error {
	m, err := newModel(newLoader().FilePredeclared())
	if err != nil {
		return err
	}
	conn := jsonrpc2.NewConn(jsonrpc2.NewStream(stdio{r, w}))
	s := &server{conn: conn, newLoader: newLoader, model: m, version: version, docs: map[protocol.DocumentURI]*document{}, exited: make(chan struct{})}
	conn.Go(ctx, s.recovering)
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		return nil
	case <-conn.Done():
	}
	if err := conn.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("lsp: %w", err)
	}
	return nil
}

// stdio joins a reader and a writer into the stream jsonrpc2 wants; the
// process's end closes them.
type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return nil }

// recovering answers a request whose handling panics with an error rather
// than ending the server, and the editor's session with it.
func (s *server) recovering(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = reply(ctx, nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s: %v", req.Method(), r))
		}
	}()
	return s.handle(ctx, reply, req)
}

func (s *server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	switch req.Method() {
	case protocol.MethodInitialize:
		return reply(ctx, s.initialize(), nil)
	case protocol.MethodShutdown:
		return reply(ctx, nil, nil)
	case protocol.MethodExit:
		close(s.exited)
		return nil
	case protocol.MethodTextDocumentDidOpen:
		var p protocol.DidOpenTextDocumentParams
		if err := decode(req, &p); err != nil {
			return err
		}
		d := &document{uri: p.TextDocument.URI, path: pathOf(p.TextDocument.URI), text: p.TextDocument.Text, version: p.TextDocument.Version}
		s.docs[d.uri] = d
		return s.publishAll(ctx, d)
	case protocol.MethodTextDocumentDidChange:
		var p protocol.DidChangeTextDocumentParams
		if err := decode(req, &p); err != nil {
			return err
		}
		d := s.docs[p.TextDocument.URI]
		if d == nil || len(p.ContentChanges) == 0 {
			return nil
		}
		// Full synchronisation: the last change is the whole text.
		d.text, d.version = p.ContentChanges[len(p.ContentChanges)-1].Text, p.TextDocument.Version
		return s.publishAll(ctx, d)
	case protocol.MethodTextDocumentDidClose:
		var p protocol.DidCloseTextDocumentParams
		if err := decode(req, &p); err != nil {
			return err
		}
		delete(s.docs, p.TextDocument.URI)
		if err := s.publish(ctx, p.TextDocument.URI, 0, nil); err != nil {
			return err
		}
		return s.publishAll(ctx, nil)
	case protocol.MethodTextDocumentCompletion:
		var p protocol.CompletionParams
		if err := decode(req, &p); err != nil {
			return reply(ctx, nil, err)
		}
		return reply(ctx, s.completion(p.TextDocument.URI, p.Position), nil)
	case protocol.MethodTextDocumentHover:
		var p protocol.HoverParams
		if err := decode(req, &p); err != nil {
			return reply(ctx, nil, err)
		}
		return reply(ctx, s.hover(p.TextDocument.URI, p.Position), nil)
	case protocol.MethodTextDocumentDefinition:
		var p protocol.DefinitionParams
		if err := decode(req, &p); err != nil {
			return reply(ctx, nil, err)
		}
		return reply(ctx, s.definition(p.TextDocument.URI, p.Position), nil)
	case protocol.MethodTextDocumentFormatting:
		var p protocol.DocumentFormattingParams
		if err := decode(req, &p); err != nil {
			return reply(ctx, nil, err)
		}
		edits, err := s.formatting(p.TextDocument.URI)
		return reply(ctx, edits, err)
	}
	if _, call := req.(*jsonrpc2.Call); call {
		return jsonrpc2.MethodNotFoundHandler(ctx, reply, req)
	}
	return nil // notifications the server has no use for
}

func decode(req jsonrpc2.Request, v any) error {
	if err := json.Unmarshal(req.Params(), v); err != nil {
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "%s: invalid params: %v", req.Method(), err)
	}
	return nil
}

func pathOf(u protocol.DocumentURI) string {
	p, err := filepath.Abs(uri.URI(u).Filename())
	if err != nil {
		return uri.URI(u).Filename()
	}
	return p
}

func (s *server) initialize() *protocol.InitializeResult {
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			TextDocumentSync: protocol.TextDocumentSyncOptions{
				OpenClose: true,
				Change:    protocol.TextDocumentSyncKindFull,
			},
			CompletionProvider:         &protocol.CompletionOptions{TriggerCharacters: []string{"."}},
			HoverProvider:              true,
			DefinitionProvider:         true,
			DocumentFormattingProvider: true,
		},
		ServerInfo: &protocol.ServerInfo{Name: "blaise-agent", Version: s.version},
	}
}

// overlay returns the texts of the open documents, for the loader.
func (s *server) overlay() map[string][]byte {
	o := make(map[string][]byte, len(s.docs))
	for _, d := range s.docs {
		o[d.path] = []byte(d.text)
	}
	return o
}

// publishAll sends the diagnostics of every open document, since an edit
// of a plug changes those of the configurations that use it; those of the
// document changed go last, so that an editor (or a test) that has them
// has all.
func (s *server) publishAll(ctx context.Context, changed *document) error {
	overlay := s.overlay()
	for _, d := range s.docs {
		if d == changed {
			continue
		}
		if err := s.publish(ctx, d.uri, d.version, s.diagnose(d, overlay)); err != nil {
			return err
		}
	}
	if changed == nil {
		return nil
	}
	return s.publish(ctx, changed.uri, changed.version, s.diagnose(changed, overlay))
}

func (s *server) publish(ctx context.Context, u protocol.DocumentURI, version int32, diags []protocol.Diagnostic) error {
	if diags == nil {
		diags = []protocol.Diagnostic{}
	}
	return s.conn.Notify(ctx, protocol.MethodTextDocumentPublishDiagnostics, &protocol.PublishDiagnosticsParams{URI: u, Version: uint32(version), Diagnostics: diags})
}

// diagnose loads d as check would, then looks for attribute reads that
// would fail at run time.
func (s *server) diagnose(d *document, overlay map[string][]byte) []protocol.Diagnostic {
	var problems []problem
	kind := kindOf(d.path, d.text)
	plug, warnings, err := load(s.newLoader, overlay, d.path, kind)
	if plug == nil && kind == plugFile {
		plug = declaredPlug(s.newLoader, overlay, d.path, d.text)
	}
	if plug != nil {
		d.plug = plug
	}
	if err != nil {
		problems = problemsOf(err, d.path)
	}
	problems = append(problems, warnings...)
	if f, err := interp.FileOptions.Parse(d.path, d.text, 0); err == nil {
		for _, p := range attrProblems(f, s.topScope(d)) {
			if !slices.Contains(problems, p) {
				problems = append(problems, p)
			}
		}
	}
	lines := strings.Split(d.text, "\n")
	out := make([]protocol.Diagnostic, len(problems))
	for i, p := range problems {
		severity := protocol.DiagnosticSeverityError
		if p.Warning {
			severity = protocol.DiagnosticSeverityWarning
		}
		out[i] = protocol.Diagnostic{Range: rangeAt(lines, p.Line, p.Col), Severity: severity, Source: "blaise-agent", Message: p.Msg}
	}
	return out
}

func (s *server) topScope(d *document) *scope {
	return &scope{m: s.model, plug: d.plug, vars: map[string]typ{}}
}

// rangeAt is the word at line and col (from 1, in runes) of a problem, or
// the first line for a problem in another file.
func rangeAt(lines []string, line, col int) protocol.Range {
	if line < 1 || line > len(lines) {
		return protocol.Range{End: protocol.Position{Character: uint32(utf16OfByte(lines[0], len(lines[0])))}}
	}
	text := lines[line-1]
	start := byteOfRune(text, max(col-1, 0))
	end := wordEnd(text, start)
	if end == start && end < len(text) {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	return protocol.Range{
		Start: protocol.Position{Line: uint32(line - 1), Character: uint32(utf16OfByte(text, start))},
		End:   protocol.Position{Line: uint32(line - 1), Character: uint32(utf16OfByte(text, end))},
	}
}

// at returns the document, its lines, and the scope at pos.
func (s *server) at(u protocol.DocumentURI, pos protocol.Position) (*document, []string, *scope) {
	d := s.docs[u]
	if d == nil {
		return nil, nil, nil
	}
	lines := strings.Split(d.text, "\n")
	if int(pos.Line) >= len(lines) {
		return nil, nil, nil
	}
	return d, lines, textScope(s.topScope(d), lines, int(pos.Line))
}

func (s *server) completion(u protocol.DocumentURI, pos protocol.Position) *protocol.CompletionList {
	list := &protocol.CompletionList{Items: []protocol.CompletionItem{}}
	d, lines, sc := s.at(u, pos)
	if d == nil {
		return list
	}
	line := lines[pos.Line]
	col := byteOfUTF16(line, int(pos.Character))
	if kindOf(d.path, d.text) == configFile {
		off := col
		for _, l := range lines[:pos.Line] {
			off += len(l) + 1
		}
		if items, ok := s.inputCompletions(d, off); ok {
			list.Items = items
			return list
		}
	}
	before, partial := splitChain(chainBefore(line, col))
	add := func(label, signature, doc string, kind protocol.CompletionItemKind) {
		if !strings.HasPrefix(label, partial) {
			return
		}
		item := protocol.CompletionItem{Label: label, Kind: kind, Detail: signature}
		if doc != "" {
			item.Documentation = protocol.MarkupContent{Kind: protocol.Markdown, Value: doc}
		}
		list.Items = append(list.Items, item)
	}
	if before != "" {
		expr, err := syntax.ParseExpr("", before, 0)
		if err != nil {
			return list
		}
		for _, mem := range s.model.members(sc.typeOf(expr)) {
			kind := protocol.CompletionItemKindField
			if mem.Method {
				kind = protocol.CompletionItemKindMethod
			}
			add(mem.Name, mem.Signature, mem.Doc, kind)
		}
		return list
	}
	if strings.HasPrefix(line, "def ") {
		for _, h := range interp.HandlerNames {
			e := s.model.ref[h]
			add(h, e.Signature, e.Doc, protocol.CompletionItemKindFunction)
		}
		return list
	}
	names := append([]string{"load"}, s.model.globals...)
	if kindOf(d.path, d.text) == configFile {
		names = append(names, s.model.config...)
	}
	for _, n := range names {
		sig, doc := n, ""
		if e := s.model.ref[n]; e != nil {
			sig, doc = e.Signature, e.Doc
		}
		kind := protocol.CompletionItemKindFunction
		if s.model.modules[n] {
			kind = protocol.CompletionItemKindModule
		}
		add(n, sig, doc, kind)
	}
	return list
}

func (s *server) hover(u protocol.DocumentURI, pos protocol.Position) *protocol.Hover {
	d, lines, sc := s.at(u, pos)
	if d == nil {
		return nil
	}
	if text := s.plugReference(d, pos); text != "" {
		return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: text}}
	}
	line := lines[pos.Line]
	end := wordEnd(line, byteOfUTF16(line, int(pos.Character)))
	before, name := splitChain(chainBefore(line, end))
	if name == "" {
		return nil
	}
	var sig, doc string
	if before != "" {
		expr, err := syntax.ParseExpr("", before, 0)
		if err != nil {
			return nil
		}
		t := sc.typeOf(expr)
		for _, mem := range s.model.members(t) {
			if mem.Name == name {
				sig, doc = mem.Signature, mem.Doc
			}
		}
	} else if e := s.model.ref[name]; e != nil {
		sig, doc = e.Signature, e.Doc
	}
	if sig == "" {
		return nil
	}
	return &protocol.Hover{Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: "```python\n" + sig + "\n```\n\n" + doc}}
}

// plugReference returns, over the reference of a use(), the reference of
// the plug (as `blaise-agent doc` writes it in Markdown), or "".
func (s *server) plugReference(d *document, pos protocol.Position) string {
	f, err := interp.FileOptions.Parse(d.path, d.text, 0)
	if err != nil {
		return ""
	}
	inside := insideAt(d.text, pos)
	var ref string
	syntax.Walk(f, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok {
			if lit := useRef(call); lit != nil && inside(lit) {
				ref = lit.Value.(string)
			}
		}
		return ref == ""
	})
	if ref == "" {
		return ""
	}
	p := s.plugOf(d, ref)
	if p == nil {
		return ""
	}
	r, err := plugdoc.Of(ref, p)
	if err != nil {
		return ""
	}
	var b strings.Builder
	if err := plugdoc.Write(&b, []*plugdoc.Reference{r}, "markdown"); err != nil {
		return ""
	}
	return b.String()
}

// plugOf loads the plug that ref, written in d, names; nil when it does
// not load (a plug with mistakes in its handlers still has its schemas).
func (s *server) plugOf(d *document, ref string) *interp.Plug {
	if !strings.HasPrefix(ref, interp.StdlibPrefix) {
		ref = resolveRef(d.path, ref)
	}
	l := s.newLoader()
	l.Overlay = s.overlay()
	p, _ := l.LoadPlug(ref)
	if p == nil && !strings.HasPrefix(ref, interp.StdlibPrefix) {
		// A plug being edited that does not load (yet): its plug(...)
		// call alone, as completion reads it.
		text, ok := l.Overlay[ref]
		if !ok {
			text, _ = os.ReadFile(ref)
		}
		p = declaredPlug(s.newLoader, l.Overlay, ref, string(text))
	}
	return p
}
