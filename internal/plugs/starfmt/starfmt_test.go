package starfmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blaiseagent/blaise-agent/interp"
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
		checkFormatted(t, src, got)
	}
}

// checkFormatted fails t unless got, formatted from src, parses, means
// what src meant, and is left as it is when formatted again.
func checkFormatted(t testing.TB, src, got []byte) {
	t.Helper()
	before, err := interp.FileOptions.Parse("p.star", src, 0)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	after, err := interp.FileOptions.Parse("p.star", got, 0)
	if err != nil || shape(after) != shape(before) {
		t.Errorf("%q formatted into %q, which means something else (%v)", src, got, err)
		return
	}
	if again, err := Source("p.star", got); err != nil || !bytes.Equal(again, got) {
		t.Errorf("%q: formatting %q again gave %q (%v)", src, got, again, err)
	}
}

// TestSourceRefusesASyntaxErrorAsCheckDoes: a file that does not parse is
// refused with the error of the dialect's parser, the one check reports,
// at the same position.
func TestSourceRefusesASyntaxErrorAsCheckDoes(t *testing.T) {
	for src, want := range map[string]string{
		"def f(:\n":                "p.star:1:8: got ':', want ')'",
		"x = 'a' 'b'\n":            "p.star:1:12: got string literal, want newline",
		"def f():\n    global x\n": "p.star:2:5: got global, want primary expression (Starlark has no `global`: globals are frozen once the file is loaded; keep what a run changes in `ctx.state`)",
		"while True\n    pass\n":   "p.star:2:1: got newline, want ':'",
	} {
		if _, err := Source("p.star", []byte(src)); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %v", src, err, want)
		}
		loader := &interp.Loader{}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "p.star"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := loader.LoadModule(filepath.Join(dir, "p.star")); err == nil || !strings.HasSuffix(err.Error(), strings.TrimPrefix(want, "p.star")) {
			t.Errorf("%q: loading says %v, want %v", src, err, want)
		}
	}
}

// TestSourceFormatsEveryConstructOfTheDialect: each construct the dialect
// accepts (while loops and bytes literals too, which buildtools does not
// know) is formatted into a file that parses, means the same, and that
// formatting again leaves as it is. want "" is: any such result.
func TestSourceFormatsEveryConstructOfTheDialect(t *testing.T) {
	for src, want := range map[string]string{
		"def f(a):\n  while a>0:\n    a-=1 # down\n  return a\n":                       "def f(a):\n    while a > 0:\n        a -= 1  # down\n    return a\n",
		"while True:\n    break\n":                                                     "",
		"def f():\n  while (a and  # first\n     b):\n    pass\n":                      "def f():\n    while (a and  # first\n           b):\n        pass\n",
		"while (a and\n  f(a,\n  b)):\n    pass\n":                                     "while (a and\n       f(\n           a,\n           b,\n       )):\n    pass\n",
		"while a in [\n  1,\n  2]:\n    pass\n":                                        "while a in [\n    1,\n    2,\n]:\n    pass\n",
		"while (a or b) and not c:\n    pass\n":                                        "",
		"def f():\n    while a:\n        while b:\n            continue\n":             "",
		`x = b'a\xff'` + "\n" + `y = rb'\d' + b'''m` + "\n" + `l'''` + "\n":            `x = b"a\xff"` + "\n" + `y = rb"\d" + b"""m` + "\n" + `l"""` + "\n",
		"x = f(b'x', [b'y'])\n":                                                        `x = f(b"x", [b"y"])` + "\n",
		`x = 'é\u00e9\U0001F600\x41\101'` + "\n":                                       `x = "é\u00e9\U0001F600\x41\101"` + "\n",
		"x = '''it's\n\\tok'''\n":                                                      "x = \"\"\"it's\n\\tok\"\"\"\n",
		`x = 'say "hi"'` + "\n":                                                        "",
		"x = set([1, 2])\n":                                                            "",
		"f = lambda x, *a, **k: x\n":                                                   "",
		"def f():\n    def g(n):\n        return g(n - 1) if n else 0\n    return g\n": "",
		"if x:\n    y = 1\nelif z:\n    pass\nelse:\n    pass\n":                       "",
		"for a, b in c:\n    continue\n":                                               "",
		"x = [a for a in b if a]\ny = {a: b for a, b in c}\n":                          "",
		"x = a if b else c\ny = a[1:2:3]\n":                                            "",
		"def f(a, *, b = 1, **kw):\n    pass\n":                                        "",
		"x = 1 // 2 | 3 ^ 4 & 5 << 6 >> 7\ny = ~1\nz = not a in b\n":                   "",
		"x //= 2\nx |= 1\nx <<= 1\nx >>= 1\nx ^= 1\nx &= 1\n":                          "",
		"x = 0x10 + 0o7 + 0b1 + 1e3 + 1.5 + 12345678901234567890123\n":                 "",
		"load('b.star', 'z', y = 'w')\nload('a.star', 'q')\n":                          "load(\"a.star\", \"q\")\nload(\"b.star\", \"z\", y = \"w\")\n",
		"x = (1,)\na, b = 1, 2\n[c, d] = e\n":                                          "",
		"x = f(*a, **k)\ny = a.b.c(d)[e]\n":                                            "",
		"x = 1; y = 2\n":                                                               "x = 1\ny = 2\n",
		"if a: b = 1\n":                                                                "if a:\n    b = 1\n",
		"def f(): return\n":                                                            "def f():\n    return\n",
	} {
		got, err := Source("p.star", []byte(src))
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if want != "" && string(got) != want {
			t.Errorf("%q:\ngot  %q\nwant %q", src, got, want)
		}
		checkFormatted(t, []byte(src), got)
	}
}

