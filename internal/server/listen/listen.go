// Package listen is the runner of a Blaise server (`blaise-agent listen`):
// it connects to the server, takes the runs of one agent and starts a
// session process for each (C13), whose ACP, control channel and store it
// carries over its connection (runnerproto). It reconnects with backoff
// and, stopped, drains: it takes no more runs, the server stops its live
// runs as idle, and it leaves once they have ended.
package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/store/runstore"
	"github.com/blaiseagent/blaise-agent/interp"
	"github.com/charmbracelet/log"
	"github.com/coder/websocket"
	"github.com/hashicorp/yamux"
)

// Runner takes runs of Agent from Server.
type Runner struct {
	Server     string // the server's URL (http:// or https://)
	Credential string // the runner credential (blc_…)
	Agent      string
	Name       string // the runner's name, unique per server
	Version    string // blaise-agent's, told to the server
	// Config is the runner's blaise.star (absolute), loaded by each of its
	// session processes.
	Config *interp.Config
	// ConfigPath is Config's file.
	ConfigPath string
	// Command starts a session process; the run's flags are appended.
	Command []string
	// Dir is where session processes run.
	Dir string
	// Env is the session processes' environment: never a Blaise token.
	Env    []string
	Stderr io.Writer
	Log    *log.Logger
	// HTTPClient dials the server (TLS settings); nil: http.DefaultClient.
	HTTPClient *http.Client
	// Backoff bounds the wait between two connection attempts (default
	// 250 ms doubling to 30 s).
	MinBackoff, MaxBackoff time.Duration
	// Connected, when set, is called each time the runner is welcomed.
	Connected func()
	// StoreRelay carries the runs' stores over the runner's connection
	// (runner protocol 6), as when the way to the server does not let the
	// store connections of protocol 7 through.
	StoreRelay bool

	mu      sync.Mutex
	runs    map[runnerproto.RunRef]*run
	leaseD  time.Duration // the server's, from its welcome
	version int           // of the runner protocol, once a connection was welcomed
}

