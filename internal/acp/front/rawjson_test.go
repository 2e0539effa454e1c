package front

import (
	"encoding/json"
	"testing"
)

func TestWithMember(t *testing.T) {
	for _, c := range []struct{ in, key, val, want string }{
		{`{"sessionId":"a","x":1}`, "sessionId", `"b"`, `{"sessionId":"b","x":1}`},
		{`{ "x" : {"sessionId":"deep"} , "sessionId" : "a" }`, "sessionId", `"b"`, `{ "x" : {"sessionId":"deep"} , "sessionId" : "b" }`},
		{`{"a\u0022b":"\"}","sessionId":"a"}`, "sessionId", `"b"`, `{"a\u0022b":"\"}","sessionId":"b"}`},
		{`{"session\u0049d":"a"}`, "sessionId", `"b"`, `{"session\u0049d":"b"}`},
		{`{}`, "k", `true`, `{"k":true}`},
		{`{ }`, "k", `true`, `{"k":true }`},
		{`{"a":[1,{"b":"]"}]}`, "k", `1`, `{"a":[1,{"b":"]"}],"k":1}`},
		{`{"a":1 }`, "k", `1`, `{"a":1,"k":1 }`},
	} {
		if got := string(withMember([]byte(c.in), c.key, []byte(c.val))); got != c.want {
			t.Errorf("withMember(%s, %s, %s) = %s, want %s", c.in, c.key, c.val, got, c.want)
		}
	}
	if withMember([]byte(`[1]`), "k", []byte("1")) != nil {
		t.Error("withMember of an array")
	}
	for _, bad := range []string{``, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":"x}`, `{"a":1,}`, `"s"`, `{"a" 1}`} {
		if _, _, ok := member([]byte(bad), "a"); ok && bad != `{"a":1,}` {
			t.Errorf("member(%q) found a member", bad)
		}
		_ = withMember([]byte(bad), "k", []byte("1")) // must not panic
	}
}

func TestWithString(t *testing.T) {
	for _, c := range []struct {
		in, s, want string
		changed     bool
	}{
		{`{"sessionId":"a","x":1}`, "b", `{"sessionId":"b","x":1}`, true},
		{`{"sessionId":"a","x":1}`, "a", `{"sessionId":"a","x":1}`, false},
		{`{"sessionId":"\u0061"}`, "a", `{"sessionId":"\u0061"}`, false},
		{`{"sessionId":"a\\"}`, `a\`, `{"sessionId":"a\\"}`, false},
		{`{"sessionId":"a\\"}`, "b<", `{"sessionId":"b\u003c"}`, true},
		{`{"x":"\\\"}","sessionId":"a"}`, "b", `{"x":"\\\"}","sessionId":"b"}`, true},
		{`{"x":"\\","sessionId":"a"}`, "b", `{"x":"\\","sessionId":"b"}`, true},
		{`{"sessionId":1}`, "b", `{"sessionId":1}`, false},
		{`{"x":"a"}`, "b", `{"x":"a"}`, false},
	} {
		got, changed := withString([]byte(c.in), "sessionId", c.s)
		if string(got) != c.want || changed != c.changed {
			t.Errorf("withString(%s, %q) = %s, %v, want %s, %v", c.in, c.s, got, changed, c.want, c.changed)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "sess-1", "a\"b", `a\b`, "<&>", "é", "\x01", "\x7f", "\u2028"} {
		want, _ := json.Marshal(s)
		if got := quote(s); string(got) != string(want) {
			t.Errorf("quote(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzWithMember(f *testing.F) {
	f.Add([]byte(`{"sessionId":"a","x":[1,"]"]}`), "sessionId")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		_ = withMember(obj, key, []byte(`"v"`))
		_, _ = stringMember(obj, key)
		_, _ = withString(obj, key, "v")
	})
}
