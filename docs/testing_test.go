package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// introduced matches the line that names the file a block shows:
// "The plug, `examples/greeter/plugs/greeter.star`:".
var introduced = regexp.MustCompile("`((?:examples|plugtest)/[^`]+)`(?:, [^:]*)?:$")

// TestTestingDocShowsTheExamples: the files testing.md shows whole are the
// examples' files as they are; a test file it shows is the beginning of
// the real one.
func TestTestingDocShowsTheExamples(t *testing.T) {
	data, err := os.ReadFile("testing.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	checked := 0
	for i := 0; i+2 < len(lines); i++ {
		m := introduced.FindStringSubmatch(lines[i])
		if m == nil || !strings.HasPrefix(lines[i+2], "```") {
			continue
		}
		var block []string
		for j := i + 3; j < len(lines) && lines[j] != "```"; j++ {
			block = append(block, lines[j])
		}
		text := strings.Join(block, "\n") + "\n"
		file, err := os.ReadFile(filepath.Join("..", m[1]))
		if err != nil {
			t.Errorf("testing.md:%d: %v", i+1, err)
			continue
		}
		if !strings.HasPrefix(string(file), text) || strings.HasSuffix(m[1], ".star") && string(file) != text {
			t.Errorf("testing.md:%d: the block differs from %s:\n%s", i+1, m[1], text)
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("checked %d blocks of testing.md against their files, want at least 3", checked)
	}
}
