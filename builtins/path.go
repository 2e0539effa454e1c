package builtins

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// pathModule is `path`: slash-separated paths, as on the hosts plugs reach
// (Go's path package), with the two questions plugs that guard files ask:
// is a path within a directory, and does it match a glob.
var pathModule = &starlarkstruct.Module{
	Name: "path",
	Members: starlark.StringDict{
		"base":   pathFunc1("path.base", path.Base),
		"clean":  pathFunc1("path.clean", path.Clean),
		"dir":    pathFunc1("path.dir", path.Dir),
		"ext":    pathFunc1("path.ext", path.Ext),
		"is_abs": starlark.NewBuiltin("path.is_abs", pathIsAbs),
		"join":   starlark.NewBuiltin("path.join", pathJoin),
		"match":  starlark.NewBuiltin("path.match", pathMatch),
		"within": starlark.NewBuiltin("path.within", pathWithin),
	},
}

// pathFunc1 is a function of one path.
func pathFunc1(name string, f func(string) string) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var p string
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &p); err != nil {
			return nil, err
		}
		return starlark.String(f(p)), nil
	})
}

func pathIsAbs(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var p string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &p); err != nil {
		return nil, err
	}
	return starlark.Bool(path.IsAbs(p)), nil
}

// pathJoin joins its arguments and cleans the result; an absolute argument
// starts over, as a shell's cd would, so path.join(root, p) resolves p
// against root.
func pathJoin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword arguments", b.Name())
	}
	parts := make([]string, 0, len(args))
	for i, a := range args {
		s, ok := starlark.AsString(a)
		if !ok {
			return nil, fmt.Errorf("%s: argument %d: got %s, want string", b.Name(), i+1, a.Type())
		}
		if path.IsAbs(s) {
			parts = parts[:0]
		}
		parts = append(parts, s)
	}
	return starlark.String(path.Join(parts...)), nil
}

// pathWithin reports whether p is root or below it, after cleaning both:
// "/w/src/../../etc" is not within "/w".
func pathWithin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var p, root string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &p, "root", &root); err != nil {
		return nil, err
	}
	p, root = path.Clean(p), path.Clean(root)
	return starlark.Bool(p == root || root == "/" && path.IsAbs(p) || strings.HasPrefix(p, root+"/")), nil
}

// pathMatch reports whether p matches a glob: * and ? within a directory,
// ** across directories ("src/**" is everything below src, "**/*.go" every
// .go file); everything else stands for itself.
func pathMatch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var glob, p string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "glob", &glob, "path", &p); err != nil {
		return nil, err
	}
	re, err := cachedPattern(globPattern(glob))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err) // not reached: every glob is a pattern
	}
	return starlark.Bool(re.full.MatchString(p)), nil
}

// globPart finds the parts of a glob.
var globPart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*/|\*\*|\*|\?|[^*?]+`) })

// globPattern is the regular expression of a glob.
func globPattern(glob string) string {
	return globPart().ReplaceAllStringFunc(glob, func(part string) string {
		switch part {
		case "**/":
			return "(?:.*/)?"
		case "**":
			return ".*"
		case "*":
			return "[^/]*"
		case "?":
			return "[^/]"
		}
		return regexp.QuoteMeta(part)
	})
}
