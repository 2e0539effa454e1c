package lifecycle

import "testing"

func TestChanges_StringAsSessionsListsIt(t *testing.T) {
	for c, want := range map[Changes]string{
		{Added: 12, Removed: 3, Files: 2}: "+12 −3, 2 files",
		{Added: 1, Files: 1}:              "+1 −0, 1 file",
		{}:                                "+0 −0, 0 files",
	} {
		if got := c.String(); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
}
