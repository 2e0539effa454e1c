package starfmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSource formats each testdata/NAME.in into NAME.want, keeping
// comments, and formatting the result again changes nothing.
func TestSource(t *testing.T) {
	ins, err := filepath.Glob("testdata/*.in")
	if err != nil || len(ins) < 3 {
		t.Fatalf("testdata: %v %v", ins, err)
	}
	for _, in := range ins {
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(in, ".in") + ".want")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Source("p.star", src)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", in, got, want)
		}
		again, err := Source("p.star", got)
		if err != nil || !bytes.Equal(again, got) {
			t.Errorf("%s: formatting twice changed it:\n%s (%v)", in, again, err)
		}
	}
}

// TestSourceRefusesWhatItCannotFormat: a syntax error, and a while loop the
// formatter does not know, are errors that name the file and line.
func TestSourceRefusesWhatItCannotFormat(t *testing.T) {
	for src, want := range map[string]string{
		"def f(:\n": "p.star:1:8: syntax error near :",
		"def f(a):\n    while a:\n        a -= 1\n": "p.star:2:12: syntax error near a (the formatter does not know while loops",
	} {
		if _, err := Source("p.star", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

// TestRunCheckAndWrite: --check lists and changes nothing; writing formats
// in place, keeps the mode, and goes on past a file it cannot format.
func TestRunCheckAndWrite(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.star":              "x=1\n",
		"ok.star":             "x = 1\n",
		"sub/b.star":          "y  =  2\n",
		"sub/bad.star":        "def f(:\n",
		".hidden/c.star":      "z=3\n",
		"notes.txt":           "a=1\n",
		"node_modules/n.star": "n=1\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	err := Run([]string{dir}, true, &out)
	if err == nil || !strings.Contains(err.Error(), "sub/bad.star:1:8: syntax error") {
		t.Fatalf("check: %v, want the bad file's error", err)
	}
	if got, want := out.String(), filepath.Join(dir, "a.star")+"\n"+filepath.Join(dir, "sub/b.star")+"\n"; got != want {
		t.Errorf("check listed %q, want %q", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.star")); string(data) != "x=1\n" {
		t.Errorf("check changed a.star: %q", data)
	}

	os.Remove(filepath.Join(dir, "sub/bad.star"))
	out.Reset()
	var unformatted *Unformatted
	if err := Run([]string{dir}, true, &out); err == nil || !errors.As(err, &unformatted) || unformatted.ExitCode() != 1 || len(unformatted.Files) != 2 {
		t.Fatalf("check: %v, want 2 unformatted files and exit code 1", err)
	}
	out.Reset()
	if err := Run([]string{dir}, false, &out); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.star": "x = 1\n", "sub/b.star": "y = 2\n", ".hidden/c.star": "z=3\n", "notes.txt": "a=1\n", "node_modules/n.star": "n=1\n"} {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		if string(data) != want {
			t.Errorf("%s = %q, want %q", name, data, want)
		}
	}
	if info, _ := os.Stat(filepath.Join(dir, "a.star")); info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", info.Mode().Perm())
	}
	if err := Run([]string{dir}, true, &out); err != nil {
		t.Errorf("check after formatting: %v", err)
	}
}

// TestRepositoryIsFormatted keeps the project's own .star files (examples,
// the standard library, the files of init) in the style fmt writes.
func TestRepositoryIsFormatted(t *testing.T) {
	var out bytes.Buffer
	if err := Run([]string{"../examples", "../stdlib", "../scaffold/template"}, true, &out); err != nil {
		t.Errorf("%v:\n%s", err, out.String())
	}
}

// TestFileReadsOnlyRegularFiles: a named pipe is refused, not waited on.
func TestFileReadsOnlyRegularFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe.star")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	if _, err := File(p, true); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("error %v, want a refusal of the named pipe", err)
	}
}
