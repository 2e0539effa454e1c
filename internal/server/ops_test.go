package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

func (l *lab) get(path, token string) (int, string) {
	l.t.Helper()
	req, err := http.NewRequest("GET", l.srv.URL+path, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthAndReadinessAnswerWithoutAToken(t *testing.T) {
	l := newLab(t)
	if code, body := l.get(PathHealth, ""); code != 200 || body != "ok\n" {
		t.Errorf("%s: %d %q", PathHealth, code, body)
	}
	if code, body := l.get(PathReady, ""); code != 200 || body != "ready\n" {
		t.Errorf("%s: %d %q", PathReady, code, body)
	}
	l.store.Close()
	if code, body := l.get(PathReady, ""); code != 503 || !strings.Contains(body, "closed") {
		t.Errorf("%s of a closed store: %d %q, want 503 and why", PathReady, code, body)
	}
}

func TestMetricsNeedAnAPITokenAndCountRequests(t *testing.T) {
	l := newLab(t)
	if code, _ := l.get(PathMetrics, ""); code != 401 {
		t.Errorf("metrics without a token: %d, want 401", code)
	}
	l.get(PathHealth, "")
	l.get("/v1/sessions/nosuchsess01", l.token)
	code, body := l.get(PathMetrics, l.token)
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`blaise_http_requests_total{route="GET /healthz",code="200"} 1`,
		`blaise_http_requests_total{route="GET /v1/sessions/{id}",code="404"} 1`,
		`blaise_store_seconds_count{verb="select"}`,
		"# TYPE blaise_sessions gauge",
		"# TYPE blaise_runs_started_total counter",
		"# TYPE blaise_signin_failures_total counter",
		// Counters whose series are known are there before their first
		// count: an alert on their rate has data from the start.
		"blaise_signin_failures_total 0",
		`blaise_stops_total{outcome="sent"} 0`,
		`blaise_stops_total{outcome="refused"} 0`,
		"blaise_transcript_bytes_total 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	// A wrong password at the dashboard's sign-in is counted.
	req, err := http.NewRequest("POST", l.srv.URL+"/signin", strings.NewReader(url.Values{"name": {"nobody"}, "password": {"wrong"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %s", resp.Status)
	}
	if _, body := l.get(PathMetrics, l.token); !strings.Contains(body, "blaise_signin_failures_total 1") {
		t.Errorf("a failed sign-in is not counted:\n%s", body)
	}
}

// An address that opens connections and sends nothing holds no more
// than its cap; others are closed as they come. Meanwhile a health check
// answers and a runner connects.
func TestConnectionsOfOneAddressAreCapped(t *testing.T) {
	l := newLab(t)
	const perAddr = 20
	l.s.MaxConnsPerAddr = perAddr
	addr, stop := l.serveOwn(t)
	defer stop()

	// The attacker is 127.0.0.2, which loopback also is.
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var held []net.Conn
	for range 5 * perAddr {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The server accepts in order: once the health check is answered, it
	// has taken or closed every attacker's connection.
	if code, _ := l.get(PathHealth, ""); code != 200 {
		t.Fatalf("health check: %d", code)
	}
	_, body := l.get(PathMetrics, l.token)
	// The attacker's, and the one of this test's requests.
	if want := "blaise_http_connections 21\n"; !strings.Contains(body, want) {
		t.Errorf("want %q in\n%s", want, body)
	}
	mux, _ := l.hello(l.cred)
	mux.Close()
	// A connection over the cap was closed: it reads EOF.
	if _, err := held[len(held)-1].Read(make([]byte, 1)); err == nil {
		t.Error("a connection over the cap is open")
	}
}

// At the total cap, a new connection takes the place of the one that has
// waited longest for a request: connections that send nothing, from many
// addresses, do not keep a health check or a runner out.
func TestConnectionsThatSendNothingMakeRoomAtTheCap(t *testing.T) {
	l := newLab(t)
	const total = 20
	l.s.MaxConns = total
	addr, stop := l.serveOwn(t)
	defer stop()

	var held []net.Conn
	for i := range total {
		// From 127.0.1.X: loopback, not the health check's 127.0.0.1.
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The server accepts in order: the health check's connection comes
	// after every one held, which fill the cap.
	if code, _ := l.get(PathHealth, ""); code != 200 {
		t.Fatalf("health check at the cap: %d", code)
	}
	if _, err := held[0].Read(make([]byte, 1)); err == nil {
		t.Error("the connection that waited longest is open")
	}
	mux, _ := l.hello(l.cred)
	mux.Close()
}

// TestServeReturnsOnceItsGoroutinesHaveEnded: when Serve returns, its
// timers and the handlers of its connections (a runner's, still
// connected) have ended, so that its caller may close the store.
func TestServeReturnsOnceItsGoroutinesHaveEnded(t *testing.T) {
	l := newLab(t)
	_, stop := l.serveOwn(t)
	mux, _ := l.hello(l.cred)
	defer mux.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, f := range []string{"(*Engine).Keep", "(*runners).cutRevoked", "(*runnerConn).serve", "(*runnerConn).acceptStreams", "(*runners).connect"} {
		if strings.Contains(stacks, f) {
			t.Errorf("%s still runs after Serve returned", f)
		}
	}
}

func TestProfilesAreServedOnlyOnALoopbackDebugAddress(t *testing.T) {
	l := newLab(t)
	if code, _ := l.get("/debug/pprof/", l.token); code != 404 {
		t.Errorf("profiles on the API's address: %d, want 404", code)
	}
	err := Run(context.Background(), Options{StoreOptions: StoreOptions{Data: t.TempDir()}, Addr: "127.0.0.1:0", DebugAddr: "0.0.0.0:0", Log: l.s.Log})
	if err == nil || !strings.Contains(err.Error(), "--debug-addr 0.0.0.0:0: want a loopback address") {
		t.Errorf("a debug address beyond loopback: %v", err)
	}
}

// A client whose WebSocket stops answering (a machine gone without a
// word) is cut by the server's pings rather than held.
func TestAClientThatAnswersNoPingIsCut(t *testing.T) {
	l := newLab(t)
	l.s.KeepAlive = 100 * time.Millisecond
	c, err := net.Dial("tcp", strings.TrimPrefix(l.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s/demo/acp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: %s\r\n\r\n", api.PathAgents, l.token, api.ACPSubprotocol)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// This end never answers the pings: the server closes the connection.
	// (The deadline only turns a hang into a failure.)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the connection was not cut: %v", err)
	}
}

// serveOwn has the lab's server Serve on a listener of its own, where its
// connection caps apply, and points the lab's helpers at it (srv.URL). It
// returns its address, and stop, which ends Serve and returns Serve's error.
func (l *lab) serveOwn(t *testing.T) (addr string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- l.s.Serve(ctx, ln, "", "") }()
	l.srv.URL = "http://" + ln.Addr().String()
	return ln.Addr().String(), func() error { cancel(); return <-served }
}
