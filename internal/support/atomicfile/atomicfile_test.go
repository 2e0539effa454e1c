package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWithMode(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, durable := range []bool{false, true} {
		if err := Write(name, []byte("new"), 0o600, durable); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(name)
		info, _ := os.Stat(name)
		if err != nil || string(b) != "new" || info.Mode().Perm() != 0o600 {
			t.Fatalf("durable %v: %q %v %v", durable, b, info.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left %d entries, want only the file", len(entries))
	}
}

func TestWriteFailureLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Renaming a file over a directory fails.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(sub, []byte("new"), 0o644, true); err == nil {
		t.Fatal("no error writing over a directory")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("%d entries after a failed write, want 2 (no temporary file left)", len(entries))
	}
}
