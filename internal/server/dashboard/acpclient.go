package dashboard

// The dashboard as an ACP client. A prompt from a session's page goes to
// its agent's ACP front end, the one behind GET /v1/agents/NAME/acp,
// reached in this process: one connection per agent, opened at the first
// prompt and held for the server's lifetime. When a turn sent from the
// page ends, the dashboard closes the session (session/close), as an
// editor that leaves would: it stops as idle (L9), and a person at a
// terminal or an editor can take it up at once. The agent's permission
// requests wait on the session's page for a person.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/charmbracelet/log"
	sdk "github.com/coder/acp-go-sdk"
)

// ACP opens the dashboard's ACP connection to an agent's front end.
type ACP func(agent string) (io.ReadWriteCloser, error)

// errBusy refuses a prompt while the dashboard's last one runs: a session
// takes one prompt at a time.
var errBusy = errors.New("a prompt sent from this dashboard is still running in the session; wait for its turn to end")

// errStale answers a permission request that no longer waits.
var errStale = errors.New("it no longer waits for an answer (it was answered, or its turn ended)")

// errNoTurn refuses a cancel: the dashboard cancels only the turns it
// sent; an editor's or a terminal's turn is cancelled there.
var errNoTurn = errors.New("no turn sent from this dashboard runs in the session (a turn an editor or a terminal sent is cancelled there)")

// acpClient is the dashboard's ACP connections and what they do in each
// session; it is the connections' client.Handler.
type acpClient struct {
	connect ACP
	log     *log.Logger

	open  sync.Mutex // one connection opens at a time
	mu    sync.Mutex
	conns map[string]*client.Conn // by agent
	acts  map[string]*activity    // by session
}

// activity is what the dashboard's client does in a session.
type activity struct {
	version     int  // counts its changes, for the pages that follow it
	Busy        bool // a prompt from the dashboard runs
	Outcome     string
	Failed      bool
	Permissions []*permission // waiting for a person, oldest first
	// taken is closed at the session's first message after a prompt:
	// the prompt reached its run. nil once closed.
	taken chan struct{}
	conn  *client.Conn // the connection of the running prompt
}

// permission is an agent's permission request as the page shows it.
type permission struct {
	ID      string // the dashboard's, in the form's address
	Title   string
	Kind    string
	Command string   // of an execute tool call
	Paths   []string // the locations it touches
	Options []sdk.PermissionOption
	answer  chan sdk.PermissionOptionId
}

func newACPClient(connect ACP, l *log.Logger) *acpClient {
	return &acpClient{connect: connect, log: l, conns: map[string]*client.Conn{}, acts: map[string]*activity{}}
}

// act returns the activity of a session, made on first use. a.mu is held.
func (a *acpClient) act(id string) *activity {
	act := a.acts[id]
	if act == nil {
		act = &activity{}
		a.acts[id] = act
	}
	return act
}

// snapshot returns a copy of a session's activity.
func (a *acpClient) snapshot(id string) activity {
	a.mu.Lock()
	defer a.mu.Unlock()
	if act := a.acts[id]; act != nil {
		c := *act
		c.Permissions = slices.Clone(act.Permissions)
		return c
	}
	return activity{}
}

// asking: a permission request of a session waits for a person.
func (a *acpClient) asking(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	act := a.acts[id]
	return act != nil && len(act.Permissions) > 0
}

// conn returns the connection to an agent's front end, opening it.
func (a *acpClient) conn(ctx context.Context, agent string) (*client.Conn, error) {
	a.open.Lock()
	defer a.open.Unlock()
	a.mu.Lock()
	c := a.conns[agent]
	a.mu.Unlock()
	if c != nil {
		return c, nil
	}
	rwc, err := a.connect(agent)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", agent, err)
	}
	c = client.NewConn(rwc, rwc, a)
	// Ends with the agent's ACP connection (the server's end, or rwc's).
	go func() {
		err := c.Run(context.Background())
		rwc.Close()
		a.mu.Lock()
		if a.conns[agent] == c {
			delete(a.conns, agent)
		}
		a.mu.Unlock()
		a.log.Debug("dashboard: the ACP connection of an agent ended", "agent", agent, "err", err)
	}()
	// No fs and no terminal: the agent's files are on its host, not here.
	init := sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber, ClientInfo: &sdk.Implementation{Name: "blaise-agent dashboard"}}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, fmt.Errorf("agent %s: %w", agent, err)
	}
	a.mu.Lock()
	a.conns[agent] = c
	a.mu.Unlock()
	return c, nil
}

