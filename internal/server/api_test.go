package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/sqlstore"
	"github.com/blaiseagent/blaise-agent/internal/testkit/testsupport"
	"github.com/charmbracelet/log"
	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
)

// lab is a server on a real SQLite store behind a real HTTP listener, with
// an API token and a runner credential.
type lab struct {
	t     *testing.T
	store *sqlstore.Store
	srv   *httptest.Server
	s     *Server
	token string
	cred  string
	// runnerID is the credential's id.
	runnerID string
	// logs is what the server logs (also written to stderr).
	logs *testsupport.Buffer
}

func newLab(t *testing.T) *lab {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store, err := StoreOptions{Data: t.TempDir()}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logs := &testsupport.Buffer{}
	s := &Server{Store: store, Log: log.New(io.MultiWriter(os.Stderr, logs))}
	hs := httptest.NewServer(s.Handler(ctx))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { endRuns(t, s) })
	tok, _, err := store.MintAPIToken(ctx, "tests")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := store.MintRegistration(ctx, 3600e9)
	if err != nil {
		t.Fatal(err)
	}
	cred, runnerID, err := store.Register(ctx, reg.Token, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateAgent(ctx, sqlstore.Agent{Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	return &lab{t: t, store: store, srv: hs, s: s, token: tok, cred: cred, runnerID: runnerID, logs: logs}
}

// endRuns ends the runs a test left waiting for their runner to come
// back, and waits for their ends to be recorded: they would wait the lease,
// past the test and its store.
func endRuns(t *testing.T, s *Server) {
	s.runners.mu.Lock()
	var left []*remoteProcess
	for _, p := range s.runners.procs {
		left = append(left, p)
	}
	s.runners.mu.Unlock()
	for _, p := range left {
		p.fail(errors.New("the test is over"))
		testsupport.Eventually(t, "the end of a run the test left", func() bool { return s.engine.Running(p.ref.Session) == nil })
	}
}

// do sends a request with the API token and returns the status and the
// error message of the answer.
func (l *lab) do(method, path, body string) (int, string) {
	l.t.Helper()
	resp := l.request(method, path, body)
	defer resp.Body.Close()
	var e apiError
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error
}

// request sends a request with the API token; the caller closes the
// answer's body.
func (l *lab) request(method, path, body string) *http.Response {
	l.t.Helper()
	req, err := http.NewRequest(method, l.srv.URL+path, strings.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	return resp
}

// TestBadRequestsChangeNothing: bad input on the API gets a clear
// error and changes nothing.
func TestBadRequestsChangeNothing(t *testing.T) {
	l := newLab(t)
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		says                     string
	}{
		{"unknown session", "GET", "/v1/sessions/nosuchsess01", "", 404, "no such session"},
		{"end of an unknown session", "POST", "/v1/sessions/nosuchsess01/end", "", 404, "no such session"},
		{"unknown agent", "GET", "/v1/agents/nobody", "", 404, "not found"},
		{"a field that is not one", "POST", "/v1/agents", `{"name":"x","idle":"pause"}`, 400, `unknown field "idle"`},
		{"not JSON", "POST", "/v1/agents", `{"name":`, 400, "a bad body"},
		{"a bad duration", "POST", "/v1/agents", `{"name":"x","timeout":"soon"}`, 400, `timeout: "soon" is not a duration`},
		{"a bad name", "POST", "/v1/agents", `{"name":"Not Valid"}`, 400, "invalid agent name"},
		{"an oversized body", "POST", "/v1/agents", `{"name":"x","config":"` + strings.Repeat("a", MaxBody) + `"}`, 413, "larger than"},
		{"a rename", "PATCH", "/v1/agents/demo", `{"name":"other"}`, 400, "cannot be renamed"},
	} {
		status, msg := l.do(c.method, c.path, c.body)
		if status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %q, want %d and %q", c.name, status, msg, c.status, c.says)
		}
	}
	agents, err := l.store.Agents(t.Context())
	if err != nil || len(agents) != 1 || agents[0].Name != "demo" {
		t.Fatalf("agents after bad requests: %v %v", agents, err)
	}
}

// TestWrongTokenIsRefused: no token, a wrong one, and a runner's
// credential used as an API token are refused.
func TestWrongTokenIsRefused(t *testing.T) {
	l := newLab(t)
	for _, tok := range []string{"", "bla_wrong", l.cred} {
		l.token = tok
		if status, msg := l.do("GET", "/v1/agents", ""); status != 401 || msg == "" {
			t.Errorf("token %q: %d %q, want 401 and why", tok, status, msg)
		}
	}
}

// dialRunner opens a runner connection with the subprotocols offered.
func (l *lab) dialRunner(cred string, protos ...string) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(l.srv.URL, "http") + runnerproto.PathRunner + "?agent=demo"
	return websocket.Dial(context.Background(), u, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + cred}},
		Subprotocols: protos,
	})
}

