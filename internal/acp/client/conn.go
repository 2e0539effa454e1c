// Package client is the client side of the Agent Client Protocol (ACP):
// [Conn] speaks JSON-RPC to an agent over a pair of streams, for every
// client of the project; for a person at a terminal, [Terminal] renders
// the agent's session updates as text and answers the agent's requests
// (permissions, files).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
)

// A Handler serves the messages an agent sends to the client.
type Handler interface {
	// Notification handles an incoming notification. Notifications are
	// handled one at a time, in the order they arrive, on the goroutine
	// running [Conn.Run]; a response that arrives after a notification is
	// delivered only once Notification has returned.
	Notification(method string, params json.RawMessage)

	// Request handles an incoming request, each on a goroutine of its own,
	// and returns the result to send back. An error that is or wraps an
	// [*RPCError] is sent as that error, [ErrMethodNotFound] as -32601, any
	// other error as -32603. ctx ends when the agent cancels the request
	// ($/cancel_request) or the connection ends.
	Request(ctx context.Context, method string, params json.RawMessage) (result any, err error)
}

// ErrMethodNotFound is the error a [Handler] returns for a method it does not
// know: the agent gets a -32601 error response.
var ErrMethodNotFound = errors.New("method not found")

// ErrClosed is the error of calls that were pending, or are made, after the
// connection closed: by [Conn.Close], or because [Conn.Run] ended.
var ErrClosed = errors.New("client: connection closed")

// An RPCError is a JSON-RPC error: one received in answer to [Conn.Call], or
// one a [Handler] returns to be sent to the agent.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage // raw JSON; nil when absent
}