// prompt sends text to a session of agent, and returns once the session
// shows that its run took it (its first message), or with the error that
// kept the prompt from its run. The turn goes on after that; the session's
// activity tells how it ended.
func (a *acpClient) prompt(ctx context.Context, agent, id, text string) error {
	a.mu.Lock()
	act := a.act(id)
	if act.Busy {
		a.mu.Unlock()
		return errBusy
	}
	taken := make(chan struct{})
	act.Busy, act.Outcome, act.Failed, act.taken = true, "", false, taken
	act.version++
	a.mu.Unlock()
	c, err := a.conn(ctx, agent)
	if err != nil {
		return a.refused(id, a.ended(id, "", err))
	}
	a.mu.Lock()
	act.conn = c
	a.mu.Unlock()
	done := make(chan error, 1)
	// Ends with the prompt's answer, or with the connection's end.
	go func() {
		stop, err := c.Prompt(context.Background(), id, text)
		if err == nil || a.reached(id) {
			a.release(c, id)
		}
		done <- a.ended(id, stop, err)
	}()
	select {
	case <-taken:
		return nil
	case err := <-done:
		return a.refused(id, err)
	case <-ctx.Done():
		return nil // the person left; the turn goes on
	}
}

// refused forgets the outcome of a prompt refused before it reached the
// session's run: the answer to the person who sent it says why, once.
func (a *acpClient) refused(id string, err error) error {
	if err != nil {
		a.mu.Lock()
		act := a.act(id)
		act.Outcome, act.Failed = "", false
		act.version++
		a.mu.Unlock()
	}
	return err
}

// reached reports whether the session's run took the dashboard's prompt.
func (a *acpClient) reached(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.act(id).taken == nil
}

// release lets go of a session when the dashboard's turn in it has
// ended, as an editor that leaves does (session/close): its run stops as
// idle under its idle policy (L9), and any client may take it up.
func (a *acpClient) release(c *client.Conn, id string) {
	// Bounded: an unanswered close must not keep the turn's outcome.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CloseSession(ctx, id); err != nil {
		a.log.Debug("dashboard: releasing a session", "session", id, "err", err)
	}
}

// ended records how a session's prompt ended, and returns its error when
// the prompt never reached the session's run.
func (a *acpClient) ended(id string, stop string, err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	act := a.act(id)
	refused := act.taken != nil
	act.Busy, act.taken, act.Failed, act.conn = false, nil, err != nil, nil
	act.version++
	if err != nil {
		err = errors.New(reason(err))
		act.Outcome = "The prompt failed: " + err.Error()
		if refused {
			return err
		}
		return nil
	}
	act.Outcome = "The turn ended: " + stop + ". The dashboard let go of the session: it stops as idle, and any client may take it up."
	return nil
}

// reason is what an error answer says, without JSON-RPC's codes.
func reason(err error) string {
	var e *client.RPCError
	if errors.As(err, &e) {
		var data struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(e.Data, &data) == nil && data.Reason != "" {
			return data.Reason
		}
		return e.Message
	}
	return err.Error()
}

// tookIt marks that a session's run took the dashboard's prompt.
func (a *acpClient) tookIt(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if act := a.acts[id]; act != nil && act.taken != nil {
		close(act.taken)
		act.taken = nil
	}
}

// Notification takes the session's updates as the sign that its run took
// the prompt; the page follows the transcript for what they say.
func (a *acpClient) Notification(method string, params json.RawMessage) {
	if method == sdk.ClientMethodSessionUpdate {
		if id, ok := sessionOf(params); ok {
			a.tookIt(id)
		}
	}
}

