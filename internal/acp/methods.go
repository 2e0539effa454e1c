package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// Side says which peer handles a method: the receiver of its requests and
// notifications.
type Side uint8

// The sides of ACP methods, and the directions of messages.
const (
	ToAgent  Side = iota // handled by the agent: sent client→agent (x-side "agent")
	ToClient             // handled by the client: sent agent→client (x-side "client")
	Both                 // sent either way
)

func (s Side) String() string {
	switch s {
	case ToAgent:
		return "to_agent"
	case ToClient:
		return "to_client"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// MethodCancelRequest is the ACP method that cancels a request in flight,
// in either direction. acp-go-sdk handles it in its connection and has no
// constant for it.
const MethodCancelRequest = "$/cancel_request"

// A Method describes an ACP method and the acp-go-sdk types of its messages.
type Method struct {
	Name         string
	Side         Side
	Request      bool         // the method is called as a request
	Notification bool         // the method is sent as a notification
	Params       reflect.Type // the params of the request, or else of the notification
	Result       reflect.Type // the result of the request; nil for a notification
	Stable       bool         // the method is in the stable ACP schema

	// NotificationParams is the params type of the notification form of a
	// method that is both a request and a notification (mcp/message); nil
	// otherwise.
	NotificationParams reflect.Type
}

// ParamsType returns the params type of a message of kind k (Request or
// Notification) of the method.
func (m *Method) ParamsType(k Kind) reflect.Type {
	if k == Notification && m.NotificationParams != nil {
		return m.NotificationParams
	}
	return m.Params
}

func request[P, R any](name string, side Side, stable bool) *Method {
	return &Method{Name: name, Side: side, Request: true,
		Params: reflect.TypeFor[P](), Result: reflect.TypeFor[R](), Stable: stable}
}

func notification[P any](name string, side Side, stable bool) *Method {
	return &Method{Name: name, Side: side, Notification: true,
		Params: reflect.TypeFor[P](), Stable: stable}
}

// Methods lists the ACP methods of acp-go-sdk (v0.13.0, unstable schema
// included) by name. It must not be modified.
var Methods = index(
	// Handled by the agent.
	request[sdk.AuthenticateRequest, sdk.AuthenticateResponse](sdk.AgentMethodAuthenticate, ToAgent, true),
	notification[sdk.UnstableDidChangeDocumentNotification](sdk.AgentMethodDocumentDidChange, ToAgent, false),
	notification[sdk.UnstableDidCloseDocumentNotification](sdk.AgentMethodDocumentDidClose, ToAgent, false),
	notification[sdk.UnstableDidFocusDocumentNotification](sdk.AgentMethodDocumentDidFocus, ToAgent, false),
	notification[sdk.UnstableDidOpenDocumentNotification](sdk.AgentMethodDocumentDidOpen, ToAgent, false),
	notification[sdk.UnstableDidSaveDocumentNotification](sdk.AgentMethodDocumentDidSave, ToAgent, false),
	request[sdk.InitializeRequest, sdk.InitializeResponse](sdk.AgentMethodInitialize, ToAgent, true),
	request[sdk.UnstableLogoutRequest, sdk.UnstableLogoutResponse](sdk.AgentMethodLogout, ToAgent, false),
	notification[sdk.UnstableAcceptNesNotification](sdk.AgentMethodNesAccept, ToAgent, false),
	request[sdk.UnstableCloseNesRequest, sdk.UnstableCloseNesResponse](sdk.AgentMethodNesClose, ToAgent, false),
	notification[sdk.UnstableRejectNesNotification](sdk.AgentMethodNesReject, ToAgent, false),
	request[sdk.UnstableStartNesRequest, sdk.UnstableStartNesResponse](sdk.AgentMethodNesStart, ToAgent, false),
	request[sdk.UnstableSuggestNesRequest, sdk.UnstableSuggestNesResponse](sdk.AgentMethodNesSuggest, ToAgent, false),
	request[sdk.UnstableDisableProvidersRequest, sdk.UnstableDisableProvidersResponse](sdk.AgentMethodProvidersDisable, ToAgent, false),
	request[sdk.UnstableListProvidersRequest, sdk.UnstableListProvidersResponse](sdk.AgentMethodProvidersList, ToAgent, false),
	request[sdk.UnstableSetProvidersRequest, sdk.UnstableSetProvidersResponse](sdk.AgentMethodProvidersSet, ToAgent, false),
	notification[sdk.CancelNotification](sdk.AgentMethodSessionCancel, ToAgent, true),
	request[sdk.CloseSessionRequest, sdk.CloseSessionResponse](sdk.AgentMethodSessionClose, ToAgent, true),
	request[sdk.UnstableForkSessionRequest, sdk.UnstableForkSessionResponse](sdk.AgentMethodSessionFork, ToAgent, false),
	request[sdk.ListSessionsRequest, sdk.ListSessionsResponse](sdk.AgentMethodSessionList, ToAgent, true),
	request[sdk.LoadSessionRequest, sdk.LoadSessionResponse](sdk.AgentMethodSessionLoad, ToAgent, true),
	request[sdk.NewSessionRequest, sdk.NewSessionResponse](sdk.AgentMethodSessionNew, ToAgent, true),
	request[sdk.PromptRequest, sdk.PromptResponse](sdk.AgentMethodSessionPrompt, ToAgent, true),
	request[sdk.ResumeSessionRequest, sdk.ResumeSessionResponse](sdk.AgentMethodSessionResume, ToAgent, true),
	request[sdk.SetSessionConfigOptionRequest, sdk.SetSessionConfigOptionResponse](sdk.AgentMethodSessionSetConfigOption, ToAgent, true),
	request[sdk.SetSessionModeRequest, sdk.SetSessionModeResponse](sdk.AgentMethodSessionSetMode, ToAgent, true),
	request[sdk.UnstableSetSessionModelRequest, sdk.UnstableSetSessionModelResponse](sdk.AgentMethodSessionSetModel, ToAgent, false),

	// Handled by the client.
	notification[sdk.UnstableCompleteElicitationNotification](sdk.ClientMethodElicitationComplete, ToClient, false),
	request[sdk.UnstableCreateElicitationRequest, sdk.UnstableCreateElicitationResponse](sdk.ClientMethodElicitationCreate, ToClient, false),
	request[sdk.ReadTextFileRequest, sdk.ReadTextFileResponse](sdk.ClientMethodFsReadTextFile, ToClient, true),
	request[sdk.WriteTextFileRequest, sdk.WriteTextFileResponse](sdk.ClientMethodFsWriteTextFile, ToClient, true),
	request[sdk.UnstableConnectMcpRequest, sdk.UnstableConnectMcpResponse](sdk.ClientMethodMcpConnect, ToClient, false),
	request[sdk.UnstableDisconnectMcpRequest, sdk.UnstableDisconnectMcpResponse](sdk.ClientMethodMcpDisconnect, ToClient, false),
	request[sdk.RequestPermissionRequest, sdk.RequestPermissionResponse](sdk.ClientMethodSessionRequestPermission, ToClient, true),
	notification[sdk.SessionNotification](sdk.ClientMethodSessionUpdate, ToClient, true),
	request[sdk.CreateTerminalRequest, sdk.CreateTerminalResponse](sdk.ClientMethodTerminalCreate, ToClient, true),
	request[sdk.KillTerminalRequest, sdk.KillTerminalResponse](sdk.ClientMethodTerminalKill, ToClient, true),
	request[sdk.TerminalOutputRequest, sdk.TerminalOutputResponse](sdk.ClientMethodTerminalOutput, ToClient, true),
	request[sdk.ReleaseTerminalRequest, sdk.ReleaseTerminalResponse](sdk.ClientMethodTerminalRelease, ToClient, true),
	request[sdk.WaitForTerminalExitRequest, sdk.WaitForTerminalExitResponse](sdk.ClientMethodTerminalWaitForExit, ToClient, true),

	// Sent either way.
	&Method{Name: sdk.AgentMethodMcpMessage, Side: Both, Request: true, Notification: true,
		Params:             reflect.TypeFor[sdk.UnstableMessageMcpRequest](),
		Result:             reflect.TypeFor[sdk.UnstableMessageMcpResponse](),
		NotificationParams: reflect.TypeFor[sdk.UnstableMessageMcpNotification]()},
	notification[sdk.UnstableCancelRequestNotification](MethodCancelRequest, Both, false),
)

func index(methods ...*Method) map[string]*Method {
	t := make(map[string]*Method, len(methods))
	for _, m := range methods {
		if t[m.Name] != nil {
			panic("acp: duplicate method " + m.Name)
		}
		t[m.Name] = m
	}
	return t
}

// Lookup returns the description of an ACP method.
func Lookup(method string) (*Method, bool) {
	m, ok := Methods[method]
	return m, ok
}

// IsExtension reports whether method is an extension method: its name
// begins with an underscore (ACP's rule for methods outside the protocol).
func IsExtension(method string) bool { return strings.HasPrefix(method, "_") }

// Typed reports whether messages of method flowing in direction dir (ToAgent
// for client→agent, ToClient for agent→client) are ACP methods that the SDK
// types, which reach plugs. Extension methods ("_…"), unknown methods and
// known methods sent the wrong way are not typed.
func Typed(method string, dir Side) bool {
	m, ok := Methods[method]
	return ok && (m.Side == Both || m.Side == dir)
}

// required lists the top-level members each params and result type must
// have: the fields whose JSON tags lack omitempty, corrected where the SDK's
// tags do not say (unions, whose fields are all "-", and fields with a
// default in the schema). Built at first use, not at every process's start.
var required = sync.OnceValue(func() map[reflect.Type][]string {
	overrides := map[reflect.Type][]string{
		reflect.TypeFor[sdk.SetSessionConfigOptionRequest]():    {"configId", "sessionId"},
		reflect.TypeFor[sdk.UnstableCreateElicitationRequest](): {"message"},
		reflect.TypeFor[sdk.InitializeResponse]():               {"protocolVersion"}, // authMethods defaults to []
	}
	r := make(map[reflect.Type][]string)
	for _, m := range Methods {
		for _, t := range []reflect.Type{m.Params, m.Result, m.NotificationParams} {
			if t == nil {
				continue
			}
			if o, ok := overrides[t]; ok {
				r[t] = o
			} else {
				r[t] = requiredFields(t)
			}
		}
	}
	return r
})

// requiredFields returns the JSON names of t's fields without omitempty.
func requiredFields(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" || name == "" || strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			continue
		}
		names = append(names, name)
	}
	return names
}

