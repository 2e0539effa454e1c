package dashboard

import (
	"reflect"
	"testing"
)

// TestDiffIsSplitByFile: a unified diff is split at each file; its header
// and hunk lines are told apart from added, removed and unchanged lines,
// which are counted; no diff is no file.
func TestDiffIsSplitByFile(t *testing.T) {
	diff := `diff --git a/a.go b/a.go
index 1..2 100644
--- a/a.go
+++ b/a.go
@@ -1,2 +1,2 @@
 package a
-var x = 1
+var x = 2
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
--- a line that looks like a header
\ No newline at end of file
`
	got := parseDiff(diff)
	want := []diffFile{
		{Path: "a.go", Added: 1, Removed: 1, Lines: []changeLine{
			{"dmeta", "diff --git a/a.go b/a.go"}, {"dmeta", "index 1..2 100644"}, {"dmeta", "--- a/a.go"}, {"dmeta", "+++ b/a.go"},
			{"dhunk", "@@ -1,2 +1,2 @@"}, {"dctx", " package a"}, {"ddel", "-var x = 1"}, {"dadd", "+var x = 2"}}},
		{Path: "gone.txt", Removed: 1, Lines: []changeLine{
			{"dmeta", "diff --git a/gone.txt b/gone.txt"}, {"dmeta", "deleted file mode 100644"}, {"dmeta", "--- a/gone.txt"}, {"dmeta", "+++ /dev/null"},
			{"dhunk", "@@ -1 +0,0 @@"}, {"ddel", "--- a line that looks like a header"}, {"dmeta", `\ No newline at end of file`}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseDiff:\n got %+v\nwant %+v", got, want)
	}
	if files := parseDiff(""); files != nil {
		t.Fatalf("no diff: %+v, want no file", files)
	}
}
