package docs_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The limits of production code (every .go file but tests): past them a
// file, type or function holds more than one reader keeps in mind.
const (
	maxFileLines      = 700
	maxTypeMethods    = 30
	maxFuncComplexity = 30
)

// sizeExceptions are what may exceed a limit, each with its reason. Keys:
// a file's path ("internal/x/y.go"), a type ("internal/x.T") or a function
// ("internal/x.F", "internal/x.T.M"), from the module's root.
var sizeExceptions = map[string]string{}

// TestSizesWithinLimits: no production file has more than maxFileLines
// lines, no type more than maxTypeMethods methods, no function a
// cyclomatic complexity above maxFuncComplexity, but for sizeExceptions;
// and every exception is still needed.
func TestSizesWithinLimits(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	methods := map[string]int{} // type key -> methods
	var over []string
	used := map[string]bool{}
	check := func(key string, n, limit int, what string) {
		if n <= limit {
			return
		}
		if _, ok := sizeExceptions[key]; ok {
			used[key] = true
			return
		}
		over = append(over, fmt.Sprintf("%s: %d %s, over %d", key, n, what, limit))
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		// One build's files: a method of two platforms' files counts once.
		if ok, err := build.Default.MatchFile(filepath.Dir(path), name); err != nil || !ok {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		check(rel, strings.Count(string(src), "\n"), maxFileLines, "lines")
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			key := pkg + "." + fn.Name.Name
			if recv := receiverType(fn); recv != "" {
				methods[pkg+"."+recv]++
				key = pkg + "." + recv + "." + fn.Name.Name
			}
			check(key, complexity(fn), maxFuncComplexity, "of cyclomatic complexity")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for typ, n := range methods {
		check(typ, n, maxTypeMethods, "methods")
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("%s: split it by concern, or add it to sizeExceptions with the reason", o)
	}
	for key, reason := range sizeExceptions {
		if !used[key] {
			t.Errorf("sizeExceptions[%q] (%s) is within the limits now: remove it", key, reason)
		}
	}
}

// receiverType is the name of the type whose method fn is, "" for a
// function.
func receiverType(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// complexity is fn's cyclomatic complexity as gocyclo counts it: 1, plus
// one for each if, for, range, non-default case and select case, && and
// ||, function literals included.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
