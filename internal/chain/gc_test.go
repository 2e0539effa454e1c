package chain

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestSessionProcessCollectsLessOftenUnlessGOGCIsSet: the session process
// sets its GOGC to sessionGCPercent, and leaves the one $GOGC gives.
func TestSessionProcessCollectsLessOftenUnlessGOGCIsSet(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	collectLessOften()
	if got := debug.SetGCPercent(100); got != sessionGCPercent {
		t.Fatalf("without $GOGC, GOGC is %d, want %d", got, sessionGCPercent)
	}

	t.Setenv("GOGC", "100")
	collectLessOften()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC=100 in the environment, GOGC is %d", got)
	}
}
