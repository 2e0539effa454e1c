package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
)

// handlerFuncs is a Handler made of functions; nil ones do nothing or
// answer ErrMethodNotFound.
type handlerFuncs struct {
	notify  func(method string, params json.RawMessage)
	request func(ctx context.Context, method string, params json.RawMessage) (any, error)
}

func (h handlerFuncs) Notification(method string, params json.RawMessage) {
	if h.notify != nil {
		h.notify(method, params)
	}
}

func (h handlerFuncs) Request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if h.request == nil {
		return nil, ErrMethodNotFound
	}
	return h.request(ctx, method, params)
}

// A peer is the agent's end of a Conn under test.
type peer struct {
	t   *testing.T
	r   *acp.Reader
	w   io.WriteCloser
	mu  sync.Mutex // serializes writes of whole lines
	run chan error // the result of Conn.Run
}

// newPeer returns a running Conn with handler h, and its peer.
func newPeer(t *testing.T, h Handler) (*Conn, *peer) {
	t.Helper()
	connR, peerW := io.Pipe()
	peerR, connW := io.Pipe()
	c := NewConn(connR, connW, h)
	p := &peer{t: t, r: acp.NewReader(peerR, 0), w: peerW, run: make(chan error, 1)}
	go func() { p.run <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		peerW.Close()
		c.Close()
		peerR.Close() // releases writes no one reads
	})
	return c, p
}

// send writes one line to the Conn.
func (p *peer) send(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Errorf("peer write: %v", err)
	}
}

// next reads the next message from the Conn; on an error it reports it
// and returns an empty message.
func (p *peer) next() *acp.Message {
	p.t.Helper()
	m, err := p.r.Next()
	if err != nil {
		p.t.Errorf("peer read: %v", err)
		return &acp.Message{}
	}
	return m
}

// waitRun returns the result of Conn.Run.
func (p *peer) waitRun() error {
	p.t.Helper()
	select {
	case err := <-p.run:
		return err
	case <-time.After(5 * time.Second):
		p.t.Fatal("Conn.Run did not return")
		return nil
	}
}

func TestConnConcurrentCalls(t *testing.T) {
	c, p := newPeer(t, nil)
	const n = 50
	go func() {
		// Answer in the reverse order of arrival.
		var reqs []*acp.Message
		for range n {
			m, err := p.r.Next()
			if err != nil {
				t.Errorf("peer read: %v", err)
				return
			}
			reqs = append(reqs, m)
		}
		seen := map[string]bool{}
		for i := len(reqs) - 1; i >= 0; i-- {
			m := reqs[i]
			if m.Kind != acp.Request || m.Method != "echo" || seen[string(m.ID)] {
				t.Errorf("unexpected message %s", m.Raw)
			}
			seen[string(m.ID)] = true
			p.send(string(acp.NewResponse(m.ID, m.Params)))
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := c.Call(context.Background(), "echo", map[string]int{"n": i})
			if want := fmt.Sprintf(`{"n":%d}`, i); err != nil || string(res) != want {
				t.Errorf("call %d: %s, %v; want %s", i, res, err, want)
			}
		})
	}
	wg.Wait()
}

func TestConnIDsAndEncoding(t *testing.T) {
	c, p := newPeer(t, nil)
	go func() {
		for range 3 {
			m, err := p.r.Next()
			if err != nil {
				return
			}
			p.send(string(acp.NewResponse(m.ID, []byte(strconv.Quote(string(m.Raw))))))
		}
	}()
	tests := []struct {
		params any
		want   string
	}{
		{nil, `{"jsonrpc":"2.0","id":1,"method":"m"}`},
		{map[string]string{"a": "<&>"}, `{"jsonrpc":"2.0","id":2,"method":"m","params":{"a":"<&>"}}`},
		{json.RawMessage("{ \"x\" :\n 1 }"), `{"jsonrpc":"2.0","id":3,"method":"m","params":{"x":1}}`},
	}
	for _, tt := range tests {
		res, err := c.Call(context.Background(), "m", tt.params)
		var got string
		if err == nil {
			err = json.Unmarshal(res, &got)
		}
		if err != nil || got != tt.want {
			t.Errorf("sent %s, %v; want %s", got, err, tt.want)
		}
	}
	if _, err := c.Call(context.Background(), "m", func() {}); err == nil {
		t.Error("Call with unencodable params: no error")
	}
}

