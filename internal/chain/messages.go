package chain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/support/jsonstr"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Client is the ACP client side of a run: the stream of the messages it
// sends, and where the agent's messages go.
type Client struct {
	In  io.Reader
	Out io.Writer
	// Bundled: the client is a front end that knows the session by its
	// blaise id (Options.SessionID) and passes the agent's session/update
	// notifications on as they are, in bundles (acp.Bundle).
	Bundled bool
}

// pipeline passes messages through the plugs' on_message handlers (M3, M4).
type pipeline struct {
	r         *Run
	host      hosts.Host
	hostValue starlark.Value // ctx.host of the handlers, made at the first message
	// orders are the plugs a message meets, by the side it goes toward
	// (M3: toward the client, the last plug first), for typed methods
	// (every on_message) and for extension methods (plug(extensions =
	// True) only).
	typed, extensions [2][]*plugRun
	args              [3]starlark.Value // of the handler call being started: ctx, message, next
	// spare are traversals that no handler reached anything of its ctx
	// outliving the call in: none kept their ctx, next or message, so
	// they serve again (with the session lock held).
	spare []*traversal
}

// maxSpare bounds the spare traversals: as many as messages are under way
// at once, a few.
const maxSpare = 4

// proxy connects the agent's stdio to the client through the plugs.
func (r *Run) proxy(ctx context.Context, proc hosts.Process, host hosts.Host) error {
	pl := r.pipeline(host)
	px := &acp.Proxy{
		FromClient:  acp.NewReader(r.opts.Client.In, r.opts.MaxLine),
		ToClient:    acp.NewWriter(r.opts.Client.Out),
		FromAgent:   acp.NewReader(proc.Stdout(), r.opts.MaxLine),
		ToAgent:     acp.NewWriter(proc.Stdin()),
		Recorder:    r.watchStartup(ctx),
		Carrier:     r.opts.Carrier,
		Log:         r.log.WithPrefix("acp"),
		CheckParams: true,
		OnFailure:   r.fail,
		OnAgentEnd:  func() { r.agentEnded.Store(true) },
		Extensions:  len(pl.extensions[acp.ToAgent]) > 0,
	}
	if r.opts.Client.Bundled {
		px.ClientSession = jsonstr.Append(nil, r.opts.SessionID)
	}
	if len(pl.typed[acp.ToAgent]) > 0 {
		px.Pipeline = pl
	}
	return px.Run(ctx)
}

// pipeline returns the plugs' pipeline of messages for the agent on host.
func (r *Run) pipeline(host hosts.Host) *pipeline {
	pl := &pipeline{r: r, host: host}
	var typed, extensions []*plugRun
	for _, p := range r.plugs {
		if p.use.Plug.OnMessage != nil {
			typed = append(typed, p)
		}
		if p.use.Plug.Extensions {
			extensions = append(extensions, p)
		}
	}
	pl.typed = [2][]*plugRun{acp.ToAgent: typed, acp.ToClient: reversed(typed)}
	pl.extensions = [2][]*plugRun{acp.ToAgent: extensions, acp.ToClient: reversed(extensions)}
	return pl
}

func reversed(plugs []*plugRun) []*plugRun {
	out := slices.Clone(plugs)
	slices.Reverse(out)
	return out
}

// Handle runs m through the handlers: toward the agent plug 1 first, toward
// the client the last plug first, so the outermost plug has the last word
// on what reaches the client (M3).
func (pl *pipeline) Handle(side acp.Side, m *acp.Message, forward acp.Forward) (*acp.Message, string, bool, error) {
	order := pl.typed[side]
	if acp.IsExtension(m.Method) {
		order = pl.extensions[side]
	}
	pl.r.lock.Acquire()
	defer pl.r.lock.Release()
	if pl.hostValue == nil {
		pl.hostValue = pl.r.hostValues.of(pl.host)
	}
	way := pl.traversal(order, forward)
	way.msg = builtins.Message{Direction: side.Direction(), Msg: m}
	resp, by, err := way.step(0, &way.msg)
	// No handler reached what outlives its call: none kept m, whose block
	// is read into again once it is out, nor anything of the traversal.
	free := m.Kind == acp.Notification && !way.reached
	if !way.reached && len(pl.spare) < maxSpare {
		pl.spare = append(pl.spare, way)
	}
	if err != nil || resp == nil {
		// The proxy answers the client's open requests with the error.
		return nil, by, free, pl.r.opts.Redactions.Error(err)
	}
	out, err := resp.Encode()
	return out, by, free, err
}

// traversal returns a traversal for a message meeting order, a spare one when
// there is one: the steps of a message take one allocation, not one per
// plug, and none when a traversal serves again: with 5 plugs, 8% of the
// session process's CPU time per message (docs/performance.md, what each
// optimisation pays).
func (pl *pipeline) traversal(order []*plugRun, forward acp.Forward) *traversal {
	if n := len(pl.spare); n > 0 && cap(pl.spare[n-1].hops) >= len(order) {
		way := pl.spare[n-1]
		pl.spare = pl.spare[:n-1]
		hops := way.hops[:len(order)]
		clear(hops)
		*way = traversal{pl: pl, order: order, forward: forward, hops: hops}
		return way
	}
	return &traversal{pl: pl, order: order, forward: forward, hops: make([]hop, len(order))}
}