func (e *RPCError) Error() string {
	// The reason the front ends give (acp, acp --server) is what a person
	// reads, with the session it is about.
	var d struct {
		Reason    string `json:"reason"`
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(e.Data, &d) == nil && d.Reason != "" {
		if d.SessionID != "" && !strings.HasPrefix(d.Reason, "session "+d.SessionID) {
			return fmt.Sprintf("session %s: %s", d.SessionID, d.Reason)
		}
		return d.Reason
	}
	if len(e.Data) > 0 {
		return fmt.Sprintf("%s (%d) %s", e.Message, e.Code, e.Data)
	}
	return fmt.Sprintf("%s (%d)", e.Message, e.Code)
}

// errCancelRequest is the cause of a request context cancelled by the
// agent's $/cancel_request.
var errCancelRequest = errors.New("request cancelled by the agent")

// A Conn is a client's JSON-RPC connection to an agent: one message per line,
// read from r and written to w (with the framing of package acp). Outgoing
// requests are numbered 1, 2, 3, ….
//
// Start [Conn.Run] to read messages; [Conn.Call] and [Conn.Notify] may be
// used from any goroutine.
//
// It is the one client core: of the terminal, the dashboard, plug tests
// (plugtest) and agentcaps. It is not acp-go-sdk's ClientSideConnection (whose types
// the handlers use) because that one, in v0.13: closes the connection when
// 1024 notifications wait for a slow handler (a terminal rendering a flood
// of updates), where a Conn stops reading until the handler catches up;
// logs through slog.Default, onto the terminal; reads from its creation,
// with no Run whose context ends it; sends $/cancel_request when a call's
// context ends, where a Conn forgets the call; and reads lines of at most
// 10 MiB, where the proxy passes acp.DefaultMaxLine.
type Conn struct {
	// Info, when set before Open, names the client in its initialize
	// (clientInfo). Plug tests leave it out: their transcripts are
	// compared, and would hold the build's version.
	Info *ClientInfo

	r *acp.Reader
	w *acp.Writer
	h Handler

	nextID  atomic.Int64
	running atomic.Bool

	mu       sync.Mutex
	pending  map[string]chan reply              // outgoing calls by id key
	incoming map[string]context.CancelCauseFunc // requests being served, by id key
	err      error                              // set once closed
	done     chan struct{}                      // closed once closed
}

// A reply is the outcome of a call.
type reply struct {
	result json.RawMessage
	err    error
}

// NewConn returns a connection that reads the agent's messages from r and
// writes the client's to w, passing incoming requests and notifications to
// h. A nil h answers every request with -32601 and drops notifications.
// The Conn does not close r or w.
func NewConn(r io.Reader, w io.Writer, h Handler) *Conn {
	return &Conn{
		r:        acp.NewReader(r, 0),
		w:        acp.NewWriter(w),
		h:        h,
		pending:  make(map[string]chan reply),
		incoming: make(map[string]context.CancelCauseFunc),
		done:     make(chan struct{}),
	}
}

// Run reads and dispatches messages until the end of the input, ctx ends or
// the connection is closed, then closes the connection: pending calls fail
// with [ErrClosed] and the contexts of requests being served end.
//
// Run returns nil at the end of the input or after [Conn.Close], ctx.Err()
// when ctx ends, or the error that ended reading. Lines that are not
// JSON-RPC messages are skipped. If Run returns while a read is blocked, the
// goroutine reading stays until the reader returns; closing the reader
// releases it. Run must be called once.
func (c *Conn) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("client: Conn.Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	msgs := make(chan *acp.Message)
	errc := make(chan error, 1)
	// Ends with the stream, or with ctx (Run's, cancelled on return) once it has a message.
	go func() {
		for {
			m, err := c.r.Next()
			if _, bad := errors.AsType[*acp.LineError](err); bad {
				continue
			}
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	for {
		select {
		case m := <-msgs:
			c.dispatch(ctx, m)
		case err := <-errc:
			if err == io.EOF {
				c.shutdown(ErrClosed)
				return nil
			}
			c.shutdown(fmt.Errorf("%w: %w", ErrClosed, err))
			return err
		case <-ctx.Done():
			select {
			case <-c.done: // closed by Close meanwhile
				return nil
			default:
			}
			c.shutdown(ErrClosed)
			return ctx.Err()
		case <-c.done:
			return nil
		}
	}
}

// Close closes the connection: pending and later calls fail with
// [ErrClosed], [Conn.Run] returns, and the contexts of requests being served
// end. Responses of requests still being served are written if they can be.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

// shutdown closes the connection once, failing pending calls with err.
func (c *Conn) shutdown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	for key, ch := range c.pending {
		ch <- reply{err: err}
		delete(c.pending, key)
	}
	for _, cancel := range c.incoming {
		cancel(ErrClosed)
	}
	close(c.done)
}

// Call sends a request and waits for its response. It returns the raw
// result, an [*RPCError] for an error response, [ErrClosed] if the
// connection closes first, or ctx.Err() if ctx ends first (the request is
// then forgotten; no cancellation is sent). params is encoded as JSON; nil
// leaves the params member out, and a json.RawMessage is sent as it is.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := encode(params)
	if err != nil {
		return nil, fmt.Errorf("client: %s params: %w", method, err)
	}
	id := strconv.AppendInt(nil, c.nextID.Add(1), 10)
	key := acp.IDKey(id)
	ch := make(chan reply, 1)

	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.pending[key] = ch
	c.mu.Unlock()

	if err := c.w.Write(acp.NewRequest(id, method, p)); err != nil {
		c.forget(key)
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		c.forget(key)
		return nil, ctx.Err()
	}
}

// Open initializes the connection, announcing the client (Info) and
// its capabilities, and opens an ACP session in cwd: a new one
// (session/new), or with loadID the session of that id, whose history the
// agent then replays (session/load). It returns the session's id.
func (c *Conn) Open(ctx context.Context, capabilities any, cwd, loadID string) (string, error) {
	params := map[string]any{"protocolVersion": 1, "clientCapabilities": capabilities}
	if c.Info != nil {
		params["clientInfo"] = c.Info
	}
	if _, err := c.Initialize(ctx, params); err != nil {
		return "", err
	}
	if loadID != "" {
		if _, err := c.Call(ctx, "session/load", map[string]any{"sessionId": loadID, "cwd": cwd, "mcpServers": []any{}}); err != nil {
			return "", fmt.Errorf("session/load: %w", err)
		}
		return loadID, nil
	}
	res, err := c.Call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		return "", fmt.Errorf("session/new: %w", err)
	}
	var v struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &v); err != nil || v.SessionID == "" {
		return "", fmt.Errorf("session/new: no session id in %s", res)
	}
	return v.SessionID, nil
}

