package findconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNearestConfigInAParent: the nearest blaise.star wins, found from a
// subdirectory as git finds .git; a directory called blaise.star is not one.
func TestNearestConfigInAParent(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(filepath.Join(deep, Name), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(root, Name), filepath.Join(root, "a", Name)} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Nearest(deep)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "a", Name); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestNoConfigSaysWhereItLooked: with no blaise.star in the directory or
// above it, the error names where it looked and the two other ways to give
// one ($BLAISE_CONFIG, -c FILE).
func TestNoConfigSaysWhereItLooked(t *testing.T) {
	dir := t.TempDir()
	_, err := Nearest(dir)
	if err == nil {
		t.Skip("a blaise.star exists above the temporary directory")
	}
	for _, want := range []string{"no " + Name + " in " + dir + " or any directory above it", "$" + Env, "-c FILE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
