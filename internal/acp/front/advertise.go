package front

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"time"

	"github.com/blaiseagent/blaise-agent/internal/acp"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// fixedInit is what initialize is answered with when neither the agent
// nor a session of the configuration gave an answer: the baseline of ACP (text prompts, stdio
// MCP servers, no authentication) and what the front end itself serves.
// agentInfo names blaise-agent (Server.Version).
const fixedInit = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"sessionCapabilities":{"list":{}}},"authMethods":[]}`

// recentTranscripts bounds how many sessions initialize looks at for the
// chain's last answer.
const recentTranscripts = 5

// advertise is the initialize result of the connection: known, the
// answer of the chain (or of the agent) to an initialize, else fixedInit;
// with the capabilities the front end always serves on (loadSession,
// session/list), and the protocol version the client asked for when that
// is not newer.
func (s *Server) advertise(known, clientParams []byte) []byte {
	var res map[string]any
	if json.Unmarshal(known, &res) != nil || res == nil {
		res = nil
		_ = json.Unmarshal([]byte(fixedInit), &res)
	}
	if res["agentInfo"] == nil {
		res["agentInfo"] = map[string]any{"name": "blaise-agent", "version": s.Version}
	}
	caps, _ := res["agentCapabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["loadSession"] = true
	sc, _ := caps["sessionCapabilities"].(map[string]any)
	if sc == nil {
		sc = map[string]any{}
	}
	sc["list"] = map[string]any{}
	caps["sessionCapabilities"] = sc
	res["agentCapabilities"] = caps
	var asked struct {
		ProtocolVersion float64 `json:"protocolVersion"`
	}
	if json.Unmarshal(clientParams, &asked) == nil && asked.ProtocolVersion > 0 {
		if v, ok := res["protocolVersion"].(float64); !ok || asked.ProtocolVersion < v {
			res["protocolVersion"] = asked.ProtocolVersion
		}
	}
	told, err := json.Marshal(res)
	if err != nil {
		return []byte(fixedInit)
	}
	return told
}

// ofConfig tells whether r is a session of the front end's configuration.
// The sessions of a server's agent are all those Sessions lists: each
// runner has a configuration of its own.
func (s *Server) ofConfig(r *lifecycle.Record) bool {
	if r.AgentName != "" {
		return true
	}
	cfg, _ := filepath.Abs(s.Config)
	return r.Config == cfg
}

// lastInitResult finds the chain's answer to initialize in the transcripts
// of the newest sessions of the configuration.
func (s *Server) lastInitResult(ctx context.Context) []byte {
	recs, err := s.Sessions.List(ctx)
	if err != nil {
		return nil
	}
	slices.SortFunc(recs, func(a, b *lifecycle.Record) int { return b.Created.Compare(a.Created) })
	tried := 0
	for _, r := range recs {
		if !s.ofConfig(r) {
			continue
		}
		if res := initResult(ctx, s.Sessions, r.ID); res != nil {
			return res
		}
		if tried++; tried == recentTranscripts {
			break
		}
	}
	return nil
}

// initResult reads the successful answer to the first initialize of a
// transcript; it is among the first records.
func initResult(ctx context.Context, sessions Sessions, session string) []byte {
	f, err := sessions.ReadTranscript(ctx, session)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var id string
	for n := 0; n < 16 && sc.Scan(); n++ {
		var rec acp.Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			return nil
		}
		switch {
		case id == "" && rec.Direction == acp.ToAgent.Direction() && rec.Method == "initialize":
			id = acp.IDKey(rec.ID)
		case id != "" && rec.Direction == acp.ToClient.Direction() && rec.Kind == acp.Response.String() && acp.IDKey(rec.ID) == id:
			m, err := acp.Parse(rec.Message)
			if err != nil || m.Error != nil {
				return nil
			}
			return m.Result
		}
	}
	return nil
}

// listSessions answers session/list from the store: the sessions of the
// configuration that are paused or running and have an ACP session, newest
// first, with the directory they were opened in. No agent is asked.
func (c *conn) listSessions(m *acp.Message) {
	var p struct {
		Cwd *string `json:"cwd"`
	}
	_ = json.Unmarshal(m.Params, &p)
	recs, err := c.srv.Sessions.List(c.ctx)
	if err != nil {
		c.replyError(m.ID, acp.InternalError, "Internal error", map[string]string{"reason": "listing the sessions: " + err.Error()})
		return
	}
	slices.SortFunc(recs, func(a, b *lifecycle.Record) int { return b.Updated.Compare(a.Updated) })
	type info struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		UpdatedAt string `json:"updatedAt"`
		Title     string `json:"title,omitempty"`
	}
	list := []info{}
	now := time.Now()
	for _, r := range recs {
		if !c.srv.ofConfig(r) || r.ACPSessionID == "" || (r.State != lifecycle.Paused && r.State != lifecycle.Active) {
			continue
		}
		if _, due := lifecycle.Due(r, now); due {
			continue
		}
		if r.CWD == "" || (p.Cwd != nil && *p.Cwd != r.CWD) {
			continue
		}
		list = append(list, info{SessionID: r.ID, Cwd: r.CWD, UpdatedAt: r.Updated.UTC().Format(time.RFC3339), Title: r.Title})
	}
	out, _ := json.Marshal(map[string]any{"sessions": list})
	c.reply(m.ID, out)
}
