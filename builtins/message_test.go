package builtins

import (
	"testing"

	"github.com/blaiseagent/blaise-agent/acp"
)

// TestM4_ReadingAnAbsentMemberChangesNothing: a plug that only looks at a
// message passes it on byte for byte, even where a member is missing.
func TestM4_ReadingAnAbsentMemberChangesNothing(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"auth required"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel"}`,
		`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
	} {
		m, err := acp.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		msg := NewMessage(ToAgent, m)
		for _, attr := range []string{"params", "result", "error", "id"} {
			if _, err := msg.Attr(attr); err != nil {
				t.Fatalf("%s: %v", attr, err)
			}
		}
		out, err := msg.Encode()
		if err != nil || string(out.Raw) != line {
			t.Fatalf("read-only use changed\n%s\ninto\n%s (%v)", line, out.Raw, err)
		}
	}
}