// TestShapeSeesWhatFormattingMustKeep: the comparison that guards Source
// tells programs apart, and not mere spellings.
func TestShapeSeesWhatFormattingMustKeep(t *testing.T) {
	parse := func(src string) string {
		f, err := interp.FileOptions.Parse("p.star", []byte(src), 0)
		if err != nil {
			t.Fatal(err)
		}
		return shape(f)
	}
	for a, b := range map[string]string{
		"x = 'a'\n":                             "x = \"a\"  # c\n",
		"x = (a)\n":                             "x = a\n",
		"load('m', 'b', 'a')\nload('l', 'c')\n": "load('l', 'c')\nload('m', 'a', 'b')\n",
		"x = 0x10\n":                            "x = 16\n",
	} {
		if parse(a) != parse(b) {
			t.Errorf("%q and %q differ", a, b)
		}
	}
	for a, b := range map[string]string{
		"x = 'a'\n":            "x = b'a'\n",
		"x = 1\ny = 2\n":       "y = 2\nx = 1\n",
		"while a:\n    pass\n": "for _ in a:\n    pass\n",
		"x = a - (b - c)\n":    "x = a - b - c\n",
		"x = 1\n":              "x = 1.0\n",
		"load('m', a = 'b')\n": "load('m', b = 'a')\n",
	} {
		if parse(a) == parse(b) {
			t.Errorf("%q and %q are the same", a, b)
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
	if err == nil || !strings.Contains(err.Error(), "sub/bad.star:1:8: got ':', want ')'") {
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
	if err := Run([]string{"../../../examples", "../../../stdlib", "../scaffold/template"}, true, &out); err != nil {
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

// FuzzSource: whatever parses in the dialect is either formatted into a
// file that means the same and stays as it is when formatted again, or
// refused with an error; it is never rewritten into something else.
func FuzzSource(f *testing.F) {
	ins, _ := filepath.Glob("testdata/*.in")
	for _, in := range ins {
		src, _ := os.ReadFile(in)
		f.Add(src)
	}
	f.Add([]byte("def f(a):\n  while a>0:\n    a-=1 # down\n  return b'x' + rb'\\d'\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		if got, err := Source("p.star", src); err == nil {
			checkFormatted(t, src, got)
		}
	})
}

// TestReplaceStringEditsTheLiteralInPlace: the literals of one value are
// rewritten with their quotes, and every other byte of the file is kept.
func TestReplaceStringEditsTheLiteralInPlace(t *testing.T) {
	src := "# the team's plugs\nsetup(\n  use('git+x//a.star@v1'),   # pinned\n  use(r\"git+x//a.star@v1\", id=\"b\"),\n  use(\"git+x//a.star@v1.0\"),\n)\nX = \"\"\"git+x//a.star@v1\"\"\" + 'git+x//a.star@' + 'v1'\n"
	got, n, err := ReplaceString("p.star", []byte(src), "git+x//a.star@v1", "git+x//a.star@v2.0.1")
	want := "# the team's plugs\nsetup(\n  use('git+x//a.star@v2.0.1'),   # pinned\n  use(r\"git+x//a.star@v2.0.1\", id=\"b\"),\n  use(\"git+x//a.star@v1.0\"),\n)\nX = \"\"\"git+x//a.star@v2.0.1\"\"\" + 'git+x//a.star@' + 'v1'\n"
	if err != nil || n != 3 || string(got) != want {
		t.Fatalf("ReplaceString = %d, %v:\n%s\nwant\n%s", n, err, got, want)
	}
	got, n, err = ReplaceString("p.star", []byte("x = 'a'\n"), "a", "it's \"b\"\\")
	if err != nil || n != 1 || string(got) != `x = "it's \"b\"\\"`+"\n" {
		t.Fatalf("ReplaceString with quotes = %d, %v: %s", n, err, got)
	}
	if _, _, err := ReplaceString("p.star", []byte("x = (\n"), "a", "b"); err == nil {
		t.Fatal("a file that does not parse was edited")
	}
}
