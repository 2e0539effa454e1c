package builtins

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
)

// Directions of a message as plugs see them (M4).
const (
	ToAgent   = "to_agent"
	FromAgent = "from_agent"
)

// Message is the message value of on_message: a request, a notification,
// or (as returned by next for a request) a response. Its params or result
// are decoded only when a plug reads them, and re-encoded only when a plug
// changed them, so a message no plug touched travels byte for byte (M4).
type Message struct {
	interp.Opaque[*Message]

	Direction string
	Msg       *acp.Message

	body     starlark.Value // decoded params or result; nil until read
	replaced bool           // body was given by replace()
}

var (
	_ starlark.HasAttrs = (*Message)(nil)
	_ starlark.Mapping  = (*Message)(nil)
	_ json.Marshaler    = (*Message)(nil)
)

// NewMessage wraps m for plugs.
func NewMessage(direction string, m *acp.Message) *Message {
	return &Message{Direction: direction, Msg: m}
}

func (m *Message) String() string {
	if m.Msg.Kind == acp.Response {
		return fmt.Sprintf("message(response, id = %s)", m.Msg.ID)
	}
	return fmt.Sprintf("message(%s %s %s)", m.Direction, m.Msg.Kind, m.Msg.Method)
}
func (m *Message) Type() string { return "message" }

var messageAttrs = []string{"direction", "error", "id", "kind", "method", "params", "replace", "result"}

func (m *Message) AttrNames() []string { return messageAttrs }

// Get makes message["params"] the same as message.params, for every
// member of the message (not the method replace).
func (m *Message) Get(k starlark.Value) (starlark.Value, bool, error) {
	name, ok := k.(starlark.String)
	if !ok || name == "replace" || !slices.Contains(messageAttrs, string(name)) {
		return nil, false, nil
	}
	v, err := m.Attr(string(name))
	return v, err == nil, err
}

// MarshalJSON is json.encode(message): the message as it would leave the
// plug now.
func (m *Message) MarshalJSON() ([]byte, error) {
	out, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return out.Raw, nil
}

// raw returns the JSON of the message's body member: params, or result.
func (m *Message) raw() []byte {
	if m.Msg.Kind == acp.Response {
		return m.Msg.Result
	}
	return m.Msg.Params
}

func (m *Message) Attr(name string) (starlark.Value, error) {
	switch name {
	case "direction":
		return starlark.String(m.Direction), nil
	case "method":
		return starlark.String(m.Msg.Method), nil
	case "kind":
		return starlark.String(m.Msg.Kind.String()), nil
	case "id":
		if m.Msg.ID == nil {
			return starlark.None, nil
		}
		return interp.FromJSON(m.Msg.ID)
	case "params", "result":
		if (name == "result") != (m.Msg.Kind == acp.Response) {
			return starlark.None, nil
		}
		return m.decodedBody()
	case "error":
		if m.Msg.Error == nil {
			return starlark.None, nil
		}
		return interp.DecodeObjects(m.Msg.Error, "message.error")
	case "replace":
		return starlark.NewBuiltin("replace", m.replace), nil
	}
	return nil, noSuchAttr("message", name, messageAttrs)
}

func (m *Message) decodedBody() (starlark.Value, error) {
	if m.body != nil {
		return m.body, nil
	}
	raw := m.raw()
	if raw == nil {
		m.body = starlark.None
		return m.body, nil
	}
	v, err := interp.DecodeObjects(raw, "message."+m.member())
	if err != nil {
		return nil, err
	}
	m.body = v
	return v, nil
}

// member names the body's member: params, or result.
func (m *Message) member() string {
	if m.Msg.Kind == acp.Response {
		return "result"
	}
	return "params"
}

func (m *Message) replace(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackArgs("replace", args, kwargs, m.member(), &v); err != nil {
		return nil, err
	}
	return &Message{Direction: m.Direction, Msg: m.Msg, body: v, replaced: true}, nil
}

// Passed returns m as the plug it is passed to gets it: as it would come
// off the wire, so that every JSON object in it, one a plug wrote as a
// dict too, is an object again. A body that is not JSON fails here, at the
// plug that passed it.
func (m *Message) Passed() (*Message, error) {
	if m.body == nil {
		return m, nil
	}
	out, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return NewMessage(m.Direction, out), nil
}

// Encode returns the message as it leaves the plug: the original when its
// body is unchanged, otherwise the original with only what changed in the
// body re-encoded (M4).
func (m *Message) Encode() (*acp.Message, error) {
	if m.body == nil || !m.replaced && m.raw() == nil && m.body == starlark.None {
		// Not read, or read where there was nothing: unchanged.
		return m.Msg, nil
	}
	what := m.member()
	orig := m.raw()
	var data []byte
	var changed bool
	var err error
	if orig == nil || m.replaced && m.body == starlark.None {
		data, err = interp.AppendJSON(nil, m.body, what)
		changed = true
	} else {
		data, changed, err = interp.PatchJSON(orig, m.body, what)
	}
	if err != nil || !changed {
		return m.Msg, err
	}
	if m.Msg.Kind == acp.Response {
		// A result replaces an error: a response carries one of the two.
		out := m.Msg
		if out.Error != nil {
			out = out.WithError(nil)
		}
		return out.WithResult(data), nil
	}
	return m.Msg.WithParams(data), nil
}

// RequestError is what request_error(code, message, data = None) returns:
// an answer to a request with a JSON-RPC error (M4).
type RequestError struct {
	interp.Opaque[*RequestError]

	Code    int
	Message string
	Data    starlark.Value
}

var _ starlark.HasAttrs = (*RequestError)(nil)

func (e *RequestError) String() string {
	return fmt.Sprintf("request_error(%d, %q)", e.Code, e.Message)
}
func (e *RequestError) Type() string        { return "request_error" }
func (e *RequestError) Freeze()             { e.Data.Freeze() }
func (e *RequestError) AttrNames() []string { return []string{"code", "data", "message"} }

func (e *RequestError) Attr(name string) (starlark.Value, error) {
	switch name {
	case "code":
		return starlark.MakeInt(e.Code), nil
	case "message":
		return starlark.String(e.Message), nil
	case "data":
		return e.Data, nil
	}
	return nil, noSuchAttr("request_error", name, e.AttrNames())
}

// Encode returns the error response to the request with id.
func (e *RequestError) Encode(id []byte) ([]byte, error) {
	var data []byte
	if e.Data != starlark.None {
		var err error
		if data, err = interp.AppendJSON(nil, e.Data, "request_error.data"); err != nil {
			return nil, err
		}
	}
	return acp.NewErrorResponse(id, e.Code, e.Message, data), nil
}

var requestError = starlark.NewBuiltin("request_error", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	e := &RequestError{Data: starlark.None}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "code", &e.Code, "message", &e.Message, "data?", &e.Data); err != nil {
		return nil, err
	}
	e.Freeze()
	return e, nil
})