func TestConnNotificationOrder(t *testing.T) {
	var (
		mu   sync.Mutex
		seqs []int
	)
	c, p := newPeer(t, handlerFuncs{notify: func(method string, params json.RawMessage) {
		var v struct{ Seq int }
		json.Unmarshal(params, &v)
		mu.Lock()
		seqs = append(seqs, v.Seq)
		mu.Unlock()
	}})
	const n = 1000
	go func() {
		m, err := p.r.Next()
		if err != nil {
			t.Errorf("peer read: %v", err)
			return
		}
		for i := range n {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"seq":%d}}`, i))
		}
		p.send(string(acp.NewResponse(m.ID, []byte(`{}`))))
	}()
	if _, err := c.Call(context.Background(), "session/prompt", nil); err != nil {
		t.Fatal(err)
	}
	// Every notification sent before the response was handled before Call
	// returned, in order.
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != n {
		t.Fatalf("%d notifications handled before the response, want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != i {
			t.Fatalf("notification %d has seq %d", i, s)
		}
	}
}

func TestConnRequestDoesNotBlockNotifications(t *testing.T) {
	released := make(chan struct{})
	_, p := newPeer(t, handlerFuncs{
		notify: func(method string, params json.RawMessage) {
			if method == "release" {
				close(released)
			}
		},
		request: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			select {
			case <-released: // needs the notification that follows
				return "released", nil
			case <-time.After(5 * time.Second):
				return nil, errors.New("blocked")
			}
		},
	})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}`)
	p.send(`{"jsonrpc":"2.0","method":"release"}`)
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","id":1,"result":"released"}` {
		t.Errorf("response %s", m.Raw)
	}
}

func TestConnRequestErrors(t *testing.T) {
	_, p := newPeer(t, handlerFuncs{request: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "ok":
			return map[string]any{"a": 1, "echo": params}, nil
		case "null":
			return nil, nil
		case "rpc":
			return nil, fmt.Errorf("wrapped: %w", &RPCError{Code: -32002, Message: "Resource not found", Data: json.RawMessage(`{"path":"/x"}`)})
		case "fail":
			return nil, errors.New("boom")
		case "badresult":
			return func() {}, nil
		}
		return nil, fmt.Errorf("no %s: %w", method, ErrMethodNotFound)
	}})
	want := map[string]string{
		`1`:     `{"jsonrpc":"2.0","id":1,"result":{"a":1,"echo":{"b":2}}}`,
		`"two"`: `{"jsonrpc":"2.0","id":"two","result":null}`,
		`3`:     `{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"Resource not found","data":{"path":"/x"}}}`,
		`4`:     `{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"Internal error","data":{"error":"boom"}}}`,
		`5`:     `{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"Method not found","data":{"method":"_x/unknown"}}}`,
		`6`:     `{"jsonrpc":"2.0","id":6,"error":{"code":-32603,"message":"Internal error","data":{"error":"encode badresult result: json: unsupported type: func()"}}}`,
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"ok","params":{"b":2}}`)
	p.send(`{"jsonrpc":"2.0","id":"two","method":"null"}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"rpc"}`)
	p.send(`{"jsonrpc":"2.0","id":4,"method":"fail"}`)
	p.send(`{"jsonrpc":"2.0","id":5,"method":"_x/unknown"}`)
	p.send(`{"jsonrpc":"2.0","id":6,"method":"badresult"}`)
	for range want {
		m := p.next()
		if w := want[string(m.ID)]; string(m.Raw) != w {
			t.Errorf("response %s, want %s", m.Raw, w)
		}
		delete(want, string(m.ID))
	}
}

func TestConnNilHandler(t *testing.T) {
	_, p := newPeer(t, nil)
	p.send(`{"jsonrpc":"2.0","method":"session/update","params":{}}`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{}}`)
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found","data":{"method":"fs/read_text_file"}}}` {
		t.Errorf("response %s", m.Raw)
	}
}