// A traversal is a message's way through the plugs: the order they meet it
// in, the forward past the last one, and a step for each; and the message
// as the first plug sees it.
type traversal struct {
	pl      *pipeline
	order   []*plugRun
	forward acp.Forward
	hops    []hop
	msg     builtins.Message
	// reached: a handler took from its ctx what outlives its call (see
	// builtins.Ctx.Reached), where it may have kept the message, its ctx
	// or its next.
	reached bool
}

// step runs the handler of order[k] in hops[k]; past the last plug it
// forwards.
func (way *traversal) step(k int, msg *builtins.Message) (*builtins.Message, string, error) {
	pl, order, forward := way.pl, way.order, way.forward
	r := pl.r
	if k == len(order) {
		out, err := msg.Encode()
		if err != nil {
			return nil, "", err
		}
		var resp *acp.Message
		r.unlocked(func() { resp = forward(out) })
		if resp == nil {
			return nil, "", nil
		}
		return builtins.NewMessage(msg.Direction, resp), "", nil
	}
	h := &way.hops[k]
	h.way, h.k = way, k
	p := order[k]
	fn := p.use.Plug.OnMessage
	r.initCtx(&h.ctx, p, "on_message", pl.hostValue)
	h.ctx.Reached = &way.reached
	// The arguments are copied into the handler's frame as the call
	// starts, under the session lock: one array serves every step.
	pl.args = [3]starlark.Value{&h.ctx, msg, h}
	ret, err := r.call(p, "on_message", fn, &h.ctx, pl.args[:])
	if err != nil {
		return nil, "", err
	}
	if msg.Msg.Kind != acp.Request {
		// A notification not passed on is dropped; what the handler returns
		// does not matter.
		return nil, "", nil
	}
	by := h.innerBy
	if h.calls == 0 {
		by = p.use.Plug.Name
	}
	resp, err := pl.response(msg, ret, p.use.Plug.OnMessageFallsThrough)
	if err != nil {
		return nil, "", r.handlerError(p, "on_message", fn, err.Error())
	}
	return resp, by, nil
}

// hop is one plug's step of a message. It is the next() of that step,
// which runs the rest, and holds the ctx of the handler's call, so that a
// step costs no allocation of its own.
type hop struct {
	way     *traversal
	k       int
	calls   int
	innerBy string
	ctx     builtins.Ctx
}

var _ starlark.Callable = (*hop)(nil)

func (h *hop) Name() string          { return "next" }
func (h *hop) String() string        { return "<built-in function next>" }
func (h *hop) Type() string          { return "builtin_function_or_method" }
func (h *hop) Freeze()               {}
func (h *hop) Truth() starlark.Bool  { return true }
func (h *hop) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: next") }

// CallInternal is next(message).
func (h *hop) CallInternal(_ *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("next: unexpected keyword arguments; pass the message as the only argument")
	}
	if len(args) != 1 {
		return nil, fmt.Errorf("next: got %d arguments, want 1: the message", len(args))
	}
	passed, ok := args[0].(*builtins.Message)
	if !ok || passed.Msg.Kind == acp.Response {
		return nil, fmt.Errorf("next: want the message (or message.replace(...)), got %s", args[0].Type())
	}
	if h.calls++; h.calls > 1 {
		return nil, fmt.Errorf("next() called twice for one message; call it at most once")
	}
	passed, err := passed.Passed()
	if err != nil {
		return nil, err
	}
	inner, by, err := h.way.step(h.k+1, passed)
	if err != nil {
		return nil, err
	}
	h.innerBy = by
	if inner == nil {
		return starlark.None, nil
	}
	return inner.Passed()
}

// response turns what on_message returned for a request into the response.
// fallsThrough are the places where the handler can end without a return,
// named when it returned None.
func (pl *pipeline) response(msg *builtins.Message, ret starlark.Value, fallsThrough []syntax.Position) (*builtins.Message, error) {
	req, dir := msg.Msg, msg.Direction
	switch v := ret.(type) {
	case *builtins.Message:
		if v.Msg.Kind != acp.Response {
			return nil, fmt.Errorf("returned the request %s itself; return next(message), a result, or request_error(...)", req.Method)
		}
		return v, nil
	case *builtins.RequestError:
		raw, err := v.Encode(req.ID)
		if err != nil {
			return nil, err
		}
		return parsedResponse(dir, raw)
	case starlark.NoneType:
		where := ""
		if len(fallsThrough) > 0 {
			places := make([]string, len(fallsThrough))
			for i, pos := range fallsThrough {
				places[i] = pos.String()
			}
			where = " (it can reach its end without a return after " + strings.Join(places, ", ") + ")"
		}
		return nil, fmt.Errorf("returned None for the request %s%s; return next(message), a result, or request_error(...)", req.Method, where)
	}
	data, err := interp.AppendJSON(nil, ret, "result")
	if err != nil {
		return nil, err
	}
	return parsedResponse(dir, acp.NewResponse(req.ID, data))
}

func parsedResponse(dir string, raw []byte) (*builtins.Message, error) {
	m, err := acp.Parse(raw)
	if err != nil {
		return nil, err
	}
	return builtins.NewMessage(dir, m), nil
}

// fail ends the run because a plug failed on a message (M4).
func (r *Run) fail(err error) {
	r.stopWith(lifecycle.Stop{Reason: lifecycle.Failed, MayResume: r.opts.IdlePolicy.MayResume(lifecycle.Failed, r.opts.Config.Resumable(), nil)}, err)
}
