// Package walk lists the files of a kind under the paths a command is
// given, as blaise-agent test and fmt take them.
package walk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Files lists the files whose names end in ext under paths, sorted: a path
// names such a file, or a directory searched recursively (a trailing "/..."
// is allowed and means the same), skipping directories whose names begin
// with "." and node_modules. No paths means ".".
func Files(paths []string, ext string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var out []string
	for _, p := range paths {
		p = strings.TrimSuffix(strings.TrimSuffix(p, "..."), "/")
		if p == "" {
			p = "."
		}
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory (want a directory or a file ending in %s)", p, ext)
		}
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			if !strings.HasSuffix(p, ext) {
				return nil, fmt.Errorf("%s: want a directory or a file ending in %s", p, ext)
			}
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && q != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(q, ext) {
				out = append(out, q)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
