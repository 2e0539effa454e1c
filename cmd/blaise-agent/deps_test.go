package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The layers of the module, as go list sees the packages' imports (tests
// aside): each rule names packages and the dependencies they must not have.

const module = "github.com/blaiseagent/blaise-agent"

// deps lists what the packages of patterns (and, with tests, their tests)
// depend on, directly or not.
func deps(t *testing.T, tests bool, patterns ...string) map[string][]string {
	t.Helper()
	args := []string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}
	if tests {
		args = append(args, "-test")
	}
	args = append(args, patterns...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(patterns, " "), err, out)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		imps := f[1:]
		if len(imps) > 0 && strings.HasPrefix(imps[0], "[") {
			imps = imps[1:] // the package as its tests compile it
		}
		imports[f[0]] = append(imports[f[0]], imps...)
	}
	return imports
}

// forbid fails for each import by which patterns come to depend on a
// package that banned says is forbidden: the edge into the forbidden.
func forbid(t *testing.T, tests bool, banned func(pkg string) bool, patterns ...string) {
	t.Helper()
	imports := deps(t, tests, patterns...)
	var edges []string
	for pkg, imps := range imports {
		for _, imp := range imps {
			if !banned(pkg) && banned(imp) {
				edges = append(edges, pkg+" imports "+imp)
			}
		}
	}
	slices.Sort(edges)
	for _, e := range edges {
		t.Errorf("%s", strings.ReplaceAll(e, module+"/", ""))
	}
}

// The control plane runs no plug: the lifecycle's types and its
// engine import no Starlark, no interpreter, plug API, chain runner or host.
func TestTheLifecycleAndItsEngineImportNoStarlark(t *testing.T) {
	forbid(t, false, func(pkg string) bool {
		if strings.HasPrefix(pkg, "go.starlark.net") {
			return true
		}
		for _, p := range []string{"/interp", "/builtins", "/hosts", "/internal/chain", "/internal/plugs"} {
			if pkg == module+p || strings.HasPrefix(pkg, module+p+"/") {
				return true
			}
		}
		return false
	}, module+"/internal/lifecycle", module+"/internal/lifecycle/engine")
}

// A store keeps what the engine decides, and the engine takes any store:
// no store depends on the engine, not even in its tests.
func TestNoStoreImportsTheEngine(t *testing.T) {
	forbid(t, true, func(pkg string) bool {
		return pkg == module+"/internal/lifecycle/engine" || strings.HasPrefix(pkg, module+"/internal/lifecycle/engine/")
	}, module+"/internal/store/...")
}

// A runner (listen) and the server's API client speak HTTP to it and link
// none of it: no SQL driver, no dashboard, not the server's package.
func TestTheServersClientsLinkNoSQLDriverNoDashboardAndNoServer(t *testing.T) {
	forbid(t, false, func(pkg string) bool {
		switch {
		case pkg == "database/sql", strings.HasPrefix(pkg, "modernc.org/sqlite"), strings.HasPrefix(pkg, "github.com/jackc/pgx"):
			return true
		case pkg == module+"/internal/server", strings.HasPrefix(pkg, module+"/internal/server/dashboard"), strings.HasPrefix(pkg, module+"/internal/store/sqlstore"):
			return true
		}
		return false
	}, module+"/internal/server/listen", module+"/internal/server/apiclient")
}