func sessionOf(params json.RawMessage) (string, bool) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	return p.SessionID, json.Unmarshal(params, &p) == nil && p.SessionID != ""
}

// Request serves the agent's permission requests: each waits on the
// session's page until a person answers it, or is cancelled with its
// turn. The dashboard offers no fs and no terminal.
func (a *acpClient) Request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != sdk.ClientMethodSessionRequestPermission {
		return nil, client.ErrMethodNotFound
	}
	var req sdk.RequestPermissionRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &client.RPCError{Code: acp.InvalidParams, Message: "Invalid params", Data: mustJSON(map[string]string{"error": err.Error()})}
	}
	p := newPermission(req)
	id := string(req.SessionId)
	a.mu.Lock()
	act := a.act(id)
	act.Permissions = append(act.Permissions, p)
	act.version++
	a.mu.Unlock()
	a.tookIt(id)
	select {
	case opt := <-p.answer:
		return selected(opt), nil
	case <-ctx.Done():
		if !a.take(id, p.ID) {
			return selected(<-p.answer), nil // answered meanwhile
		}
		return selected(""), nil
	}
}

// selected answers a permission request with an option, or, for none,
// cancelled.
func selected(opt sdk.PermissionOptionId) sdk.RequestPermissionResponse {
	if opt == "" {
		return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{}}}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: opt}}}
}

// cancel cancels the turn the dashboard sent to a session
// (session/cancel); as ACP asks of a client, the turn's waiting permission
// requests are answered cancelled.
func (a *acpClient) cancel(id string) error {
	a.mu.Lock()
	act := a.acts[id]
	if act == nil || !act.Busy || act.conn == nil {
		a.mu.Unlock()
		return errNoTurn
	}
	c := act.conn
	for _, p := range act.Permissions {
		p.answer <- ""
	}
	act.Permissions = nil
	act.version++
	a.mu.Unlock()
	return c.Cancel(id)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func newPermission(req sdk.RequestPermissionRequest) *permission {
	tc := req.ToolCall
	p := &permission{ID: lifecycle.NewID(), Title: string(tc.ToolCallId), Options: req.Options, answer: make(chan sdk.PermissionOptionId, 1)}
	if tc.Title != nil && *tc.Title != "" {
		p.Title = *tc.Title
	}
	if tc.Kind != nil {
		p.Kind = string(*tc.Kind)
	}
	if in, ok := tc.RawInput.(map[string]any); ok {
		p.Command, _ = in["command"].(string)
	}
	for _, l := range tc.Locations {
		p.Paths = append(p.Paths, l.Path)
	}
	return p
}

// take removes a waiting permission request; false when it waits no more.
func (a *acpClient) take(id, req string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.remove(id, req) != nil
}

// waiting returns the index of a waiting permission request, or -1.
func (act *activity) waiting(req string) int {
	if act == nil {
		return -1
	}
	return slices.IndexFunc(act.Permissions, func(p *permission) bool { return p.ID == req })
}

// remove removes a waiting permission request and returns it. a.mu is held.
func (a *acpClient) remove(id, req string) *permission {
	act := a.acts[id]
	i := act.waiting(req)
	if i < 0 {
		return nil
	}
	p := act.Permissions[i]
	act.Permissions = slices.Delete(act.Permissions, i, i+1)
	act.version++
	return p
}

// answer answers a waiting permission request of a session with one of
// its options, and returns the option's name.
func (a *acpClient) answer(id, req, option string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	act := a.acts[id]
	w := act.waiting(req)
	if w < 0 {
		return "", fmt.Errorf("permission request %s of session %s: %w", req, id, errStale)
	}
	p := act.Permissions[w]
	i := slices.IndexFunc(p.Options, func(o sdk.PermissionOption) bool { return string(o.OptionId) == option })
	if i < 0 {
		ids := make([]string, len(p.Options))
		for j, o := range p.Options {
			ids[j] = string(o.OptionId)
		}
		return "", fmt.Errorf("permission request %s: no option %q; choose one of %s", req, option, strings.Join(ids, ", "))
	}
	a.remove(id, req)
	p.answer <- p.Options[i].OptionId
	return p.Options[i].Name, nil
}
