package testsupport

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git runs git in dir with a fixed author and returns its trimmed output,
// failing the test when git fails.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// GitCommit writes files (path → content) into the repository dir, made
// on first use, commits them and returns the commit.
func GitCommit(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		Git(t, "", "init", "--quiet", "--initial-branch=main", dir)
	}
	WriteFiles(t, dir, files)
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "change")
	return Git(t, dir, "rev-parse", "HEAD")
}

// WriteFiles writes files (path → content) below dir, making folders.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TamperObject overwrites the loose object id of the bare repository
// gitDir with an object of type typ and content that does not hash to id,
// as a damaged disk or a hand in the cache would.
func TamperObject(t testing.TB, gitDir, id, typ, content string) {
	t.Helper()
	p := filepath.Join(gitDir, "objects", id[:2], id[2:])
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("object %s is not loose in %s: %v", id, gitDir, err)
	}
	var b bytes.Buffer
	z := zlib.NewWriter(&b)
	fmt.Fprintf(z, "%s %d\x00%s", typ, len(content), content)
	z.Close()
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
}