// runnerStream opens a runner connection with the credential cred and
// returns it with its first stream, where frames go; the connection ends
// with the test. Its runner speaks protocol 6: its runs' stores come as
// streams of the connection, which the tests open.
func (l *lab) runnerStream(cred string) (*yamux.Session, *yamux.Stream) {
	l.t.Helper()
	return l.runnerStreamOf(cred, runnerproto.Relayed)
}

// runnerStreamOf is runnerStream of a runner of protocol version.
func (l *lab) runnerStreamOf(cred string, version int) (*yamux.Session, *yamux.Stream) {
	l.t.Helper()
	ws, _, err := l.dialRunner(cred, runnerproto.Subprotocol(version))
	if err != nil {
		l.t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	mux, err := yamux.Client(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), runnerproto.YamuxConfig())
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { mux.Close() })
	st, err := mux.OpenStream()
	if err != nil {
		l.t.Fatal(err)
	}
	return mux, st
}

// TestRunnerProtocolRefusals: a wrong credential, another protocol
// version, a first frame that is not hello and a malformed frame are
// refused, and the server keeps no runner of them.
func TestRunnerProtocolRefusals(t *testing.T) {
	l := newLab(t)
	if _, resp, err := l.dialRunner("blc_wrong", runnerproto.Subprotocol(runnerproto.Version)); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("a wrong credential: %v", err)
	}
	for _, old := range []string{"blaise-runner.v1", "blaise-runner.v2"} {
		if _, resp, err := l.dialRunner(l.cred, old); err == nil || resp == nil || resp.StatusCode != 400 {
			t.Errorf("another subprotocol, %s: %v", old, err)
		}
	}
	for _, c := range []struct {
		name, first, says string
	}{
		{"another version", `{"type":"hello","version":1,"runner":"r1"}`, "runner protocol version 1; this connection speaks 7"},
		{"version 2, whose store calls do not survive a reconnection", `{"type":"hello","version":2,"runner":"r1"}`, "runner protocol version 2; this connection speaks 7"},
		{"version 3 on a connection of version 7", `{"type":"hello","version":3,"runner":"r1"}`, "runner protocol version 3; this connection speaks 7"},
		{"version 4 on a connection of version 7", `{"type":"hello","version":4,"runner":"r1"}`, "runner protocol version 4; this connection speaks 7"},
		{"version 5 on a connection of version 7", `{"type":"hello","version":5,"runner":"r1"}`, "runner protocol version 5; this connection speaks 7"},
		{"version 6 on a connection of version 7", `{"type":"hello","version":6,"runner":"r1"}`, "runner protocol version 6; this connection speaks 7"},
		{"not hello", `{"type":"launched"}`, "the first frame must be hello"},
		{"malformed", `{"type":`, "the first frame must be hello"},
	} {
		ws, _, err := l.dialRunner(l.cred, runnerproto.Subprotocol(runnerproto.Version))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ws.SetReadLimit(-1)
		mux, err := yamux.Client(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), runnerproto.YamuxConfig())
		if err != nil {
			t.Fatal(err)
		}
		st, err := mux.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(st, c.first+"\n"); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(st).ReadString('\n')
		if !strings.Contains(line, c.says) {
			t.Errorf("%s: the server answered %q, want %q", c.name, line, c.says)
		}
		mux.Close()
	}
	if n := l.connected(); n != 0 {
		t.Fatalf("%d runners kept of refused connections", n)
	}
	// A runner welcomed, then sending a malformed frame, is dropped.
	_, st := l.runnerStream(l.cred)
	frames := runnerproto.NewConn(st)
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindHello, Version: runnerproto.Relayed, Runner: "r1"}); err != nil {
		t.Fatal(err)
	}
	if w, err := frames.Receive(); err != nil || w.Kind != runnerproto.KindWelcome || w.Settings == nil {
		t.Fatalf("welcome: %+v %v", w, err)
	}
	testsupport.Eventually(t, "the runner is kept", func() bool { return l.connected() == 1 })
	if _, err := io.WriteString(st, "{\"type\":\n"); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, "the runner is dropped", func() bool { return l.connected() == 0 })
}

// connected counts the runners the server keeps.
func (l *lab) connected() int {
	l.s.runners.mu.Lock()
	defer l.s.runners.mu.Unlock()
	return len(l.s.runners.conns["demo"])
}
