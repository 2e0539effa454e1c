package builtins

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/interp"
)

// PauseInfo wraps a pause for Starlark: what next() returns in on_session (C3), and, with
// Teardown set, what it returns in on_teardown (C8).
type PauseInfo struct {
	interp.Inert

	lifecycle.Pause
	Teardown bool // a TeardownInfo: no may_resume
}

var _ starlark.HasAttrs = (*PauseInfo)(nil)

func (p *PauseInfo) String() string {
	if p.Teardown {
		return fmt.Sprintf("TeardownInfo(reason = %q, error = %s)", p.Reason, p.errorValue())
	}
	return fmt.Sprintf("PauseInfo(reason = %q, may_resume = %s, error = %s)", p.Reason, starlark.Bool(p.MayResume), p.errorValue())
}

func (p *PauseInfo) Type() string {
	if p.Teardown {
		return "TeardownInfo"
	}
	return "PauseInfo"
}

func (p *PauseInfo) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: %s", p.Type()) }

func (p *PauseInfo) errorValue() starlark.Value {
	if p.Err == nil {
		return starlark.None
	}
	return starlark.String(p.Err.Error())
}

func (p *PauseInfo) Attr(name string) (starlark.Value, error) {
	switch name {
	case "reason":
		return starlark.String(string(p.Reason)), nil
	case "may_resume":
		if !p.Teardown {
			return starlark.Bool(p.MayResume), nil
		}
	case "error":
		return p.errorValue(), nil
	}
	return nil, noSuchAttr(p.Type(), name, p.AttrNames())
}

func (p *PauseInfo) AttrNames() []string {
	if p.Teardown {
		return []string{"error", "reason"}
	}
	return []string{"error", "may_resume", "reason"}
}
