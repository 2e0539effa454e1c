package plugtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTest(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t"+Ext)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParse reads every kind of section of a test file.
func TestParse(t *testing.T) {
	p := writeTest(t, `A test.
#config: ../blaise.star

-- env --
# a comment
A=1
-- setup --
git init -q
-- files/dir/a.txt --
a
-- run1 --
answer deny
prompt hello
  /say hi
  /tool grep
cancel
-- run2 --
end
-- want/run1/log --
INFO x
`)
	f, err := Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(filepath.Dir(p)), "blaise.star"); f.Config != want {
		t.Errorf("Config = %q, want %q", f.Config, want)
	}
	if strings.Join(f.Env, ",") != "A=1" || string(f.Setup) != "git init -q\n" || string(f.Seed["dir/a.txt"]) != "a\n" {
		t.Errorf("env %q, setup %q, seed %q", f.Env, f.Setup, f.Seed)
	}
	if len(f.Runs) != 2 || len(f.Runs[0].Actions) != 3 || f.Runs[1].Actions[0].Verb != "end" {
		t.Fatalf("runs: %+v", f.Runs)
	}
	prompt := f.Runs[0].Actions[1]
	if prompt.Verb != "prompt" || prompt.Arg != "hello" || prompt.Turn != "/say hi\n/tool grep\n" || prompt.Line != 13 {
		t.Errorf("prompt: %+v", prompt)
	}
	if string(f.Want["want/run1/log"]) != "INFO x\n" || f.SectionLine("want/run1/log") != 20 {
		t.Errorf("want: %q at line %d", f.Want, f.SectionLine("want/run1/log"))
	}
}

