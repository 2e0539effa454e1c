package builtins

import (
	"strings"

	"github.com/charmbracelet/log"
	"go.starlark.net/starlark"

	"github.com/blaiseagent/blaise-agent/interp"
)

// Log is ctx.log: debug, info, warn and error on the runner's logger, with
// the plug's name as prefix. Positional arguments are joined by spaces;
// keyword arguments become key=value pairs.
type Log struct {
	interp.Opaque[*Log]

	Logger *log.Logger
	ctx    *Ctx // nil outside a handler call: no LogLine
}

var _ starlark.HasAttrs = (*Log)(nil)

func (l *Log) String() string      { return "log" }
func (l *Log) Type() string        { return "log" }
func (l *Log) AttrNames() []string { return []string{"debug", "error", "info", "warn"} }

func (l *Log) Attr(name string) (starlark.Value, error) {
	var level log.Level
	switch name {
	case "debug":
		level = log.DebugLevel
	case "info":
		level = log.InfoLevel
	case "warn":
		level = log.WarnLevel
	case "error":
		level = log.ErrorLevel
	default:
		return nil, noSuchAttr("log", name, l.AttrNames())
	}
	return starlark.NewBuiltin("log."+name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if l.ctx != nil {
			if err := l.ctx.check(); err != nil {
				return nil, err
			}
		}
		msg, keyvals := logArgs(args, kwargs)
		l.Logger.Log(level, msg, keyvals...)
		if l.ctx != nil && l.ctx.LogLine != nil && level >= l.Logger.GetLevel() {
			l.ctx.LogLine(level, msg, keyvals)
		}
		return starlark.None, nil
	}), nil
}

func logArgs(args starlark.Tuple, kwargs []starlark.Tuple) (string, []any) {
	parts := make([]string, len(args))
	for i, a := range args {
		if s, ok := starlark.AsString(a); ok {
			parts[i] = s
		} else {
			parts[i] = a.String()
		}
	}
	keyvals := make([]any, 0, 2*len(kwargs))
	for _, kv := range kwargs {
		k, _ := starlark.AsString(kv[0])
		var v any = kv[1].String()
		if s, ok := starlark.AsString(kv[1]); ok {
			v = s
		} else if i, ok := kv[1].(starlark.Int); ok {
			// A number in a JSON log, written as before in text.
			if n, ok := i.Int64(); ok {
				v = n
			}
		}
		keyvals = append(keyvals, k, v)
	}
	return strings.Join(parts, " "), keyvals
}
