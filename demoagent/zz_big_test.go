package demoagent

import (
	"fmt"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

func TestZZBig(t *testing.T) {
	h := start(t, t.TempDir())
	h.initialize()
	sid := h.newSession(t.TempDir())
	for _, n := range []int{1 << 18, 1 << 19, 1 << 20, 3 << 19, 1 << 21} {
		b := time.Now()
		if _, err := h.prompt(sid, acp.TextBlock(fmt.Sprintf("/big %d", n))); err != nil {
			t.Fatal(err)
		}
		fmt.Println(n, time.Since(b))
	}
}