// protocol is the runner protocol version to speak on a new connection,
// and why not Version. The first connection's is kept: a run goes back
// only to a connection of its own version, so a reconnection must not
// change it. The first probes the server's store endpoint: Version when
// it takes a probe's store connection (and the runner may use them),
// else Relayed: a proxy that refuses the upgrade, a server that does not
// answer within probeTimeout (down, or reached only through a proxy the
// session process does not use).
func (r *Runner) protocol(ctx context.Context) (int, error) {
	r.mu.Lock()
	kept := r.version
	r.mu.Unlock()
	switch {
	case kept != 0:
		return kept, nil
	case r.StoreRelay:
		return runnerproto.Relayed, nil
	}
	if u, err := url.Parse(r.Server); err == nil {
		if proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && proxy != nil {
			return runnerproto.Relayed, fmt.Errorf("the server is reached through the proxy %s", proxy.Redacted())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := runstore.DialStore(ctx, r.Server, "", 0, "")
	if err != nil {
		return runnerproto.Relayed, err
	}
	conn.Close()
	return runnerproto.Version, nil
}

// probeTimeout bounds the probe of the server's store endpoint.
const probeTimeout = 5 * time.Second

// lease is how long a run waits to be adopted after its connection
// broke: the server's lease, after which it fails the run anyway.
func (r *Runner) lease() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaseD <= 0 {
		return time.Minute
	}
	return r.leaseD
}

// alive lists the runs not given up, which a new connection offers the
// server to adopt.
func (r *Runner) alive() []*run {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*run
	for _, rn := range r.runs {
		rn.mu.Lock()
		given := rn.given
		rn.mu.Unlock()
		if !given {
			out = append(out, rn)
		}
	}
	return out
}

// ErrRefused is wrapped by errors that no reconnection mends: a wrong or
// revoked credential, an unknown agent, a protocol the server does not
// speak, a configuration the agent's policy does not allow (L8).
var ErrRefused = errors.New("refused")

// ErrCredentialRefused is the ErrRefused of a credential the server does
// not know, or has revoked.
var ErrCredentialRefused = fmt.Errorf("%w", ErrRefused)

// Run serves until ctx is done, then drains. It returns an error wrapping
// ErrRefused when the server refuses the runner.
func (r *Runner) Run(ctx context.Context) error {
	if r.runs == nil {
		r.runs = map[runnerproto.RunRef]*run{}
	}
	backoff := r.minBackoff()
	for {
		err := r.connect(ctx)
		if errors.Is(err, ErrRefused) {
			// No connection will take the runs back: they stop, and none
			// outlives the runner.
			for _, rn := range r.alive() {
				rn.giveUp()
			}
			r.waitRuns()
			return err
		}
		if ctx.Err() != nil {
			r.waitRuns()
			return nil
		}
		if err != nil {
			r.Log.Warn("connection to the server lost; reconnecting", "server", r.Server, "in", backoff, "err", err)
		}
		select {
		case <-ctx.Done():
			r.waitRuns()
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, r.maxBackoff())
	}
}

func (r *Runner) minBackoff() time.Duration {
	if r.MinBackoff > 0 {
		return r.MinBackoff
	}
	return 250 * time.Millisecond
}

func (r *Runner) maxBackoff() time.Duration {
	if r.MaxBackoff > 0 {
		return r.MaxBackoff
	}
	return 30 * time.Second
}

// actions are the actions cfg's chain offers, as a hello names them.
func actions(cfg *interp.Config) []api.Action {
	var out []api.Action
	names := cfg.ActionNames()
	for i, a := range cfg.Actions() {
		// A schema that does not encode (none does: its defaults are
		// JSON-like) is left to the action's run to check with.
		schema, _ := json.Marshal(a.Args)
		ja := api.Action{Name: names[i], Plug: a.Use.Name(), Doc: a.Args.Doc(), Schema: schema}
		for name, f := range a.Args.Fields() {
			kind := f.Kind().String()
			if f.Kind() == interp.KindOptional && f.Elem() != nil {
				kind += "(" + f.Elem().Kind().String() + ")"
			}
			ja.Args = append(ja.Args, api.ActionArg{Name: name, Kind: kind, Doc: f.Doc()})
		}
		out = append(out, ja)
	}
	return out
}

// notResumable names the plugs that cannot resume (C12).
func (r *Runner) notResumable() []string {
	var out []string
	for _, u := range r.Config.Uses {
		if !u.Plug.Resumable {
			out = append(out, u.Plug.Name)
		}
	}
	return out
}

// runnerURL is where the runner connects, its agent and name escaped in
// the query.
func (r *Runner) runnerURL() (string, error) {
	u, err := url.Parse(strings.Replace(strings.TrimRight(r.Server, "/"), "http", "ws", 1) + runnerproto.PathRunner)
	if err != nil {
		return "", fmt.Errorf("server %s: %w", r.Server, err)
	}
	u.RawQuery = url.Values{"agent": {r.Agent}, "runner": {r.Name}}.Encode()
	return u.String(), nil
}

// connect serves one connection until it breaks or ctx is done (then it
// drains on it).
func (r *Runner) connect(ctx context.Context) error {
	u, err := r.runnerURL()
	if err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	version, refused := r.protocol(ctx)
	hc, dialed := runnerproto.CorkingClient(r.HTTPClient)
	ws, resp, err := websocket.Dial(dialCtx, u, &websocket.DialOptions{
		HTTPClient:   hc,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + r.Credential}},
		Subprotocols: []string{runnerproto.Subprotocol(version)},
	})
	if err != nil {
		// 400: the server speaks another protocol version.
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%w by %s: %s", ErrCredentialRefused, r.Server, refusal(resp))
		}
		if resp != nil && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound) {
			return fmt.Errorf("%w by %s: %s", ErrRefused, r.Server, refusal(resp))
		}
		return err
	}
	if refused != nil {
		r.Log.Warn("the server's store connections cannot be reached: the runs' stores go through this runner's connection (runner protocol 6)", "err", refused)
	}
	ws.SetReadLimit(-1) // yamux frames its own streams
	if proto := runnerproto.Subprotocol(version); ws.Subprotocol() != proto {
		ws.Close(websocket.StatusProtocolError, "protocol version")
		return fmt.Errorf("%w: the server does not speak %s", ErrRefused, proto)
	}
	netConn := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	mux, err := yamux.Client(runnerproto.Coalesce(netConn, dialed()), runnerproto.YamuxConfig())
	if err != nil {
		netConn.Close()
		return err
	}
	defer mux.Close()
	first, err := mux.OpenStream()
	if err != nil {
		return err
	}
	frames := runnerproto.NewConn(first)
	alive := r.alive()
	hello := runnerproto.Frame{Kind: runnerproto.KindHello, Version: version, Runner: r.Name, Build: r.Version, Resumable: r.Config.Resumable(), NotResumable: r.notResumable(),
		Config: r.ConfigPath, Dir: r.Dir, Actions: actions(r.Config)}
	for _, rn := range alive {
		hello.Runs = append(hello.Runs, rn.ref)
	}
	if err := frames.Send(hello); err != nil {
		return err
	}
	welcome, err := frames.Receive()
	if err != nil {
		return fmt.Errorf("waiting for the server's welcome: %w", err)
	}
	if welcome.Kind != runnerproto.KindWelcome || welcome.Error != "" || welcome.Settings == nil {
		return fmt.Errorf("%w by %s: %s", ErrRefused, r.Server, welcome.Error)
	}
	// L8: under the pause policy every plug must be able to resume.
	if welcome.Settings.IdlePolicy == lifecycle.PolicyPause && !r.Config.Resumable() {
		return fmt.Errorf("%w: agent %s pauses idle sessions, but plugs of %s cannot resume: %s (set resumable = True in them, or the agent's idle policy to end)",
			ErrRefused, r.Agent, r.ConfigPath, strings.Join(r.notResumable(), ", "))
	}
	r.mu.Lock()
	r.leaseD = time.Duration(welcome.LeaseMS) * time.Millisecond
	r.version = version
	r.mu.Unlock()
	c := &conn{r: r, mux: mux, frames: frames}
	// The runs the server took back are attached to this connection; it
	// has forgotten the others, which stop.
	for _, rn := range alive {
		if slices.Contains(welcome.Runs, rn.ref) {
			if err := rn.attach(c); err != nil {
				return err
			}
			r.Log.Info("run re-attached", "session", rn.ref.Session, "run", rn.ref.Run)
		} else {
			r.Log.Warn("the server does not have the run any more: stopping it", "session", rn.ref.Session, "run", rn.ref.Run)
			rn.giveUp()
		}
	}
	r.Log.Info("connected", "server", r.Server, "agent", r.Agent, "runner", r.Name)
	if r.Connected != nil {
		r.Connected()
	}
	received := make(chan error, 1)
	// Waited for before connect returns (receiving).
	go func() { received <- c.receive() }()
	receiving := true
	defer func() {
		if receiving {
			mux.Close() // ends c.receive
			<-received
		}
	}()
	// A broken connection leaves the runs waiting for the next one.
	defer r.detachAll(c)
	select {
	case err := <-received:
		receiving = false
		return err
	case <-ctx.Done():
	}
	// Drain: the server stops our runs as idle; we leave once they ended.
	if err := frames.Send(runnerproto.Frame{Kind: runnerproto.KindDrain}); err != nil {
		return err
	}
	r.Log.Info("draining: the server stops this runner's runs", "runs", r.count())
	if err, stopped := r.waitRunsOr(received); stopped {
		receiving = false
		return err
	}
	return nil
}

func refusal(resp *http.Response) string {
	if msg, _ := apiclient.Refusal(resp); msg != "" {
		return msg
	}
	return resp.Status
}

func (r *Runner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

// detachAll detaches the runs attached to c, whose connection ended.
func (r *Runner) detachAll(c *conn) {
	r.mu.Lock()
	runs := make([]*run, 0, len(r.runs))
	for _, rn := range r.runs {
		runs = append(runs, rn)
	}
	r.mu.Unlock()
	for _, rn := range runs {
		rn.detach(c)
	}
}

// waitRuns waits for every run to end.
func (r *Runner) waitRuns() { r.waitRunsOr(nil) }

// waitRunsOr waits for every run to end, or for a value of stop, which it
// returns.
func (r *Runner) waitRunsOr(stop <-chan error) (err error, stopped bool) {
	for {
		r.mu.Lock()
		var one *run
		for _, rn := range r.runs {
			one = rn
			break
		}
		r.mu.Unlock()
		if one == nil {
			return nil, false
		}
		select {
		case <-one.done:
		case err := <-stop:
			return err, true
		}
	}
}
