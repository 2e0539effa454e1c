// Package serverclient is the client side of a Blaise server: its JSON
// API, the ACP connection of `acp --server`, and a runner's registration
// and credential file.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/api"
	"github.com/blaiseagent/blaise-agent/internal/server/runnerproto"
	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
	"github.com/coder/websocket"
)

// Client calls a server with an API token.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client // nil: http.DefaultClient
}

func (c *Client) http() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

// call sends a request with body in (JSON, unless nil) and decodes the
// answer into out (unless nil; an io.Writer gets the body as it is); an
// error answer becomes an error that says what the server said.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	_, err := c.do(ctx, method, path, in, out)
	return err
}

// do is call, returning the answer's header too.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		return resp.Header, nil
	}
	if w, ok := out.(io.Writer); ok { // a body that is not JSON
		_, err := io.Copy(w, resp.Body)
		return resp.Header, err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("server %s: a bad answer to %s %s: %w", c.URL, method, path, err)
	}
	return resp.Header, nil
}

// send sends a request with body in (JSON, unless nil) and returns the
// answer, whose body the caller closes; an error answer becomes an error
// that says what the server said.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, body)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", c.URL, err)
	}
	if err := checkToken(c.Token); err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", c.URL, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		msg, _ := Refusal(resp)
		return nil, apiError(resp.StatusCode, msg, path != runnerproto.PathRegister)
	}
	return resp, nil
}

// Refusal reads the message of an error answer: the API's {"error": …}
// (api), else its body as it came.
func Refusal(resp *http.Response) (msg string, api bool) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error, true
	}
	return strings.TrimSpace(string(b)), false
}

// APIError is an error answer of the server.
type APIError struct {
	Status  int
	Message string
	// Hint says what a person does about it.
	Hint string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("server: %s (%d %s)", e.Message, e.Status, http.StatusText(e.Status))
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// tokenHint says what a client refused for its API token does.
const tokenHint = "set $BLAISE_TOKEN (blaise-agent tokens api NAME on the server's machine) or pass --token"

// apiError is the error of an answer with status and message; a 401 of
// the client API (api; not a runner's registration, whose token is
// another) says how to get an API token.
func apiError(status int, message string, api bool) *APIError {
	e := &APIError{Status: status, Message: message}
	if status == http.StatusUnauthorized && api {
		e.Hint = tokenHint
	}
	return e
}

// checkToken refuses a token that cannot be sent in a header, saying
// what is wrong rather than leaving net/http to say the header is bad:
// often $BLAISE_TOKEN holds more than the token.
func checkToken(tok string) error {
	if i := strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("the API token (--token or $BLAISE_TOKEN) has a space or a control character at byte %d: it must be the token alone (bla_…), as `blaise-agent tokens api NAME` prints it on its standard output", i)
	}
	return nil
}

// Agents lists the server's agents.
func (c *Client) Agents(ctx context.Context) ([]api.AgentJSON, error) {
	var out []api.AgentJSON
	return out, c.call(ctx, http.MethodGet, api.PathAgents, nil, &out)
}

// Agent returns an agent.
func (c *Client) Agent(ctx context.Context, name string) (*api.AgentJSON, error) {
	var out api.AgentJSON
	return &out, c.call(ctx, http.MethodGet, api.PathAgents+"/"+url.PathEscape(name), nil, &out)
}

// CreateAgent creates an agent.
func (c *Client) CreateAgent(ctx context.Context, a api.AgentJSON) (*api.AgentJSON, error) {
	var out api.AgentJSON
	return &out, c.call(ctx, http.MethodPost, api.PathAgents, a, &out)
}

// UpdateAgent changes the fields a sets.
func (c *Client) UpdateAgent(ctx context.Context, a api.AgentJSON) (*api.AgentJSON, error) {
	var out api.AgentJSON
	return &out, c.call(ctx, http.MethodPatch, api.PathAgents+"/"+url.PathEscape(a.Name), a, &out)
}

// DeleteAgent deletes an agent.
func (c *Client) DeleteAgent(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, api.PathAgents+"/"+url.PathEscape(name), nil, nil)
}

// ListOptions choose a page of the sessions list (GET /v1/sessions).
type ListOptions struct {
	Agent, State, Runner string
	// Text: only sessions whose title holds it.
	Text string
	// Mine: only the sessions opened with an API token of this client's
	// token's name.
	Mine bool
	// Limit is the page's size; 0: the server's default (100).
	Limit int
	// Cursor is the Next of the page before; "" for the first.
	Cursor string
}

