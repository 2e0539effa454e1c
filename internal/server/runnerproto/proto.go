// Package runnerproto holds the types of the runner protocol (version 7)
// between a Blaise server and its runners (`blaise-agent listen`): a
// WebSocket carrying yamux streams. The runner opens the first stream,
// where frames (one JSON object per line) go both ways; each run then has
// streams the runner opens, each starting with a StreamHeader line: the
// session process's stdin, its stdout and its control channel.
//
// Version 7 takes a run's store (runstore) off the runner's connection:
// the session process opens connections of its own to the server for it
// (runstore.DialStore), with the ticket of its launch, and sends its calls again on
// a new one when one breaks, as it did on the runner's store streams.
// The run's transcript, and its messages toward the client inside it,
// cross one process fewer. A runner whose way to the server does not let
// such a connection through (a probe at its start) speaks version 6,
// where the runner opens a fourth stream per run, its store.
//
// Version 6 adds forks (docs/sessions.md#forks): the start run of a
// session forked from another (its record's forked_from) goes to the
// runner of the session forked, where its environment is, and its session
// process reads that session's persisted state (ctx.persisted.parent)
// through its store; the frames are those of version 5. A runner of 6 is
// one whose session processes make forks.
//
// Version 5 adds action runs (docs/plugs.md#actions): a launch of Kind
// action, whose output comes on its stdout stream, not in its transcript,
// and its outcome on its control channel; a hello names the actions the
// runner's chain offers. Version 4 carries a run's messages toward the client in its transcript
// appends, inside their records (acp.Carrier), instead of on its stdout
// stream: each leaves the runner once. Version 3 carries a run's store
// calls across reconnections: the runner passes on whole calls and
// answers, tells the session process of each new store stream, and the
// process sends again, after an OpResync, every call not answered
// (runstore). Version 2 added deflated transcript appends. A server serves
// runners of versions 3 to 7; it launches action runs only on runners of 5
// and later, forks only on runners of 6 and later.
package runnerproto

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/hashicorp/yamux"
)

// Version is the protocol's version, the one a runner speaks.
const Version = 7

// Relayed is the version a runner speaks when its runs' stores cannot
// have connections of their own: the newest before them.
const Relayed = 6

// Served are the versions a server serves, the newest first: a runner of
// another one is refused.
var Served = []int{Version, 6, 5, 4, 3}

// Subprotocol is the WebSocket subprotocol of version v.
func Subprotocol(v int) string { return fmt.Sprintf("blaise-runner.v%d", v) }

// Carries reports whether the runs of a runner of version v carry their
// messages toward the client in their transcripts.
func Carries(v int) bool { return v >= 4 }

// DoesActions reports whether a runner of version v runs action runs.
func DoesActions(v int) bool { return v >= 5 }

// DirectStore reports whether the runs of a runner of version v have
// their stores on connections of their own (PathStore).
func DirectStore(v int) bool { return v >= 7 }

// DoesForks reports whether a runner of version v makes forks: its session
// processes read the persisted state of the session forked.
func DoesForks(v int) bool { return v >= 6 }

// Paths of the server's endpoints for runners and clients.
const (
	PathRunner   = "/v1/runner/connect"
	PathRegister = "/v1/runner/register"
)

// MaxFrame bounds a frame line.
const MaxFrame = 1 << 20

// Kind is the kind of a frame.
type Kind string

const (
	// KindHello, runner to server, first: who it is and the runs it still
	// has (re-attached after a reconnect).
	KindHello Kind = "hello"
	// KindWelcome, server to runner: the agent's settings, or Error.
	KindWelcome Kind = "welcome"
	// KindLaunch, server to runner: start the session process of Run.
	KindLaunch Kind = "launch"
	// KindLaunched, runner to server: the run's process started (its
	// streams follow) or Error says why not.
	KindLaunched Kind = "launched"
	// KindSignal, server to runner: SIGTERM, or with Kill SIGKILL, to the
	// run's processes.
	KindSignal Kind = "signal"
	// KindExited, runner to server: the run's session process ended, with
	// Status.
	KindExited Kind = "exited"
	// KindDrain, runner to server: the runner takes no more runs (SIGTERM);
	// the server stops its live runs as idle.
	KindDrain Kind = "drain"
)

// Channel names a stream of a run.
type Channel string

const (
	ChannelStdin   Channel = "stdin"
	ChannelStdout  Channel = "stdout"
	ChannelControl Channel = "control"
	ChannelStore   Channel = "store"
)

// Channels are the streams of each run, in the order the runner opens them.
var Channels = []Channel{ChannelStdin, ChannelStdout, ChannelControl, ChannelStore}

// RunChannels are the streams of each run of a runner of version v: the
// store is not one from version 7 on.
func RunChannels(v int) []Channel {
	if DirectStore(v) {
		return Channels[:3]
	}
	return Channels
}

