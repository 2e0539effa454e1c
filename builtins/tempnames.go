package builtins

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/hosts"
	"go.starlark.net/starlark"
)

// countTempNamesKey is the thread local that makes host.fs.mkdtemp count.
const countTempNamesKey = "blaise.count_temp_names"

// CountTempNames makes host.fs.mkdtemp of the plugs on thread name its
// directories PREFIX1, PREFIX2 … (the first name free on the host) rather
// than at random, so that goldens of blaise-agent test can hold them.
func CountTempNames(thread *starlark.Thread) { thread.SetLocal(countTempNamesKey, true) }

// countedTemp makes a new directory where MkdirTemp would, named by
// prefix's last element and the first count free there. The host's own
// MkdirTemp says where (prefix with a slash, dir, the host's tmpdir); its
// directory is removed once the counted one is made.
func countedTemp(ctx context.Context, hfs hosts.FS, dir, prefix string) (string, error) {
	random, err := hfs.MkdirTemp(ctx, dir, prefix)
	if err != nil {
		return "", err
	}
	stem := prefix[strings.LastIndex(prefix, "/")+1:]
	var p string
	for n := 1; ; n++ {
		p = path.Join(path.Dir(random), stem+strconv.Itoa(n))
		if err = hfs.Mkdir(ctx, p, 0o700, false); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if rmErr := hfs.Remove(ctx, random, true, false); err == nil {
		err = rmErr
	}
	return p, err
}
