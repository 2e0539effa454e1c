// Package starfmt formats Starlark files (plugs, configurations, modules) in
// the one accepted style: buildifier's, through bazelbuild/buildtools.
package starfmt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/bazelbuild/buildtools/build"
	"go.starlark.net/syntax"

	"github.com/blaiseagent/blaise-agent/internal/support/atomicfile"
	"github.com/blaiseagent/blaise-agent/internal/support/walk"
	"github.com/blaiseagent/blaise-agent/interp"
)

// Ext is the extension of the files Find lists.
const Ext = ".star"

// Source returns src, the content of the file at path, formatted. A file
// that does not parse as Starlark of this dialect is refused with the
// error check gives; the result is checked to parse and to mean what src
// meant, so that a file is never rewritten into another program.
func Source(path string, src []byte) ([]byte, error) {
	f, err := interp.FileOptions.Parse(path, src, 0)
	if err != nil {
		return nil, interp.WithHint(err, path, src)
	}
	n := newNames(src)
	bf, err := build.ParseDefault(path, disguise(f, src, n))
	if err != nil {
		return nil, fmt.Errorf("%s: the formatter cannot read this file (%v): it is left as it is", path, err)
	}
	doubleQuote(bf)
	out, err := restore(path, build.Format(bf), n)
	var g *syntax.File
	if err == nil {
		g, err = interp.FileOptions.Parse(path, out, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: formatting would make the file not parse (%v): the file is left as it is", path, err)
	}
	if shape(g) != shape(f) {
		return nil, fmt.Errorf("%s: formatting would change what the file means: the file is left as it is", path)
	}
	return out, nil
}

// File formats the file at path. With write, a file that changes is
// rewritten in place (its mode kept); changed says whether it would change.
func File(path string, write bool) (changed bool, err error) {
	src, err := interp.ReadSource(path)
	if err != nil {
		return false, err
	}
	out, err := Source(path, src)
	if err != nil {
		return false, err
	}
	if bytes.Equal(out, src) {
		return false, nil
	}
	if write {
		info, err := os.Stat(path)
		if err != nil {
			return true, err
		}
		if err := atomicfile.Write(path, out, info.Mode().Perm(), false); err != nil {
			return true, fmt.Errorf("%s: %w", path, err)
		}
	}
	return true, nil
}

// Find lists the .star files under paths, as walk.Files does.
func Find(paths []string) ([]string, error) { return walk.Files(paths, Ext) }

// Unformatted is the error of a check that found files to format; a
// command exits with its ExitCode.
type Unformatted struct{ Files []string }

func (e *Unformatted) Error() string {
	return fmt.Sprintf("%d file(s) not formatted: run blaise-agent fmt", len(e.Files))
}

// ExitCode is 1, as for gofmt -l in CI scripts.
func (e *Unformatted) ExitCode() int { return 1 }

// Run formats the .star files under paths, writing the names of those that
// changed (or with check, that would change) to w. A file that cannot be
// formatted is reported and the others are still done.
func Run(paths []string, check bool, w io.Writer) error {
	files, err := Find(paths)
	if err != nil {
		return err
	}
	var errs []error
	var changed []string
	for _, p := range files {
		ch, err := File(p, !check)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ch {
			changed = append(changed, p)
			fmt.Fprintln(w, p)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if check && len(changed) > 0 {
		return &Unformatted{Files: changed}
	}
	return nil
}