// CheckParams reports whether params, the raw params of a message of an ACP
// method, fit the SDK's params type of the method: they decode into it, have
// its required members, and pass its Validate method. nil params (absent)
// fit only a type without required members. For a method that is both a
// request and a notification, the request's type is used.
//
// CheckParams only reads params. The error names the method and what does
// not fit.
func CheckParams(method string, params []byte) error {
	m, ok := Methods[method]
	if !ok {
		return fmt.Errorf("%s: not an ACP method of acp-go-sdk", method)
	}
	if err := check(m.Params, params); err != nil {
		return fmt.Errorf("%s: params: %w", method, err)
	}
	return nil
}

// SessionScoped reports whether method is an ACP method whose params
// require a sessionId: one a client sends to a session, not to the agent.
func SessionScoped(method string) bool {
	m, ok := Methods[method]
	return ok && slices.Contains(required()[m.Params], "sessionId")
}

// CheckResult is like CheckParams for the result of a response to a request
// of method.
func CheckResult(method string, result []byte) error {
	m, ok := Methods[method]
	if !ok {
		return fmt.Errorf("%s: not an ACP method of acp-go-sdk", method)
	}
	if m.Result == nil {
		return fmt.Errorf("%s: a notification has no result", method)
	}
	if err := check(m.Result, result); err != nil {
		return fmt.Errorf("%s: result: %w", method, err)
	}
	return nil
}

