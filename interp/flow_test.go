package interp

import (
	"fmt"
	"strings"
	"testing"
)

// TestM4_OnMessageFallThroughFound: the statements after which on_message
// can end without a return, path by path.
func TestM4_OnMessageFallThroughFound(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // lines:cols of the exits, "" when every path returns
	}{
		{"    return next(message)\n", ""},
		{"    next(message)\n", "2:5"},
		{"    if message.kind == \"request\":\n        return next(message)\n", "2:5"},
		{"    if message.method == \"x\":\n        return None\n    else:\n        next(message)\n", "5:9"},
		{"    if message.method == \"x\":\n        fail(\"no\")\n    elif message.method == \"y\":\n        return 1\n    else:\n        return next(message)\n", ""},
		{"    for x in []:\n        return 1\n", "2:5"},
		{"    return next(message)\n    ctx.log.info(\"never\")\n", ""},
		{"    x = 1\n", "2:5"},
	} {
		src := "def on_message(ctx, message, next):\n" + tc.body
		f, err := FileOptions.Parse("p.star", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, pos := range fallThrough(f, "on_message") {
			got = append(got, fmt.Sprintf("%d:%d", pos.Line, pos.Col))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: exits %v, want %q", tc.body, got, tc.want)
		}
	}
}
