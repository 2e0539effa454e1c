package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd units of docs/systemd pass `systemd-analyze verify`, with
// the binary they name replaced by an executable that exists.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		const msg = "systemd-analyze is not installed: the units of docs/systemd are not verified"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " — but not under CI=true")
		}
		t.Skip(msg)
	}
	units, err := filepath.Glob("systemd/*.service")
	if err != nil || len(units) != 2 {
		t.Fatalf("units: %v, %v; want serve's and listen's", units, err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range units {
		text, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "ExecStart=/usr/local/bin/blaise-agent ") {
			t.Fatalf("%s: no ExecStart=/usr/local/bin/blaise-agent", unit)
		}
		name := strings.Replace(filepath.Base(unit), "@.", "@demo.", 1) // an instance of a template
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), "/usr/local/bin/blaise-agent", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		if err != nil || strings.Contains(string(out), name) {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}
