package builtins

import (
	"fmt"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"go.starlark.net/starlark"
)

// reportChanges implements ctx.report_changes(added, removed, files): the
// summary of the session's changes that sessions lists (+12 −3, 2 files).
// The run records the last one reported, at its pause or with its action.
func (c *Ctx) reportChanges(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var ch lifecycle.Changes
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "added", &ch.Added, "removed", &ch.Removed, "files", &ch.Files); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if ch.Added < 0 || ch.Removed < 0 || ch.Files < 0 {
		return nil, fmt.Errorf("%s: counts are not negative, got added = %d, removed = %d, files = %d", b.Name(), ch.Added, ch.Removed, ch.Files)
	}
	if c.ReportChanges != nil {
		c.ReportChanges(ch)
	}
	return starlark.None, nil
}