// ClientInfo is a client's name in its initialize: a server says by it
// who holds a session.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// BlaiseAgent names the terminal: blaise-agent and its version.
func BlaiseAgent() *ClientInfo {
	return &ClientInfo{Name: "blaise-agent", Version: buildinfo.Version()}
}

// OpenFork opens a session that is a fork of the agent's session parent
// (session/fork) when the agent's answer to initialize (init) offers it,
// else a new session (session/new), in cwd with mcpServers (raw JSON; nil:
// none). forked says which it did.
func (c *Conn) OpenFork(ctx context.Context, init json.RawMessage, parent, cwd string, mcpServers json.RawMessage) (sid string, forked bool, err error) {
	if len(mcpServers) == 0 {
		mcpServers = json.RawMessage("[]")
	}
	params := map[string]any{"cwd": cwd, "mcpServers": mcpServers}
	method := "session/new"
	if parent != "" && CanFork(init) {
		method, forked, params["sessionId"] = "session/fork", true, parent
	}
	res, err := c.Call(ctx, method, params)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", method, err)
	}
	var v struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &v); err != nil || v.SessionID == "" {
		return "", false, fmt.Errorf("%s: no session id in %s", method, res)
	}
	return v.SessionID, forked, nil
}

// CanFork reports whether an agent's answer to initialize offers
// session/fork (agentCapabilities.sessionCapabilities.fork).
func CanFork(init json.RawMessage) bool {
	var v struct {
		AgentCapabilities struct {
			SessionCapabilities struct {
				Fork json.RawMessage `json:"fork"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	return json.Unmarshal(init, &v) == nil && len(v.AgentCapabilities.SessionCapabilities.Fork) > 0 && string(v.AgentCapabilities.SessionCapabilities.Fork) != "null"
}

// Initialize announces the client to the agent (initialize, with params as
// for [Conn.Call]) and returns the agent's result.
func (c *Conn) Initialize(ctx context.Context, params any) (json.RawMessage, error) {
	res, err := c.Call(ctx, "initialize", params)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return res, nil
}

// Cancel asks the agent to end the turn running in session sid
// (session/cancel).
func (c *Conn) Cancel(sid string) error {
	return c.Notify("session/cancel", map[string]any{"sessionId": sid})
}

// CloseSession lets go of session sid (session/close).
func (c *Conn) CloseSession(ctx context.Context, sid string) error {
	if _, err := c.Call(ctx, "session/close", map[string]any{"sessionId": sid}); err != nil {
		return fmt.Errorf("session/close: %w", err)
	}
	return nil
}

// Prompt sends one text prompt to the session sid (session/prompt) and
// waits for the turn to end; it returns the stop reason, or the error of
// [Conn.Call].
func (c *Conn) Prompt(ctx context.Context, sid, text string) (stopReason string, err error) {
	res, err := c.Call(ctx, "session/prompt", map[string]any{
		"sessionId": sid,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	})
	if err != nil {
		return "", err
	}
	var v struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(res, &v); err != nil {
		return "", fmt.Errorf("client: session/prompt result: %w", err)
	}
	return v.StopReason, nil
}

// forget drops the pending call with the given id key.
func (c *Conn) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

// Notify sends a notification and waits until it has been written. params
// is encoded as for [Conn.Call].
func (c *Conn) Notify(method string, params any) error {
	p, err := encode(params)
	if err != nil {
		return fmt.Errorf("client: %s params: %w", method, err)
	}
	c.mu.Lock()
	closed := c.err
	c.mu.Unlock()
	if closed != nil {
		return closed
	}
	if err := c.w.Write(acp.NewNotification(method, p)); err != nil {
		return err
	}
	return c.w.Flush()
}

// dispatch handles one incoming message on the reading goroutine.
func (c *Conn) dispatch(ctx context.Context, m *acp.Message) {
	switch m.Kind {
	case acp.Response:
		c.resolve(m)
	case acp.Request:
		c.serve(ctx, m)
	case acp.Notification:
		if m.Method == "$/cancel_request" {
			c.cancelIncoming(m.Params)
			return
		}
		if c.h != nil {
			c.h.Notification(m.Method, json.RawMessage(m.Params))
		}
	}
}

// resolve delivers a response to its pending call; responses to unknown ids
// are dropped.
func (c *Conn) resolve(m *acp.Message) {
	key := acp.IDKey(m.ID)
	c.mu.Lock()
	ch, ok := c.pending[key]
	delete(c.pending, key)
	c.mu.Unlock()
	if !ok {
		return
	}
	if m.Error == nil {
		ch <- reply{result: json.RawMessage(m.Result)}
		return
	}
	var e struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Error, &e); err != nil {
		ch <- reply{err: &RPCError{Code: acp.InternalError, Message: "malformed error response: " + string(m.Error)}}
		return
	}
	ch <- reply{err: &RPCError{Code: e.Code, Message: e.Message, Data: e.Data}}
}

// serve runs the handler for an incoming request on a goroutine of its own
// and writes its response.
func (c *Conn) serve(ctx context.Context, m *acp.Message) {
	key := acp.IDKey(m.ID)
	rctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.incoming[key] = cancel
	c.mu.Unlock()
	// A request served: ends with its handler, whose context Close cancels.
	go func() {
		result, err := c.handle(rctx, m.Method, m.Params)
		c.mu.Lock()
		delete(c.incoming, key)
		c.mu.Unlock()
		var resp []byte
		if err != nil {
			if context.Cause(rctx) == errCancelRequest && errors.Is(err, context.Canceled) {
				err = &RPCError{Code: acp.RequestCancelled, Message: "Request cancelled"}
			}
			e := toRPCError(m.Method, err)
			resp = acp.NewErrorResponse(m.ID, e.Code, e.Message, e.Data)
		} else {
			resp = acp.NewResponse(m.ID, result)
		}
		cancel(nil)
		_ = c.w.Write(resp) // a failed write also ends reading soon
	}()
}

// handle calls the handler and encodes its result.
func (c *Conn) handle(ctx context.Context, method string, params []byte) ([]byte, error) {
	if c.h == nil {
		return nil, ErrMethodNotFound
	}
	result, err := c.h.Request(ctx, method, json.RawMessage(params))
	if err != nil {
		return nil, err
	}
	b, err := encode(result)
	if err != nil {
		return nil, fmt.Errorf("encode %s result: %w", method, err)
	}
	return b, nil
}

// cancelIncoming cancels the request named by the params of a
// $/cancel_request notification.
func (c *Conn) cancelIncoming(params []byte) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	c.mu.Lock()
	cancel := c.incoming[acp.IDKey(p.RequestID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel(errCancelRequest)
	}
}

// toRPCError returns the error response for a handler's error.
func toRPCError(method string, err error) *RPCError {
	if e, ok := errors.AsType[*RPCError](err); ok {
		return e
	}
	if errors.Is(err, ErrMethodNotFound) {
		data, _ := json.Marshal(map[string]string{"method": method})
		return &RPCError{Code: acp.MethodNotFound, Message: "Method not found", Data: data}
	}
	data, _ := json.Marshal(map[string]string{"error": err.Error()})
	return &RPCError{Code: acp.InternalError, Message: "Internal error", Data: data}
}

// encode returns v as compact JSON without HTML escaping; nil gives nil and
// a json.RawMessage is compacted.
func encode(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if v == nil {
			return nil, nil
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
