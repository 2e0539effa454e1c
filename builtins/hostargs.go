package builtins

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.starlark.net/starlark"
)

// stringOrBytes returns the contents of a string or bytes value.
func stringOrBytes(v starlark.Value) (string, bool) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), true
	case starlark.Bytes:
		return string(v), true
	}
	return "", false
}

// argStrings converts a list or tuple of strings.
func argStrings(fn, param string, v starlark.Value) ([]string, error) {
	var seq starlark.Indexable
	switch v := v.(type) {
	case *starlark.List:
		seq = v
	case starlark.Tuple:
		seq = v
	default:
		return nil, fmt.Errorf("%s: %s: want list of strings, got %s", fn, param, v.Type())
	}
	if seq.Len() == 0 {
		return nil, fmt.Errorf("%s: %s: must not be empty", fn, param)
	}
	out := make([]string, seq.Len())
	for i := range out {
		s, ok := seq.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: %s[%d]: want string, got %s", fn, param, i, seq.Index(i).Type())
		}
		out[i] = string(s)
	}
	return out, nil
}

// argOptString converts a string or None ("").
func argOptString(fn, param string, v starlark.Value) (string, error) {
	if v == starlark.None {
		return "", nil
	}
	s, ok := v.(starlark.String)
	if !ok {
		return "", fmt.Errorf("%s: %s: want string or None, got %s", fn, param, v.Type())
	}
	return string(s), nil
}

// argEnv converts a dict of strings to strings, or None (nil).
func argEnv(fn string, v starlark.Value) (map[string]string, error) {
	if v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("%s: env: want dict of strings, got %s", fn, v.Type())
	}
	env := make(map[string]string, d.Len())
	for k, val := range d.Entries() {
		ks, ok := k.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: env: want string keys, got %s", fn, k.Type())
		}
		vs, ok := val.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("%s: env[%s]: want string, got %s", fn, ks, val.Type())
		}
		env[string(ks)] = string(vs)
	}
	return env, nil
}

// argTimeout converts seconds (int or float) or None (0).
func argTimeout(fn string, v starlark.Value) (time.Duration, error) {
	var secs float64
	switch v := v.(type) {
	case starlark.NoneType:
		return 0, nil
	case starlark.Int:
		secs = float64(v.Float())
	case starlark.Float:
		secs = float64(v)
	default:
		return 0, fmt.Errorf("%s: timeout: want seconds as int or float, got %s", fn, v.Type())
	}
	if !(secs > 0) || math.IsInf(secs, 0) || secs > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("%s: timeout: want a positive number of seconds, got %v", fn, v)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// hostError is an error of a host call as the plug sees it; it keeps the
// host's error for errors.Is.
type hostError struct {
	msg string
	err error
}

func (e *hostError) Error() string { return e.msg }

func (e *hostError) Unwrap() error { return e.err }

// prefixErr names the call fn in err unless the host already did
// (`exec "x": …`).
func prefixErr(fn string, err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, fn+" ") || strings.HasPrefix(msg, fn+":") {
		return err
	}
	return &hostError{msg: fn + ": " + msg, err: err}
}

// stderrTailLines is how many of the last lines of stderr a failed checked
// exec reports.
const stderrTailLines = 10

// stderrTail formats the last lines of stderr for an error message, or ""
// if there are none.
func stderrTail(stderr []byte) string {
	s := strings.TrimRight(string(stderr), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > stderrTailLines {
		lines = lines[len(lines)-stderrTailLines:]
	}
	const maxLine = 500
	for i, l := range lines {
		if len(l) > maxLine {
			lines[i] = l[:maxLine] + "…"
		}
	}
	return "; stderr:\n  " + strings.Join(lines, "\n  ")
}
