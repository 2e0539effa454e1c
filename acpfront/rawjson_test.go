package acpfront

import "testing"

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

func TestForceLoadSession(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"agentCapabilities":{"loadSession":false,"_meta":{"x":1}},"protocolVersion":1}`, `{"agentCapabilities":{"loadSession":true,"_meta":{"x":1}},"protocolVersion":1}`},
		{`{"agentCapabilities":{},"protocolVersion":1}`, `{"agentCapabilities":{"loadSession":true},"protocolVersion":1}`},
		{`{"protocolVersion":1}`, `{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`},
	} {
		if got := string(forceLoadSession([]byte(c.in))); got != c.want {
			t.Errorf("forceLoadSession(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func FuzzWithMember(f *testing.F) {
	f.Add([]byte(`{"sessionId":"a","x":[1,"]"]}`), "sessionId")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		_ = withMember(obj, key, []byte(`"v"`))
		_, _ = stringMember(obj, key)
	})
}
