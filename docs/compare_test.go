package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheBuildsOfCompareBuildsApplyToHEAD: every build that performance.md's
// command of compare-builds.sh names (NAME=SPEC) can be made from the tree
// as it is: each patch file and each commit's change, applied or taken back
// in order as the script does, applies. A change to the code an
// optimisation lives in must bring its patch along, or the figure of what
// the optimisation pays can no longer be measured again. A commit missing
// from a shallow clone is said, not checked.
func TestTheBuildsOfCompareBuildsApplyToHEAD(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	text, err := os.ReadFile("performance.md")
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for line := range strings.Lines(string(text)) {
		if rest, ok := strings.CutPrefix(line, "docs/compare-builds.sh scanner="); ok {
			specs = strings.Fields("scanner=" + rest)
			break
		}
	}
	if len(specs) < 5 {
		t.Fatalf("performance.md's command of compare-builds.sh not found, or with %d builds", len(specs))
	}
	files, err := exec.Command(git, "-C", "..", "ls-files", "-z", "internal", "cmd", "go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range specs {
		name, changes, _ := strings.Cut(spec, "=")
		if strings.HasPrefix(changes, "env:") || strings.HasPrefix(changes, "@") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			tree := t.TempDir()
			for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
				copyFile(t, filepath.Join("..", f), filepath.Join(tree, f))
			}
			for _, change := range strings.Split(changes, ",") {
				args := []string{"apply", "--exclude=*_test.go", "--exclude=docs/*", "--exclude=*.md"}
				if c, ok := strings.CutPrefix(change, "-"); ok {
					args, change = append(args, "-R"), c
				}
				var diff []byte
				if strings.HasSuffix(change, ".patch") {
					if diff, err = os.ReadFile(filepath.Join("..", change)); err != nil {
						t.Fatal(err)
					}
				} else if diff, err = exec.Command(git, "-C", "..", "show", "--format=", "--binary", change).Output(); err != nil {
					t.Logf("%s: commit %s is not in this clone: not checked", name, change)
					return
				}
				cmd := exec.Command(git, args...)
				cmd.Dir, cmd.Stdin = tree, bytes.NewReader(diff)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %s does not apply to the tree as it is (%v):\n%s", name, change, err, out)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	if os.IsNotExist(err) {
		return // deleted in the working tree
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