func TestConnCancelRequest(t *testing.T) {
	_, p := newPeer(t, handlerFuncs{request: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	p.send(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}`)
	p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":8}}`) // not ours: ignored
	p.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","id":7,"error":{"code":-32800,"message":"Request cancelled"}}` {
		t.Errorf("response %s", m.Raw)
	}
}

func TestConnCallError(t *testing.T) {
	c, p := newPeer(t, nil)
	go func() {
		m := p.next()
		p.send(string(acp.NewErrorResponse(m.ID, -32603, "Internal error", []byte(`{"error":"boom"}`))))
		m = p.next()
		p.send(string(acp.NewErrorResponse(m.ID, -32601, "Method not found", nil)))
	}()
	_, err := c.Call(context.Background(), "session/prompt", nil)
	e, ok := errors.AsType[*RPCError](err)
	if !ok || e.Code != -32603 || e.Message != "Internal error" || string(e.Data) != `{"error":"boom"}` {
		t.Errorf("error %#v", err)
	}
	if got, want := err.Error(), `Internal error (-32603) {"error":"boom"}`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = c.Call(context.Background(), "session/set_mode", nil)
	if got, want := err.Error(), `Method not found (-32601)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestConnIgnoresStrayResponsesAndBadLines(t *testing.T) {
	c, p := newPeer(t, nil)
	go func() {
		m := p.next()
		p.send(`{"jsonrpc":"2.0","id":99,"result":"stray"}`)
		p.send(`{"jsonrpc":"2.0","id":"1","result":"string id"}`)
		p.send(`not json`)
		p.send(`{"jsonrpc":"2.0"}`)
		p.send(string(acp.NewResponse(m.ID, []byte(`"mine"`))))
	}()
	res, err := c.Call(context.Background(), "m", nil)
	if err != nil || string(res) != `"mine"` {
		t.Errorf("result %s, %v", res, err)
	}
}

func TestConnCallContext(t *testing.T) {
	c, p := newPeer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		m := p.next()
		cancel()
		<-returned
		p.send(string(acp.NewResponse(m.ID, []byte(`"late"`)))) // dropped
		m = p.next()
		p.send(string(acp.NewResponse(m.ID, []byte(`"next"`))))
	}()
	if _, err := c.Call(ctx, "slow", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	close(returned)
	if res, err := c.Call(context.Background(), "next", nil); err != nil || string(res) != `"next"` {
		t.Errorf("result %s, %v", res, err)
	}
}

func TestConnClose(t *testing.T) {
	handlerDone := make(chan error, 1)
	handling := make(chan struct{})
	c, p := newPeer(t, handlerFuncs{request: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		close(handling)
		<-ctx.Done()
		handlerDone <- context.Cause(ctx)
		return nil, ctx.Err()
	}})
	sent := make(chan struct{})
	go func() { p.next(); close(sent) }() // the call, never answered
	p.send(`{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "session/prompt", nil)
		errc <- err
	}()
	<-handling
	<-sent
	c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("pending call: %v, want ErrClosed", err)
	}
	if err := <-handlerDone; !errors.Is(err, ErrClosed) {
		t.Errorf("handler context ended with %v, want ErrClosed", err)
	}
	if err := p.waitRun(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := c.Call(context.Background(), "m", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if err := c.Notify("m", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("notify after Close: %v, want ErrClosed", err)
	}
	c.Close() // again: no effect
}

func TestConnEOF(t *testing.T) {
	c, p := newPeer(t, nil)
	go func() {
		p.next()
		p.w.Close()
	}()
	if _, err := c.Call(context.Background(), "m", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("pending call at EOF: %v, want ErrClosed", err)
	}
	if err := p.waitRun(); err != nil {
		t.Errorf("Run at EOF: %v", err)
	}
}

func TestConnRunContext(t *testing.T) {
	connR, _ := io.Pipe()
	c := NewConn(connR, io.Discard, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if _, err := c.Call(context.Background(), "m", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Run: %v, want ErrClosed", err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
	connR.Close()
}

func TestConnNotify(t *testing.T) {
	c, p := newPeer(t, nil)
	go func() {
		if err := c.Notify("session/cancel", map[string]string{"sessionId": "sess-1"}); err != nil {
			t.Errorf("Notify: %v", err)
		}
	}()
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}` {
		t.Errorf("sent %s", m.Raw)
	}
}

// TestConnSessionCallsSendACPsMessages: the calls the terminal and the
// dashboard share send ACP's messages, byte for byte.
func TestConnSessionCallsSendACPsMessages(t *testing.T) {
	c, p := newPeer(t, nil)
	errc := make(chan error, 3)
	go func() {
		_, err := c.Initialize(context.Background(), map[string]any{"protocolVersion": 1})
		errc <- err
	}()
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` {
		t.Errorf("sent %s", m.Raw)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`)
	if err := <-errc; err == nil || err.Error() != "initialize: Internal error (-32603)" {
		t.Errorf("initialize answered with an error: %v", err)
	}
	go func() { errc <- c.CloseSession(context.Background(), "sess-1") }()
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"sess-1"}}` {
		t.Errorf("sent %s", m.Raw)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if err := <-errc; err != nil {
		t.Errorf("session/close: %v", err)
	}
	go func() { errc <- c.Cancel("sess-1") }()
	if m := p.next(); string(m.Raw) != `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}` {
		t.Errorf("sent %s", m.Raw)
	}
	if err := <-errc; err != nil {
		t.Errorf("session/cancel: %v", err)
	}
}

// Open names the client in its initialize (clientInfo) when it is given a
// name: the terminal's is blaise-agent and its version, which a server
// shows as who holds a session. Without one, it sends none.
func TestOpenNamesTheClientInItsInitialize(t *testing.T) {
	for _, info := range []*ClientInfo{BlaiseAgent(), nil} {
		c, p := newPeer(t, nil)
		c.Info = info
		errc := make(chan error, 1)
		go func() {
			_, err := c.Open(context.Background(), map[string]any{}, "/work", "")
			errc <- err
		}()
		m := p.next()
		var params struct {
			ClientInfo *ClientInfo `json:"clientInfo"`
		}
		if err := json.Unmarshal(m.Params, &params); err != nil || m.Method != "initialize" {
			t.Fatalf("sent %s (%v)", m.Raw, err)
		}
		switch {
		case info == nil && params.ClientInfo != nil:
			t.Errorf("a client without a name sent clientInfo %+v", params.ClientInfo)
		case info != nil && (params.ClientInfo == nil || params.ClientInfo.Name != "blaise-agent" || params.ClientInfo.Version != buildinfo.Version()):
			t.Errorf("clientInfo %+v, want blaise-agent %s", params.ClientInfo, buildinfo.Version())
		}
		p.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
		if m := p.next(); m.Method != "session/new" {
			t.Fatalf("sent %s", m.Raw)
		}
		p.send(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"sess-1"}}`)
		if err := <-errc; err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
}

// TestAnErrorSaysTheFrontEndsReason: an error answer whose data carries
// the reason a front end gives (acp, acp --server) reads as that reason,
// with its session; other data is shown as it came.
func TestAnErrorSaysTheFrontEndsReason(t *testing.T) {
	for _, tc := range []struct {
		data, want string
	}{
		{`{"reason":"no such session","sessionId":"abc"}`, "session abc: no such session"},
		{`{"reason":"session abc: no runner of agent demo is connected","sessionId":"abc"}`, "session abc: no runner of agent demo is connected"},
		{`{"reason":"initialize first"}`, "initialize first"},
		{`{"path":"/x"}`, `Internal error (-32603) {"path":"/x"}`},
		{``, `Internal error (-32603)`},
	} {
		e := &RPCError{Code: -32603, Message: "Internal error", Data: json.RawMessage(tc.data)}
		if got := e.Error(); got != tc.want {
			t.Errorf("data %s: %q, want %q", tc.data, got, tc.want)
		}
	}
}
