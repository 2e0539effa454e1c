package interp_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blaiseagent/blaise-agent/interp"
)

// TestOnlyRegularFilesAreRead: a plug, a module or a configuration that is a
// device, a named pipe or a directory is refused before it is read (a pipe
// would block the load forever, /dev/zero never ends), and so is a file
// larger than the limit; the error names the file.
func TestOnlyRegularFilesAreRead(t *testing.T) {
	plug := "plug(name = \"p\")\n"
	big := "# " + strings.Repeat("x", interp.MaxFileSize) + "\n" + plug
	for _, c := range []struct {
		name  string
		files map[string]string
		fifo  string // made a named pipe
		want  []string
	}{
		{"device", map[string]string{"blaise.star": agentLine + `setup(use("/dev/zero"))`},
			"", []string{`blaise.star:2:10: use "/dev/zero": cannot read /dev/zero: it is a character device, not a regular file`}},
		{"pipe as plug", map[string]string{"blaise.star": agentLine + `setup(use("./p.star"))`},
			"p.star", []string{`blaise.star:2:10: use "./p.star": cannot read p.star: it is a named pipe, not a regular file`}},
		{"pipe as module", map[string]string{"blaise.star": `load("./lib.star", "X")` + "\n" + agentLine},
			"lib.star", []string{`blaise.star:1:1: cannot load ./lib.star: cannot read lib.star: it is a named pipe, not a regular file`}},
		{"pipe as configuration", nil, "blaise.star", []string{`cannot read blaise.star: it is a named pipe, not a regular file`}},
		{"directory", map[string]string{"blaise.star": agentLine + `setup(use("./plugs"))`, "plugs/x.star": plug},
			"", []string{`use "./plugs": cannot read plugs: it is a directory, not a regular file`}},
		{"too large", map[string]string{"blaise.star": agentLine + `setup(use("./big.star"))`, "big.star": big},
			"", []string{`use "./big.star": cannot read big.star: it is larger than the limit of 1048576 bytes (1 MiB) for a .star file`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.fifo != "" {
				// As load does, with a named pipe among the files.
				dir := t.TempDir()
				if err := syscall.Mkfifo(filepath.Join(dir, c.fifo), 0o644); err != nil {
					t.Fatal(err)
				}
				for name, content := range c.files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				t.Chdir(dir)
				_, err := (&interp.Loader{}).LoadConfig("blaise.star")
				checkError(t, err, c.want...)
				return
			}
			wantError(t, c.files, c.want...)
		})
	}
}

// TestC11_CheckRefusesPathLikePlugIDs: an id names the file of a plug's
// persisted state, so an id with "/" or ".." is refused when the
// configuration loads (by check as by run), at the use(...).
func TestC11_CheckRefusesPathLikePlugIDs(t *testing.T) {
	for _, id := range []string{"a/b", "..", "../x", "x/../../y", ".hidden"} {
		wantError(t, map[string]string{"blaise.star": agentLine + `setup(use("blaise:greet", id = "` + id + `"))`},
			`blaise.star:2:10: use "blaise:greet": invalid plug id "`+id+`": want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit`)
	}
}
