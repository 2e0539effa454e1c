package builtins

import (
	"fmt"
	"sort"

	"github.com/blaiseagent/blaise-agent/internal/support/redact"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// redactModule is `redact`: secret values replaced by [REDACTED:name] at
// Go's speed, in text, in whole messages and in streams of chunks.
var redactModule = &starlarkstruct.Module{
	Name: "redact",
	Members: starlark.StringDict{
		"secrets": starlark.NewBuiltin("redact.secrets", redactSecrets),
	},
}

// secretsArg unpacks a dict of secret values by name.
type secretsArg struct{ secrets []redact.Secret }

func (a *secretsArg) Unpack(v starlark.Value) error {
	d, ok := v.(starlark.IterableMapping)
	if !ok {
		return fmt.Errorf("want a dict of secret values by name, got %s", v.Type())
	}
	for _, kv := range d.Items() {
		name, ok1 := starlark.AsString(kv[0])
		value, ok2 := starlark.AsString(kv[1])
		if !ok1 || !ok2 {
			return fmt.Errorf("want string names and values, got %s: %s", kv[0].Type(), kv[1].Type())
		}
		a.secrets = append(a.secrets, redact.Secret{Name: name, Value: value})
	}
	sort.Slice(a.secrets, func(i, j int) bool { return a.secrets[i].Name < a.secrets[j].Name })
	return nil
}

// redactionsKey is the thread local holding the run's *redact.Registry.
const redactionsKey = "blaise.redactions"

// SetRedactions makes redact.secrets, called on thread, register its values
// in g: the run then redacts them from all it lets out, logs and errors
// included, which no plug's redactor reaches.
func SetRedactions(thread *starlark.Thread, g *redact.Registry) {
	thread.SetLocal(redactionsKey, g)
}

func redactSecrets(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s secretsArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "secrets", &s); err != nil {
		return nil, err
	}
	r, err := redact.New(s.secrets)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	if g, ok := thread.Local(redactionsKey).(*redact.Registry); ok && g != nil {
		if err := g.Register(s.secrets); err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
	}
	return &Redactor{r: r, n: len(s.secrets)}, nil
}

// Redactor is what redact.secrets returns.
type Redactor struct {
	interp.Opaque[*Redactor]

	r *redact.Redactor
	n int
}

var _ starlark.HasAttrs = (*Redactor)(nil)

func (r *Redactor) String() string { return fmt.Sprintf("redactor(%d secrets)", r.n) }
func (r *Redactor) Type() string   { return "redactor" }

var redactorMethods = map[string]*starlark.Builtin{
	"message": starlark.NewBuiltin("message", redactorMessage),
	"stream":  starlark.NewBuiltin("stream", redactorStream),
	"text":    starlark.NewBuiltin("text", redactorText),
}

func (r *Redactor) Attr(name string) (starlark.Value, error) {
	if b := redactorMethods[name]; b != nil {
		return b.BindReceiver(r), nil
	}
	return nil, nil
}

func (r *Redactor) AttrNames() []string { return methodNames(redactorMethods) }

func redactorText(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "text", &s); err != nil {
		return nil, err
	}
	return starlark.String(b.Receiver().(*Redactor).r.String(s)), nil
}

// redactorMessage returns the message with every secret of its params,
// result or error replaced, in the JSON as it is, so that a message with
// none is the same message, byte for byte.
func redactorMessage(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var m *Message
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "message", &m); err != nil {
		return nil, err
	}
	r := b.Receiver().(*Redactor).r
	enc, err := m.Encode()
	if err != nil {
		return nil, err
	}
	out := enc
	if p := r.Bytes(enc.Params); !sameBytes(p, enc.Params) {
		out = out.WithParams(p)
	}
	if res := r.Bytes(enc.Result); !sameBytes(res, enc.Result) {
		out = out.WithResult(res)
	}
	if e := r.Bytes(enc.Error); !sameBytes(e, enc.Error) {
		out = out.WithError(e)
	}
	if out == m.Msg {
		return m, nil
	}
	return NewMessage(m.Direction, out), nil
}

// sameBytes reports whether Bytes gave back its input: nothing replaced.
func sameBytes(out, in []byte) bool {
	return len(out) == len(in) && (len(in) == 0 || &out[0] == &in[0])
}

func redactorStream(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return &RedactStream{s: b.Receiver().(*Redactor).r.Stream()}, nil
}

// RedactStream is a redactor's stream of text pieces (redact.Stream).
type RedactStream struct {
	interp.Opaque[*RedactStream]
	s *redact.Stream
}

var _ starlark.HasAttrs = (*RedactStream)(nil)

func (s *RedactStream) String() string { return "redact_stream" }
func (s *RedactStream) Type() string   { return "redact_stream" }

var streamMethods = map[string]*starlark.Builtin{
	"flush": starlark.NewBuiltin("flush", streamFlush),
	"next":  starlark.NewBuiltin("next", streamNext),
}

func (s *RedactStream) Attr(name string) (starlark.Value, error) {
	if name == "held" {
		return starlark.Bool(s.s.Held()), nil
	}
	if b := streamMethods[name]; b != nil {
		return b.BindReceiver(s), nil
	}
	return nil, nil
}

func (s *RedactStream) AttrNames() []string { return append(methodNames(streamMethods), "held") }

func streamNext(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var piece string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "piece", &piece); err != nil {
		return nil, err
	}
	return starlark.String(b.Receiver().(*RedactStream).s.Next(piece)), nil
}

func streamFlush(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.String(b.Receiver().(*RedactStream).s.Flush()), nil
}
