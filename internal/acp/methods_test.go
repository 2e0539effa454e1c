package acp

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const sdkModule = "github.com/coder/acp-go-sdk"

// sdkDir returns the directory of acp-go-sdk in the module cache, or skips
// the test.
func sdkDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", sdkModule).Output()
	if err == nil {
		var mod struct{ Dir string }
		if json.Unmarshal(out, &mod) == nil && mod.Dir != "" {
			return mod.Dir
		}
	}
	// Without the go command: the build info and the module cache.
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path != sdkModule {
				continue
			}
			cache := os.Getenv("GOMODCACHE")
			if cache == "" {
				if home, err := os.UserHomeDir(); err == nil {
					cache = filepath.Join(home, "go", "pkg", "mod")
				}
			}
			dir := filepath.Join(cache, sdkModule+"@"+dep.Version)
			if _, err := os.Stat(dir); err == nil {
				return dir
			}
		}
	}
	t.Skipf("%s is not in the module cache (go list: %v); run go mod download", sdkModule, err)
	return ""
}

// schemaDef is a type of the ACP JSON schema.
type schemaDef struct {
	Method   string   `json:"x-method"`
	Side     string   `json:"x-side"`
	Required []string `json:"required"`
}

// loadSchema reads the definitions of an ACP schema file of the SDK.
func loadSchema(t *testing.T, file string) map[string]schemaDef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sdkDir(t), "schema", file))
	if err != nil {
		t.Skipf("ACP schema: %v", err)
	}
	var s struct {
		Defs map[string]schemaDef `json:"$defs"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s.Defs
}

// schemaSides maps x-side to the table's sides. "protocol" is the side of
// $/cancel_request, which either peer sends.
var schemaSides = map[string]Side{"agent": ToAgent, "client": ToClient, "both": Both, "protocol": Both}

// schemaMethod gathers the schema's types of one method.
type schemaMethod struct {
	side                          Side
	request, notification, result string // schema type names
}

func schemaMethods(t *testing.T, defs map[string]schemaDef) map[string]*schemaMethod {
	t.Helper()
	methods := map[string]*schemaMethod{}
	for name, def := range defs {
		if def.Method == "" {
			continue
		}
		side, ok := schemaSides[def.Side]
		if !ok {
			t.Errorf("%s: unknown x-side %q", name, def.Side)
			continue
		}
		sm := methods[def.Method]
		if sm == nil {
			sm = &schemaMethod{side: side}
			methods[def.Method] = sm
		}
		if sm.side != side {
			t.Errorf("%s: x-side %q disagrees with the method's other types", name, def.Side)
		}
		switch {
		case strings.HasSuffix(name, "Request"):
			sm.request = name
		case strings.HasSuffix(name, "Notification"):
			sm.notification = name
		case strings.HasSuffix(name, "Response"):
			sm.result = name
		default:
			t.Errorf("%s (x-method %s): not a Request, Response or Notification", name, def.Method)
		}
	}
	return methods
}

// sdkName reports whether the Go type t is the SDK's type for the schema
// type name: the same name, or for types only in the unstable schema, the
// name with the prefix "Unstable".
func sdkName(t reflect.Type, name string) bool {
	return t != nil && t.PkgPath() == sdkModule && (t.Name() == name || t.Name() == "Unstable"+name)
}

func TestMethodTableMatchesSDKSchema(t *testing.T) {
	defs := loadSchema(t, "schema.unstable.json")
	schema := schemaMethods(t, defs)

	for name, sm := range schema {
		m, ok := Methods[name]
		if !ok {
			t.Errorf("%s (%v) is in the schema but not in Methods", name, sm.side)
			continue
		}
		if m.Name != name {
			t.Errorf("Methods[%q].Name = %q", name, m.Name)
		}
		if m.Side != sm.side {
			t.Errorf("%s: Side %v, schema says %v", name, m.Side, sm.side)
		}
		if m.Request != (sm.request != "") || m.Notification != (sm.notification != "") {
			t.Errorf("%s: Request %v, Notification %v; schema types %q, %q", name, m.Request, m.Notification, sm.request, sm.notification)
		}
		if m.Request != (m.Result != nil) {
			t.Errorf("%s: Request %v with Result %v", name, m.Request, m.Result)
		}
		switch {
		case m.Request && m.Notification:
			if !sdkName(m.Params, sm.request) || !sdkName(m.NotificationParams, sm.notification) {
				t.Errorf("%s: params types %v and %v, schema %s and %s", name, m.Params, m.NotificationParams, sm.request, sm.notification)
			}
		case m.Request:
			if !sdkName(m.Params, sm.request) {
				t.Errorf("%s: Params %v, schema %s", name, m.Params, sm.request)
			}
		case m.Notification:
			if !sdkName(m.Params, sm.notification) {
				t.Errorf("%s: Params %v, schema %s", name, m.Params, sm.notification)
			}
		}
		if m.Result != nil && !sdkName(m.Result, sm.result) {
			t.Errorf("%s: Result %v, schema %s", name, m.Result, sm.result)
		}
		if !m.Request && !m.Notification {
			t.Errorf("%s: neither a request nor a notification", name)
		}
		if (m.NotificationParams != nil) != (m.Request && m.Notification) {
			t.Errorf("%s: NotificationParams %v", name, m.NotificationParams)
		}
	}
	for name := range Methods {
		if _, ok := schema[name]; !ok {
			t.Errorf("%s is in Methods but not in the schema", name)
		}
	}
	if len(Methods) != len(schema) {
		t.Errorf("Methods has %d entries, the schema %d methods", len(Methods), len(schema))
	}
}

func TestMethodStable(t *testing.T) {
	stable := schemaMethods(t, loadSchema(t, "schema.json"))
	for name, m := range Methods {
		sm, ok := stable[name]
		if m.Stable != ok {
			t.Errorf("%s: Stable %v, in the stable schema %v", name, m.Stable, ok)
		}
		if !ok {
			continue
		}
		// Stable types keep their schema names, without "Unstable".
		want := sm.request
		if want == "" {
			want = sm.notification
		}
		if m.Params.Name() != want || sm.result != "" && m.Result.Name() != sm.result {
			t.Errorf("%s: types %v, %v; stable schema %s, %s", name, m.Params, m.Result, want, sm.result)
		}
	}
}

// The required members CheckParams and CheckResult insist on are the
// schema's.
func TestRequiredMatchesSchema(t *testing.T) {
	defs := loadSchema(t, "schema.unstable.json")
	for _, m := range Methods {
		for _, typ := range []reflect.Type{m.Params, m.Result, m.NotificationParams} {
			if typ == nil {
				continue
			}
			name := strings.TrimPrefix(typ.Name(), "Unstable")
			def, ok := defs[name]
			if !ok {
				t.Errorf("%s: no schema type %s", m.Name, name)
				continue
			}
			got := slices.Sorted(slices.Values(required()[typ]))
			want := slices.Sorted(slices.Values(def.Required))
			if !slices.Equal(got, want) {
				t.Errorf("%s: %v requires %q, the schema %q", m.Name, typ, got, want)
			}
		}
	}
}

// Every method name constant of the SDK is in the table, on its side.
func TestMethodTableHasSDKConstants(t *testing.T) {
	file := filepath.Join(sdkDir(t), "constants_gen.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Skipf("SDK constants: %v", err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		spec, ok := node.(*ast.ValueSpec)
		if !ok || len(spec.Values) != 1 {
			return true
		}
		lit, ok := spec.Values[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		var side Side
		switch ident := spec.Names[0].Name; {
		case strings.HasPrefix(ident, "AgentMethod"):
			side = ToAgent
		case strings.HasPrefix(ident, "ClientMethod"):
			side = ToClient
		default:
			return true
		}
		n++
		if !Typed(name, side) {
			t.Errorf("%s = %q is not typed %v", spec.Names[0].Name, name, side)
		}
		return true
	})
	if n < 40 {
		t.Errorf("found %d method constants in %s", n, file)
	}
}

func TestTyped(t *testing.T) {
	tests := []struct {
		method string
		dir    Side
		want   bool
	}{
		{"session/prompt", ToAgent, true},
		{"session/prompt", ToClient, false},
		{"session/update", ToClient, true},
		{"session/update", ToAgent, false},
		{"mcp/message", ToAgent, true},
		{"mcp/message", ToClient, true},
		{MethodCancelRequest, ToAgent, true},
		{MethodCancelRequest, ToClient, true},
		{"_zed/ping", ToAgent, false},
		{"_zed/ping", ToClient, false},
		{"session/unknown", ToAgent, false},
	}
	for _, tt := range tests {
		if got := Typed(tt.method, tt.dir); got != tt.want {
			t.Errorf("Typed(%q, %v) = %v", tt.method, tt.dir, got)
		}
	}
	if m, ok := Lookup("session/prompt"); !ok || !m.Request || m.Params.Name() != "PromptRequest" || m.Result.Name() != "PromptResponse" {
		t.Errorf("Lookup(session/prompt) = %+v, %v", m, ok)
	}
	if m, ok := Lookup("mcp/message"); !ok || m.ParamsType(Notification).Name() != "UnstableMessageMcpNotification" ||
		m.ParamsType(Request).Name() != "UnstableMessageMcpRequest" {
		t.Errorf("Lookup(mcp/message) = %+v, %v", m, ok)
	}
}

func TestCheckParams(t *testing.T) {
	tests := []struct {
		method, params string
		want           string // error, or "" for a fit
	}{
		{"session/prompt", `{"sessionId":"s","prompt":[{"type":"text","text":"hi"}],"_meta":{"x":1},"future":true}`, ""},
		{"session/prompt", `{"sessionId":"s","prompt":"hi"}`,
			"session/prompt: params: json: cannot unmarshal string into field prompt of type array"},
		{"session/prompt", `{"sessionId":7,"prompt":[]}`,
			"session/prompt: params: json: cannot unmarshal number into field sessionId of type string"},
		{"session/prompt", `{"prompt":[]}`, "session/prompt: params: missing sessionId"},
		{"session/prompt", `{"s\u0065ssionId":"s","prompt":[]}`, ""},
		{"session/prompt", ``, "session/prompt: params: missing (want an object with prompt, sessionId)"},
		{"session/prompt", `null`, "session/prompt: params: missing (want an object with prompt, sessionId)"},
		{"session/prompt", `[1]`, "session/prompt: params: json: cannot unmarshal array into object"},
		{"session/update", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`, ""},
		{"session/update", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":3}}}`,
			"session/update: params: invalid variant payload"},
		{"session/list", ``, ""},
		{"session/cancel", `{"sessionId":"s"}`, ""},
		{"initialize", `{"protocolVersion":"1"}`,
			"initialize: params: json: cannot unmarshal string into field protocolVersion of type integer"},
		{"session/set_config_option", ``, "session/set_config_option: params: missing (want an object with configId, sessionId)"},
		{"session/set_config_option", `{"sessionId":"s","configId":"c","value":"v"}`, ""},
		{"mcp/message", `{"connectionId":"c","method":""}`, "mcp/message: params: method is required"},
		{"_x/y", `{}`, "_x/y: not an ACP method of acp-go-sdk"},
	}
	for _, tt := range tests {
		var params []byte
		if tt.params != "" {
			params = []byte(tt.params)
		}
		before := string(params)
		err := CheckParams(tt.method, params)
		if got := errString(err); got != tt.want {
			t.Errorf("CheckParams(%s, %s) = %q, want %q", tt.method, tt.params, got, tt.want)
		}
		if string(params) != before {
			t.Errorf("CheckParams(%s) modified params", tt.method)
		}
	}
}

func TestCheckResult(t *testing.T) {
	tests := []struct {
		method, result string
		want           string
	}{
		{"session/prompt", `{"stopReason":"end_turn"}`, ""},
		{"session/prompt", `{}`, "session/prompt: result: missing stopReason"},
		{"initialize", `{"protocolVersion":1}`, ""},
		{"mcp/message", `[1,"anything"]`, ""},
		{"session/cancel", `{}`, "session/cancel: a notification has no result"},
	}
	for _, tt := range tests {
		if got := errString(CheckResult(tt.method, []byte(tt.result))); got != tt.want {
			t.Errorf("CheckResult(%s, %s) = %q, want %q", tt.method, tt.result, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
