package builtins

import (
	"testing"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/interp"
	"go.starlark.net/lib/json"
	"go.starlark.net/starlark"
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

// evalMessage evaluates each expression with message (parsed from line)
// and json predeclared, in order, so that later ones see what earlier
// ones changed; a case without want is a statement, executed. It returns
// the message.
func evalMessage(t *testing.T, line string, cases []exprCase) *Message {
	t.Helper()
	m, err := acp.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	msg := NewMessage(ToAgent, m)
	env := starlark.StringDict{"message": msg, "json": json.Module}
	for _, tc := range cases {
		thread := &starlark.Thread{Name: "test"}
		if tc.want == "" {
			if _, err := starlark.ExecFileOptions(interp.FileOptions, thread, "test.star", tc.expr, env); err != nil {
				t.Fatalf("%s: %v", tc.expr, err)
			}
			continue
		}
		var got string
		if v, err := starlark.EvalOptions(interp.FileOptions, thread, "test.star", tc.expr, env); err != nil {
			got = "error: " + err.Error()
		} else {
			got = v.String()
		}
		if got != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
		}
	}
	return msg
}

const promptLine = `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`

// TestMessagesReadWithDots: the JSON objects of a message read as attributes
// at any depth, and still as a dict.
func TestMessagesReadWithDots(t *testing.T) {
	evalMessage(t, promptLine, []exprCase{
		{`message.params.prompt[0].text`, `"hi"`},
		{`message["params"]["prompt"][0]["text"]`, `"hi"`},
		{`message.params["prompt"][0].text`, `"hi"`},
		{`"prompt" in message.params`, `True`},
		{`"promt" in message.params`, `False`},
		{`len(message.params)`, `2`},
		{`[k for k in message.params]`, `["sessionId", "prompt"]`},
		{`message.params.keys()`, `["sessionId", "prompt"]`},
		{`message.params.get("promt", 7)`, `7`},
		{`dict(message.params.prompt[0])`, `{"type": "text", "text": "hi"}`},
		{`dict(message.params.prompt[0]) == {"type": "text", "text": "hi"}`, `True`},
		{`json.encode(message.params)`, starlark.String(`{"prompt":[{"text":"hi","type":"text"}],"sessionId":"s1"}`).String()},
		{`hasattr(message.params, "prompt")`, `True`},
		{`hasattr(message.params, "promt")`, `False`},
		{`hasattr(message.params, "get")`, `True`},
		{`getattr(message.params, "sessionId")`, `"s1"`},
		{`getattr(message.params, "promt", None)`, `None`},
		{`message.params.promt`, `error: message.params.promt: no such field (did you mean "prompt"?); fields: sessionId, prompt`},
		{`message.params.prompt[0].txt`, `error: message.params.prompt[0].txt: no such field (did you mean "text"?); fields: type, text`},
		{`getattr(message.params, "promt")`, `error: getattr: message.params.promt: no such field (did you mean "prompt"?); fields: sessionId, prompt`},
		{`message["replace"]`, `error: key "replace" not in message`},
	})
}

// TestObjectsCompareWithoutPanic: == between an object and a dict is False
// in either order, never Starlark's panic on a foreign "dict" type; objects
// compare by members.
func TestObjectsCompareWithoutPanic(t *testing.T) {
	evalMessage(t, promptLine, []exprCase{
		{`message.params.prompt[0] == {"type": "text", "text": "hi"}`, `False`},
		{`{"type": "text", "text": "hi"} == message.params.prompt[0]`, `False`},
		{`[{"type": "text", "text": "hi"}] == message.params.prompt`, `False`},
		{`message.params.prompt[0] != {"type": "text", "text": "hi"}`, `True`},
		{`message.params == message.params`, `True`},
		{`message.params.prompt[0] == json.decode('{"text": "hi", "type": "text"}')`, `False`},
		{`message.params.prompt[0] == message.replace(params = None).params`, `False`},
		{`message.params.prompt[0] < message.params.prompt[0]`, `error: object < object not implemented`},
		{`{message.params: 1}`, `error: unhashable type: object`},
	})
}

// TestMessagesChangeInPlaceWithDotsOrIndex: writing a member with a dot or
// by index changes what the message sends, with the rest as it came;
// json.encode(message) shows it.
func TestMessagesChangeInPlaceWithDotsOrIndex(t *testing.T) {
	want := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"dot"}],"x":1,"y":{"z":[2]}}}`
	msg := evalMessage(t, promptLine, []exprCase{
		{expr: `message.params.prompt[0].text = "dot"`},
		{expr: `message["params"]["x"] = 1`},
		{expr: `message.params.y = {"z": [2]}`},
		{`message.params.prompt[0].text`, `"dot"`},
		{`message.params.x`, `1`},
		{`type(message.params.y)`, `"dict"`}, // what this plug wrote
		{`json.encode(message)`, starlark.String(want).String()},
	})
	out, err := msg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Raw) != want {
		t.Errorf("sent\n%s\nwant\n%s", out.Raw, want)
	}
	// The next plug gets it as from the wire: the dict is an object too.
	next, err := msg.Passed()
	if err != nil {
		t.Fatal(err)
	}
	y, _ := next.Attr("params")
	v, err := starlark.Eval(&starlark.Thread{}, "", `p.y.z[0]`, starlark.StringDict{"p": y})
	if err != nil || v.String() != "2" {
		t.Errorf("next plug: p.y.z[0] = %v, %v; want 2", v, err)
	}
}

// TestABodyThatIsNotJSONFailsWherePassed: a value that is not JSON
// fails at the next() of the plug that put it there, naming where.
func TestABodyThatIsNotJSONFailsWherePassed(t *testing.T) {
	msg := evalMessage(t, promptLine, []exprCase{
		{expr: `message.params.prompt[0].text = set`},
	})
	if _, err := msg.Passed(); err == nil || err.Error() != "params.prompt[0].text: cannot encode builtin_function_or_method as JSON" {
		t.Errorf("Passed: %v", err)
	}
}