// Frame is one message of the first stream; the fields of its kind are set.
type Frame struct {
	Kind    Kind   `json:"type"`
	Version int    `json:"version,omitempty"`
	Runner  string `json:"runner,omitempty"` // the runner's name
	// Build, in hello: the runner's blaise-agent version.
	Build string `json:"build,omitempty"`
	// Resumable, in hello: whether the runner's chain can resume; with
	// NotResumable the plugs that cannot.
	Resumable    bool     `json:"resumable,omitempty"`
	NotResumable []string `json:"not_resumable,omitempty"`
	// Config and Dir, in hello: the runner's blaise.star (absolute) and
	// the directory its session processes run in, recorded in the sessions
	// it runs. A runner before them says neither.
	Config string `json:"config,omitempty"`
	Dir    string `json:"dir,omitempty"`
	// Actions, in hello (version 5): the actions the runner's chain
	// offers, for the server to list per session.
	Actions []api.Action `json:"actions,omitempty"`
	// Runs, in hello: the runs the runner still has; in welcome: those the
	// server adopts (the runner stops the others).
	Runs []RunRef `json:"runs,omitempty"`
	// LeaseMS, in welcome: the server's lease, in milliseconds: how long
	// it waits for a runner that is gone before it fails its runs.
	LeaseMS  int64               `json:"lease_ms,omitempty"`
	Settings *lifecycle.Settings `json:"settings,omitempty"`
	Launch   *Launch             `json:"launch,omitempty"`
	Run      *RunRef             `json:"run,omitempty"`
	Kill     bool                `json:"kill,omitempty"`
	Status   string              `json:"status,omitempty"`
	Error    string              `json:"error,omitempty"`
}

// RunRef names a run: its session and its number.
type RunRef struct {
	Session string `json:"session"`
	Run     int    `json:"run"`
}

// Launch is a run to start.
type Launch struct {
	RunRef
	// Flags are the session process's flags that say which run it is.
	Flags []string `json:"flags"`
	// Kind is the run's kind, as Flags say it; "action" (version 5): an
	// action run, whose output is on its stdout stream.
	Kind lifecycle.Kind `json:"kind,omitempty"`
	// Ticket (version 7) is what the run's session process shows for its
	// store connections (runstore.DialStore).
	Ticket string `json:"ticket,omitempty"`
}

// StreamHeader begins each stream of a run.
type StreamHeader struct {
	RunRef
	Channel Channel `json:"channel"`
}

// Conn reads and writes frames on a stream.
type Conn struct {
	mu  sync.Mutex
	enc *json.Encoder
	sc  *bufio.Scanner
}

// NewConn returns a frame connection over rw.
func NewConn(rw io.ReadWriter) *Conn {
	sc := bufio.NewScanner(rw)
	sc.Buffer(make([]byte, 0, 4096), MaxFrame)
	return &Conn{enc: json.NewEncoder(rw), sc: sc}
}

// Send writes f.
func (c *Conn) Send(f Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(f); err != nil {
		return fmt.Errorf("runner protocol: %w", err)
	}
	return nil
}

// Receive reads the next frame; io.EOF when the peer is gone.
func (c *Conn) Receive() (Frame, error) {
	if !c.sc.Scan() {
		if err := c.sc.Err(); err != nil {
			return Frame{}, fmt.Errorf("runner protocol: %w", err)
		}
		return Frame{}, io.EOF
	}
	var f Frame
	if err := json.Unmarshal(c.sc.Bytes(), &f); err != nil {
		return Frame{}, fmt.Errorf("runner protocol: a bad frame %.200q: %w", c.sc.Bytes(), err)
	}
	return f, nil
}

// WriteHeader begins a run's stream.
func WriteHeader(w io.Writer, h StreamHeader) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadHeader reads a stream's header byte by byte, so that nothing after
// it is consumed.
func ReadHeader(r io.Reader) (StreamHeader, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4096 {
		if _, err := io.ReadFull(r, b); err != nil {
			return StreamHeader{}, fmt.Errorf("runner protocol: stream header: %w", err)
		}
		if b[0] == '\n' {
			var h StreamHeader
			if err := json.Unmarshal(line, &h); err != nil {
				return h, fmt.Errorf("runner protocol: a bad stream header %q: %w", line, err)
			}
			return h, nil
		}
		line = append(line, b[0])
	}
	return StreamHeader{}, fmt.Errorf("runner protocol: stream header longer than 4096 bytes")
}

// YamuxConfig is the yamux configuration of both ends: keepalives find a
// dead peer within KeepAliveInterval and its timeout.
func YamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.KeepAliveInterval = 10 * time.Second
	cfg.MaxStreamWindowSize = 1 << 20
	return cfg
}
