package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	md "github.com/blaiseagent/blaise-agent/internal/support/markdown"
	"github.com/blaiseagent/blaise-agent/internal/terminal/sessionview"
)

// A conversation is a transcript as a session's page shows it: blocks of
// the person's prompts, the agent's answers and thoughts, tool calls,
// plans, and the session's own lines (runs, permissions, plugs). It is a
// [sessionview.View]: the Log that renders `sessions log` feeds it.
// Blocks keep their id as the transcript grows, so that a page that
// follows it replaces a block that changed (a tool call's status, an
// answer that streams) by its id.
type conversation struct {
	blocks []*block // since the last prune
	// chunk is the number of the transcript's chunk being read, and added
	// the blocks its records added: a block's id, b<chunk>-<added>, is
	// the same on every page and stream that shows it.
	chunk int64
	added int
	tools map[sdk.ToolCallId]*block
	open  *block // the text block that chunks of its kind go to
	plan  *block // the turn's plan
	run   int
	dirty []*block          // blocks added or changed since the last changed()
	diffs map[string]string // a file's path -> the id of its latest diff shown
}

// block is one block of a conversation.
type block struct {
	ID    string
	Kind  string // user, agent, thought, tool, plan, note, run
	Text  string // user, agent, thought
	Tool  *toolCard
	Plan  []sdk.PlanEntry
	Note  sessionview.Note
	Run   int                  // run: its number
	Info  *lifecycle.RunRecord // run: as the record keeps it, when it does
	Stop  string               // note: the stop reason of a turn that ended
	call  sdk.ToolCallId       // tool: its call's id
	dirty bool

	// Download, on a note of what is left out, links to the transcript's
	// download, which holds it.
	Download string
}

// NoteKind names a note's kind for its class.
func (b *block) NoteKind() string {
	switch b.Note.Kind {
	case sessionview.NotePermission:
		return "permission"
	case sessionview.NoteDecision:
		return "decision"
	case sessionview.NoteError:
		return "error"
	}
	return "info"
}

// prune forgets the blocks that no later record changes, but for the runs'
// lines, which show what the record keeps of them: a conversation that
// follows a session for long holds what can still change.
func (c *conversation) prune() {
	kept := c.blocks[:0]
	for _, b := range c.blocks {
		if b.Kind == "run" || b == c.open || b == c.plan || c.tools[toolID(b)] == b {
			kept = append(kept, b)
		}
	}
	clear(c.blocks[len(kept):])
	c.blocks = kept
}

// toolID is the call id a tool block is kept under, if any.
func toolID(b *block) sdk.ToolCallId {
	if b.Tool == nil {
		return ""
	}
	return b.call
}

// runs are the blocks that start runs.
func (c *conversation) runs() []*block {
	var rs []*block
	for _, b := range c.blocks {
		if b.Kind == "run" {
			rs = append(rs, b)
		}
	}
	return rs
}

// toolCard is a tool call as its updates leave it.
type toolCard struct {
	Title, Kind, Status string
	Locations           []location
	Content             []sdk.ToolCallContent
}

// location is a file a tool call works on, linked to the diff of it shown
// on the page: the call's own, or else the latest before it.
type location struct {
	sdk.ToolCallLocation
	Href string // "" when no diff of its path is shown
}

// DiffID is the id of the diff that is the content i of a tool card.
func (b *block) DiffID(i int) string { return fmt.Sprintf("%s-diff-%d", b.ID, i) }

// linkTool notes the diffs of a tool card, and links its locations to the
// diffs of their paths.
func (c *conversation) linkTool(b *block, locs []sdk.ToolCallLocation) {
	for i, cc := range b.Tool.Content {
		if cc.Diff != nil {
			c.diffs[cc.Diff.Path] = b.DiffID(i)
		}
	}
	b.Tool.Locations = b.Tool.Locations[:0]
	for _, l := range locs {
		loc := location{ToolCallLocation: l}
		if id, ok := c.diffs[l.Path]; ok {
			loc.Href = "#" + id
		}
		b.Tool.Locations = append(b.Tool.Locations, loc)
	}
}

func newConversation() *conversation {
	return &conversation{tools: map[sdk.ToolCallId]*block{}, diffs: map[string]string{}}
}

// add appends a block of kind and closes the open text block.
func (c *conversation) add(b *block) *block {
	c.added++
	b.ID = fmt.Sprintf("b%d-%d", c.chunk, c.added)
	c.blocks = append(c.blocks, b)
	c.open = nil
	c.touch(b)
	return b
}

// inChunk says that the records fed next are of the chunk numbered n.
func (c *conversation) inChunk(n int64) {
	if n != c.chunk {
		c.chunk, c.added = n, 0
	}
}

func (c *conversation) touch(b *block) {
	if !b.dirty {
		b.dirty = true
		c.dirty = append(c.dirty, b)
	}
}

// changed returns the blocks added or changed since it was last called.
func (c *conversation) changed() []*block {
	d := c.dirty
	c.dirty = nil
	for _, b := range d {
		b.dirty = false
	}
	return d
}

// maxText is where a text block ends and the next chunk of its kind
// starts another: a block is sent whole each time it grows, and one answer
// may stream without end.
const maxText = 256 << 10