func (o ListOptions) query() string {
	v := url.Values{}
	for k, s := range map[string]string{"agent": o.Agent, "state": o.State, "runner": o.Runner, "q": o.Text, "cursor": o.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if o.Mine {
		v.Set("mine", "true")
	}
	if o.Limit != 0 {
		v.Set("limit", strconv.Itoa(o.Limit))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Sessions returns a page of the sessions list, newest first, and the
// cursor of the next page ("" when this one is the last).
func (c *Client) Sessions(ctx context.Context, o ListOptions) (recs []*lifecycle.Record, next string, err error) {
	h, err := c.do(ctx, http.MethodGet, api.PathSessions+o.query(), nil, &recs)
	if err != nil {
		return nil, "", err
	}
	return recs, h.Get(api.HeaderNextCursor), nil
}

// AllSessions returns every session of the list o chooses, page by page
// (o.Limit sessions a request).
func (c *Client) AllSessions(ctx context.Context, o ListOptions) ([]*lifecycle.Record, error) {
	var all []*lifecycle.Record
	for {
		recs, next, err := c.Sessions(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
		if next == "" {
			return all, nil
		}
		o.Cursor = next
	}
}

// LastPaused returns the id of the agent's most recently paused session
// among those opened with an API token of this client's token's name.
func (c *Client) LastPaused(ctx context.Context, agent string) (string, error) {
	recs, err := c.AllSessions(ctx, ListOptions{Agent: agent, Mine: true, State: string(lifecycle.Paused), Limit: api.MaxListLimit})
	if err != nil {
		return "", err
	}
	var last *lifecycle.Record
	for _, r := range recs {
		// Owner: a server that does not know mine lists every session,
		// and records no owner.
		if r.State == lifecycle.Paused && r.Owner != "" && (last == nil || r.PausedAt.After(last.PausedAt)) {
			last = r
		}
	}
	if last == nil {
		return "", fmt.Errorf("no paused session of agent %s opened with an API token of your name to continue: see `blaise-agent sessions --server %s --agent %s`, and continue one with --session ID", agent, c.URL, agent)
	}
	return last.ID, nil
}

// End ends a session and returns it as it is then.
func (c *Client) End(ctx context.Context, id string) (*lifecycle.Record, error) {
	var out lifecycle.Record
	return &out, c.call(ctx, http.MethodPost, api.PathSessions+"/"+url.PathEscape(id)+"/end", nil, &out)
}

// Session returns a session's record.
func (c *Client) Session(ctx context.Context, id string) (*lifecycle.Record, error) {
	var out lifecycle.Record
	return &out, c.call(ctx, http.MethodGet, api.PathSessions+"/"+url.PathEscape(id), nil, &out)
}

// TranscriptBody is a session's transcript as the server sends it: its
// records one a line, read as they come.
type TranscriptBody struct {
	io.ReadCloser
	// Next is the number of the last chunk it holds: the after of the
	// request that reads what comes next; -1 from a server that does not
	// say (older than ?after=).
	Next int64
}

// Transcript streams a session's transcript: what chunks after the chunk
// numbered after hold (0: from the start). The caller closes it.
func (c *Client) Transcript(ctx context.Context, id string, after int64) (*TranscriptBody, error) {
	resp, err := c.send(ctx, http.MethodGet, api.PathSessions+"/"+url.PathEscape(id)+"/transcript?after="+strconv.FormatInt(after, 10), nil)
	if err != nil {
		return nil, err
	}
	next, err := strconv.ParseInt(resp.Header.Get(api.HeaderTranscriptNext), 10, 64)
	if err != nil {
		next = -1
	}
	return &TranscriptBody{ReadCloser: resp.Body, Next: next}, nil
}

// PlugLog returns the lines a session's plugs logged, by run.
func (c *Client) PlugLog(ctx context.Context, id string) ([]lifecycle.PlugLogLine, error) {
	var out bytes.Buffer
	if err := c.call(ctx, http.MethodGet, api.PathSessions+"/"+url.PathEscape(id)+"/plug-log", nil, &out); err != nil {
		return nil, err
	}
	var lines []lifecycle.PlugLogLine
	dec := json.NewDecoder(&out)
	for dec.More() {
		var l lifecycle.PlugLogLine
		if err := dec.Decode(&l); err != nil {
			return lines, fmt.Errorf("the server's plug log of session %s: %w", id, err)
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// SetTitle sets the title a person gives a session.
func (c *Client) SetTitle(ctx context.Context, id, title string) (*lifecycle.Record, error) {
	var out lifecycle.Record
	return &out, c.call(ctx, http.MethodPatch, api.PathSessions+"/"+url.PathEscape(id), api.SessionPatchJSON{Title: title}, &out)
}

// Resolve marks an orphaned session ended.
func (c *Client) Resolve(ctx context.Context, id string) (*lifecycle.Record, error) {
	var out lifecycle.Record
	return &out, c.call(ctx, http.MethodPost, api.PathSessions+"/"+url.PathEscape(id)+"/resolve", nil, &out)
}

// DialACP connects to an agent's ACP endpoint: ACP messages, one per line,
// both ways.
func (c *Client) DialACP(ctx context.Context, agent string) (net.Conn, error) {
	if err := checkToken(c.Token); err != nil {
		return nil, err
	}
	u := wsURL(c.URL) + api.PathAgents + "/" + url.PathEscape(agent) + "/acp"
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:   c.HTTP,
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + c.Token}},
		Subprotocols: []string{api.ACPSubprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			if msg, api := Refusal(resp); api {
				return nil, apiError(resp.StatusCode, msg, true)
			}
		}
		return nil, fmt.Errorf("server %s: %w", c.URL, err)
	}
	ws.SetReadLimit(-1)
	return runnerproto.Coalesce(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil), nil
}

func wsURL(u string) string {
	u = strings.TrimRight(u, "/")
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "ws://" + rest
	}
	return u
}

// Bridge copies between an ACP client on in and out (an editor on stdio)
// and conn until either side ends. The client gets whole lines only: the
// part of a message that a broken connection cut is dropped.
func Bridge(ctx context.Context, conn net.Conn, in io.Reader, out io.Writer) error {
	sent, got := make(chan error, 1), make(chan error, 1)
	// Waited for where in can be interrupted (a pipe or socket the runtime
	// polls); else it reads until in ends (an editor's stdin: at exit).
	go func() {
		_, err := io.Copy(conn, in)
		sent <- err
	}()
	// out is a pipe as large as local acp's stdout, and the messages a
	// connection read gathers go out in one write: a burst of updates
	// costs a few writes, not one each 32 KiB.
	acp.EnlargePipe(out)
	go func() {
		_, err := io.CopyBuffer(&wholeLines{w: out}, conn, make([]byte, bridgeBuffer))
		got <- err
	}()
	var err error
	inEnded, connEnded := false, false
	select {
	case err = <-sent:
		inEnded = true
	case err = <-got:
		connEnded = true
	case <-ctx.Done():
	}
	conn.Close()
	if !inEnded {
		if d, ok := in.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Unix(1, 0)) == nil {
			<-sent
			_ = d.SetReadDeadline(time.Time{})
		}
	}
	if !connEnded {
		<-got // ends with conn closed
	}
	if !inEnded && !connEnded || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Register exchanges a registration token for a runner credential and
// keeps it in file, 0600.
func Register(ctx context.Context, serverURL string, hc *http.Client, regToken, name, file string) (string, error) {
	c := &Client{URL: serverURL, HTTP: hc}
	var out struct {
		Credential string `json:"credential"`
	}
	in := map[string]string{"token": regToken, "name": name}
	if err := c.call(ctx, http.MethodPost, runnerproto.PathRegister, in, &out); err != nil {
		return "", fmt.Errorf("registering runner %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", err
	}
	if err := atomicfile.Write(file, []byte(out.Credential+"\n"), 0o600, true); err != nil {
		return "", fmt.Errorf("keeping the runner credential: %w", err)
	}
	return out.Credential, nil
}

// ReadCredential reads a runner credential file, which must be 0600.
func ReadCredential(file string) (string, error) {
	info, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("runner credential: %w (register the runner first with --register-token)", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("runner credential %s: mode %s lets others read it; want 0600 (chmod 600 %s)", file, info.Mode().Perm(), file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ServeACP is `acp --server`: the agent's sessions on the server, served
// to the ACP client on in and out as a local `acp` serves its own.
func ServeACP(ctx context.Context, c *Client, agent string, in io.Reader, out io.Writer) error {
	if agent == "" {
		return &exitcode.Error{Code: 2, Err: errors.New("--server needs --agent: the agent whose sessions to serve")}
	}
	conn, err := c.DialACP(ctx, agent)
	if err != nil {
		return err
	}
	return Bridge(ctx, conn, in, out)
}

// bridgeBuffer is the most of the server's messages Bridge reads at once,
// as much as a Reader's block (acp).
const bridgeBuffer = 256 << 10

// wholeLines writes to w the lines written to it once they are whole.
type wholeLines struct {
	w    io.Writer
	part []byte // a line not ended yet
}

func (l *wholeLines) Write(p []byte) (int, error) {
	end := bytes.LastIndexByte(p, '\n')
	if end < 0 {
		l.part = append(l.part, p...)
		return len(p), nil
	}
	if len(l.part) > 0 {
		l.part = append(l.part, p[:end+1]...)
		if _, err := l.w.Write(l.part); err != nil {
			return 0, err
		}
		l.part = l.part[:0]
	} else if _, err := l.w.Write(p[:end+1]); err != nil {
		return 0, err
	}
	l.part = append(l.part, p[end+1:]...)
	return len(p), nil
}
