package interp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blaiseagent/blaise-agent/interp"
)

// FuzzLoadConfig loads arbitrary configurations next to a fixed plug: the
// loader never panics, and every error it returns says where.
func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []string{
		`agent(command = "a")`,
		`agent(command = "a"); setup(use("./p.star", id = "x", inputs = {"n": 1}))`,
		`agent(command = "a"); setup(use("blaise:greet", inputs = {"who": lambda s: s.run.kind}))`,
		`load("./p.star", "x")`,
		`agent(command = "a", args = ["x"], env = {"A": "b"}, cwd = "/tmp")` + "\nsetup(use(\"./p.star\"), use(\"./p.star\"))",
		"agent(command = \"a\")\ndef f(:\n",
		`setup(use("./missing.star"))`,
		`agent(command = "a"); setup(use("/dev/zero"))`,
		`agent(command = "a"); setup(use("./p.star", id = "../x"))`,
		`load("/dev/zero", "x")`,
		`agent(command = "a"); setup(use("git+file:///r//p.star@v1"))`,
		`load("git+https://h/r//p.star@", "x")`,
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	plug := `plug(name = "p", inputs = schema.object(n = schema.int(default = 0)), persisted = schema.optional(schema.object(k = schema.string())))
def on_session(ctx, next):
    next()
`
	if err := os.WriteFile(filepath.Join(dir, "p.star"), []byte(plug), 0o644); err != nil {
		f.Fatal(err)
	}
	stdlib := fstest.MapFS{"greet.star": {Data: []byte(`plug(name = "g", inputs = schema.object(who = schema.string()))`)}}
	f.Fuzz(func(t *testing.T, src string) {
		path := filepath.Join(dir, "blaise.star")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		l := &interp.Loader{Stdlib: stdlib}
		cfg, err := l.LoadConfig(path)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, ".star") && !strings.Contains(msg, "blaise:") {
				t.Fatalf("error does not say where: %q", msg)
			}
			return
		}
		if cfg.Agent.Command == "" {
			t.Fatal("a configuration loaded without an agent command")
		}
	})
}