// text adds a chunk to the open block of its kind, or starts one.
func (c *conversation) text(kind, s string) {
	if c.open == nil || c.open.Kind != kind || len(c.open.Text) >= maxText {
		c.add(&block{Kind: kind})
		c.open = c.blocks[len(c.blocks)-1]
	}
	c.open.Text += s
	c.touch(c.open)
}

// textKinds are the blocks of the updates that stream text.
var textKinds = map[string]string{"user_message_chunk": "user", "agent_message_chunk": "agent", "agent_thought_chunk": "thought"}

// Notification renders a session update.
func (c *conversation) Notification(method string, params json.RawMessage) {
	if method != sdk.ClientMethodSessionUpdate {
		return
	}
	var n struct {
		Update json.RawMessage `json:"update"`
	}
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	if json.Unmarshal(params, &n) != nil || json.Unmarshal(n.Update, &head) != nil {
		c.Notice("· a session update that cannot be read")
		return
	}
	switch head.Kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
		var u struct {
			Content sdk.ContentBlock `json:"content"`
		}
		json.Unmarshal(n.Update, &u)
		c.text(textKinds[head.Kind], client.ContentText(u.Content))
	case "tool_call":
		var u sdk.SessionUpdateToolCall
		json.Unmarshal(n.Update, &u)
		title := u.Title
		if title == "" {
			title = string(u.ToolCallId)
		}
		b := c.add(&block{Kind: "tool", call: u.ToolCallId, Tool: &toolCard{Title: title, Kind: string(u.Kind), Status: string(u.Status), Content: u.Content}})
		c.linkTool(b, u.Locations)
		c.tools[u.ToolCallId] = b
	case "tool_call_update":
		var u sdk.SessionToolCallUpdate
		json.Unmarshal(n.Update, &u)
		b := c.tools[u.ToolCallId]
		if b == nil { // an update of a call the transcript does not hold
			b = c.add(&block{Kind: "tool", call: u.ToolCallId, Tool: &toolCard{Title: string(u.ToolCallId)}})
			c.tools[u.ToolCallId] = b
		}
		t := b.Tool
		if u.Title != nil {
			t.Title = *u.Title
		}
		if u.Kind != nil {
			t.Kind = string(*u.Kind)
		}
		if u.Status != nil {
			t.Status = string(*u.Status)
		}
		locs := u.Locations
		if locs == nil {
			for _, l := range t.Locations {
				locs = append(locs, l.ToolCallLocation)
			}
		}
		if u.Content != nil {
			t.Content = u.Content
		}
		c.linkTool(b, locs)
		c.touch(b)
	case "plan":
		var u sdk.SessionUpdatePlan
		json.Unmarshal(n.Update, &u)
		if c.plan == nil {
			c.plan = c.add(&block{Kind: "plan"})
		}
		c.plan.Plan = u.Entries
		c.touch(c.plan)
	case "current_mode_update":
		var u sdk.SessionCurrentModeUpdate
		json.Unmarshal(n.Update, &u)
		c.Notice("· mode: " + string(u.CurrentModeId))
	case "session_info_update":
		var u sdk.SessionSessionInfoUpdate
		json.Unmarshal(n.Update, &u)
		if u.Title != nil && *u.Title != "" {
			c.Notice("· title: " + *u.Title)
		}
	}
}

// Notice adds a line of the session's.
func (c *conversation) Notice(msg string) { c.Note(sessionview.Note{Text: msg}) }

// Note adds a line of the session's: a run's start separates runs.
func (c *conversation) Note(n sessionview.Note) {
	if n.Kind == sessionview.NoteRun {
		c.run++
		c.add(&block{Kind: "run", Note: n, Run: c.run}).ID = fmt.Sprintf("run-%d", c.run)
		c.plan = nil
		clear(c.tools)
		return
	}
	c.add(&block{Kind: "note", Note: n})
}

// EndTurn closes the turn; one that ended says why.
func (c *conversation) EndTurn(stop string) {
	c.open = nil
	if stop != "" {
		c.add(&block{Kind: "note", Stop: stop})
		c.plan = nil
		clear(c.tools) // a turn's tool calls end with it
	}
}

// markdown renders an agent's Markdown as inert HTML: raw HTML is omitted
// and dangerous link destinations (javascript: and the like) are not
// linked.
func markdown(s string) template.HTML { return template.HTML(md.HTML(s)) }

// diffLine is a line of a diff as a tool card shows it.
type diffLine struct {
	Op   string // " ", "-" or "+"
	Text string
}

// diffContext is how many unchanged lines a diff shows around a change.
const diffContext = 3

// lineDiff shows the lines that differ between old and new, between the
// lines both start and end with (a few of them shown around): enough for
// an agent's edit, which changes one place of a file.
func lineDiff(old *string, new string) []diffLine {
	var a []string
	if old != nil {
		a = strings.SplitAfter(*old, "\n")
	}
	b := strings.SplitAfter(new, "\n")
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []diffLine
	line := func(op, s string) {
		if s = strings.TrimSuffix(s, "\n"); s != "" || op != " " {
			out = append(out, diffLine{op, s})
		}
	}
	for _, s := range a[max(0, pre-diffContext):pre] {
		line(" ", s)
	}
	for _, s := range a[pre : len(a)-suf] {
		line("-", s)
	}
	for _, s := range b[pre : len(b)-suf] {
		line("+", s)
	}
	for _, s := range b[len(b)-suf : min(len(b), len(b)-suf+diffContext)] {
		line(" ", s)
	}
	return out
}
