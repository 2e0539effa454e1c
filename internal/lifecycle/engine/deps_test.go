package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEngineImportsNoStarlark: the control plane imports no Starlark: not
// the interpreter, the plug API, the chain runner or the host daemon.
func TestEngineImportsNoStarlark(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	banned := []string{"go.starlark.net", "/interp", "/builtins", "/runner", "/hosts/hostd", "/hosts"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) || strings.HasSuffix(dep, "blaise-agent"+b) {
				t.Errorf("blaise depends on %s", dep)
			}
		}
	}
}