// TestParseErrors: a mistake in a test file is reported with its line and
// what was expected.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"#conifg: x\n-- run1 --\nprompt a\n", "t.blaisetest:1: unknown directive #conifg (want #config, #mask or #fails)"},
		{"#fails: 1\n-- run1 --\nprompt a\n", `t.blaisetest:1: #fails: want the runs that fail, as run1 run2 …, got "1"`},
		{"#fails:\n-- run1 --\nprompt a\n", "t.blaisetest:1: #fails: name the runs that fail, as run1 run2 …"},
		{"\n#fails: run1, run2\n-- run1 --\nprompt a\n", "t.blaisetest:2: #fails: the test has no run2"},
		{"#mask: x=y\n-- run1 --\nprompt a\n", `t.blaisetest:1: #mask: want NAME=REGEXP, NAME in capitals, got "x=y"`},
		{"#mask: WORK=y\n-- run1 --\nprompt a\n", "t.blaisetest:1: #mask: $WORK is taken by every test (WORK, SESSION, BLAISE_AGENT, CONFIG, TESTDIR, TIME); choose another name"},
		{"\n#mask: ID=a(\n-- run1 --\nprompt a\n", "t.blaisetest:2: #mask: ID: error parsing regexp: missing closing ): `a(`"},
		{"-- run1 --\n#cofig: x.star\nprompt a\n", `t.blaisetest:2: unknown directive "#cofig: x.star" in a run (want #config: PATH)`},
		{"-- run1 --\nprompt a\n#config: x.star\n", "t.blaisetest:3: #config comes before the run's actions: it is the configuration the run starts with"},
		{"-- run1 --\nprompt a\n-- persisted/c --\n{\"n\": \n", `t.blaisetest:4: persisted/c: want the JSON value the plug stored, got "{\"n\":"`},
		{"-- run1 --\nprompt a\n-- persisted/../x --\n1\n", `t.blaisetest:4: persisted/../x: invalid plug "../x": want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit`},
		{"-- blaise.star --\n", "t.blaisetest:1: no run: add a run1 section"},
		{"-- run1 --\nprompt a\n-- run3 --\nprompt b\n", "t.blaisetest:3: runs must be numbered run1, run2, … without gaps: run2 is missing before run3"},
		{"-- run1 --\n  /say hi\n", "t.blaisetest:2: an indented line is the agent's turn: it must follow a prompt"},
		{"-- run1 --\ncancel\n", "t.blaisetest:2: cancel cancels the turn of the prompt before it: put it right after a prompt"},
		{"-- run1 --\nprompt\n", `t.blaisetest:2: prompt: want prompt TEXT, got "prompt"`},
		{"-- run1 --\nanswer maybe\n", `t.blaisetest:2: answer: want answer allow|deny|cancel, got "answer maybe"`},
		{"-- run1 --\nstop bored\n", `t.blaisetest:2: stop: want stop REASON [may_resume], REASON one of idle, completed, closed, cancelled, timeout, got "stop bored"`},
		{"-- run1 --\nend\nprompt a\n", "t.blaisetest:3: prompt after the run was stopped: stop and end come last"},
		{"-- run1 --\nprompt a\n  /say bye\n  /exit 3\nstop idle\n", "t.blaisetest:5: stop after the agent crashed (/exit at line 2): the run ends by itself there"},
		{"-- run1 --\nshout\n", `t.blaisetest:2: unknown action "shout" (want prompt, cancel, answer, stop, end, do or fork)`},
		{"-- run1 --\nprompt a\n-- run2 --\nprompt b\ndo diff\n", `t.blaisetest:5: do comes first in a run: the actions run on the paused session before the run starts`},
		{"-- run1 --\nprompt a\n-- run2 --\ndo\n", `t.blaisetest:4: do: want do ACTION [ARGS], got "do"`},
		{"-- run1 --\nprompt a\n-- run2 --\ndo diff\n-- run3 --\nprompt b\n", `t.blaisetest:4: run2 has only do lines: only the last run may; put them at the start of the next run`},
		{"-- env --\nnot a var\n-- run1 --\nprompt a\n", `t.blaisetest:2: env: want NAME=VALUE, got "not a var"`},
		{"-- run1 --\nprompt a\n-- want/run1/logs --\n", `t.blaisetest:4: unknown golden section "want/run1/logs" (want want/runN/KIND, KIND one of client, transcript, log, host, outputs, pause, teardown, persisted, action)`},
		{"-- run1 --\nprompt a\n-- want/run2/log --\n", "t.blaisetest:4: want/run2/log: the test has no run2"},
		{"-- run1 --\nprompt a\n-- files/../x --\n", "t.blaisetest:4: files/../x: want a relative path inside the directory"},
		{"-- run1 --\nprompt a\n-- notes --\n", `t.blaisetest:4: unknown section "notes" (want env, setup, files/PATH, persisted/ID, a .star file, runN or want/runN/KIND)`},
		{"#config: blaise.star\n-- blaise.star --\n-- run1 --\nprompt a\n", "t.blaisetest:1: #config names a configuration, and the test has its own blaise.star: keep one"},
	} {
		_, err := Parse(writeTest(t, tc.content))
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%q: got error %v, want one ending in %q", tc.content, err, tc.want)
		}
	}
}

// TestFind lists test files below directories, skipping hidden ones.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/x" + Ext, "a/b/y" + Ext, "a/.hidden/z" + Ext, "a/node_modules/n" + Ext, "a/other.txt"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find([]string{filepath.Join(dir, "a") + "/...", filepath.Join(dir, "a", "x"+Ext)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a/b/y"+Ext), filepath.Join(dir, "a/x"+Ext)}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Find = %q, want %q", got, want)
	}
	if _, err := Find([]string{filepath.Join(dir, "a/other.txt")}); err == nil || !strings.Contains(err.Error(), "want a directory or a file ending in .blaisetest") {
		t.Errorf("a file of another kind: %v", err)
	}
}

// TestParseMasksAndRunConfigs reads #mask directives and the #config of a run.
func TestParseMasksAndRunConfigs(t *testing.T) {
	f, err := Parse(writeTest(t, "#mask: ID=id-[0-9]+\n-- run1 --\nprompt a\n-- run2 --\n#config: v2.star\nprompt b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Masks) != 1 || f.Masks[0].Name != "ID" || f.Masks[0].Re.String() != "id-[0-9]+" {
		t.Errorf("masks: %+v", f.Masks)
	}
	if f.Runs[0].Config != "" || f.Runs[1].Config != "v2.star" || len(f.Runs[1].Actions) != 1 {
		t.Errorf("runs: %+v, %+v", f.Runs[0], f.Runs[1])
	}
}