// A validator is an SDK type with a Validate method.
type validator interface{ Validate() error }

// check reports whether the raw JSON value data fits type t.
func check(t reflect.Type, data []byte) error {
	req := required()[t]
	if data == nil || string(data) == "null" {
		if t.Kind() == reflect.Interface {
			return nil
		}
		if len(req) > 0 {
			return fmt.Errorf("missing (want an object with %s)", strings.Join(req, ", "))
		}
		data = []byte("{}")
	}
	v := reflect.New(t)
	if err := json.Unmarshal(data, v.Interface()); err != nil {
		return DescribeJSONError(err)
	}
	if missing := missingMembers(data, req); len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if val, ok := v.Interface().(validator); ok {
		if err := val.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// missingMembers returns the names in req that are not members of the JSON
// object obj.
func missingMembers(obj []byte, req []string) []string {
	if len(req) == 0 {
		return nil
	}
	have := make([]bool, len(req))
	s := scanner{data: obj}
	s.skipSpace()
	if s.expect('{', "") != nil {
		return req
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		return req
	}
	for {
		s.skipSpace()
		start := s.pos
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			break
		}
		esc, err := s.string()
		if err != nil {
			break
		}
		key := s.data[start+1 : s.pos-1]
		if esc {
			key = []byte(unquote(s.data[start:s.pos]))
		}
		for i, name := range req {
			if string(key) == name {
				have[i] = true
			}
		}
		if s.expect(':', "") != nil || s.value(1) != nil || s.expect(',', "") != nil {
			break
		}
	}
	var missing []string
	for i, name := range req {
		if !have[i] {
			missing = append(missing, name)
		}
	}
	return missing
}

// DescribeJSONError rewrites a decoding error of encoding/json in terms of
// JSON rather than of Go types, for messages people read.
func DescribeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Type != nil {
		if te.Field == "" {
			return fmt.Errorf("json: cannot unmarshal %s into %s", te.Value, jsonKind(te.Type))
		}
		return fmt.Errorf("json: cannot unmarshal %s into field %s of type %s", te.Value, te.Field, jsonKind(te.Type))
	}
	return err
}

// jsonKind names the JSON values a Go type decodes.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "value"
}
