package interp

import (
	"fmt"
	"strings"
	"testing"
)

// TestIssue19_CheckWarnsOfDictTestsOnMessages: a test for "dict" on what
// comes from a message, which its objects no longer pass, is found; tests
// on other values are not.
func TestIssue19_CheckWarnsOfDictTestsOnMessages(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // line:col of each test found
	}{
		{`    if type(message.params) == "dict":` + "\n        pass\n", "2:8"},
		{`    ok = "dict" != type(message.params.get("x"))` + "\n", "2:10"},
		{`    update = message.params.get("update")` + "\n    content = update.get(\"content\")\n    if type(content) == \"dict\":\n        pass\n", "4:8"},
		{`    r = next(message)` + "\n    result = r.result\n    for option in result.get(\"options\", []):\n        if type(option) == \"dict\":\n            pass\n", "5:12"},
		{`    d = dict(message.params)` + "\n    if type(d) == \"dict\":\n        pass\n", ""},
		{`    if type(ctx.state) == "dict" or type(message.params) == "object":` + "\n        pass\n", ""},
		{`    def inner(x):` + "\n        return type(message.result) == \"dict\"\n", "3:16"},
	} {
		src := "def on_message(ctx, message, next):\n" + tc.body + "    return next(message)\n"
		f, err := FileOptions.Parse("p.star", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var got []string
		for _, pos := range dictTests(f) {
			got = append(got, fmt.Sprintf("%d:%d", pos.Line, pos.Col))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: found %v, want %q", src, got, tc.want)
		}
	}
}
