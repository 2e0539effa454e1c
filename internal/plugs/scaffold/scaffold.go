// Package scaffold writes a new project's first files (blaise-agent init):
// a configuration, a plug, and a test of it that passes.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed template
var template embed.FS

// Init writes the template's files under dir, creating it as needed, and
// returns their paths. It writes nothing when any of them exists.
func Init(dir string) ([]string, error) {
	var rels []string
	err := fs.WalkDir(template, "template", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel("template", p)
			rels = append(rels, rel)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var exist []error
	for _, rel := range rels {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			exist = append(exist, fmt.Errorf("%s exists", filepath.Join(dir, rel)))
		}
	}
	if len(exist) > 0 {
		return nil, fmt.Errorf("%w; nothing was written", errors.Join(exist...))
	}
	var written []string
	for _, rel := range rels {
		data, err := template.ReadFile("template/" + filepath.ToSlash(rel))
		if err != nil {
			return written, err
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		// O_EXCL: a file made since the check above is not overwritten.
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return written, err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}
