package client

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"
)

// A renderer writes session updates on a screen, as [Terminal] describes.
type renderer struct {
	s *screen
}

// update renders one session update.
func (r renderer) update(raw json.RawMessage) error {
	var head struct {
		Kind string `json:"sessionUpdate"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	switch head.Kind {
	case "agent_message_chunk":
		u, err := decode[sdk.SessionUpdateAgentMessageChunk](raw)
		if err != nil {
			return err
		}
		r.s.text(messageStream, ContentText(u.Content))
	case "agent_thought_chunk":
		u, err := decode[sdk.SessionUpdateAgentThoughtChunk](raw)
		if err != nil {
			return err
		}
		r.s.text(thoughtStream, ContentText(u.Content))
	case "user_message_chunk":
		u, err := decode[sdk.SessionUpdateUserMessageChunk](raw)
		if err != nil {
			return err
		}
		r.s.text(userStream, ContentText(u.Content))
	case "tool_call":
		u, err := decode[sdk.SessionUpdateToolCall](raw)
		if err != nil {
			return err
		}
		r.toolCall(u)
	case "tool_call_update":
		u, err := decode[sdk.SessionToolCallUpdate](raw)
		if err != nil {
			return err
		}
		r.toolCallUpdate(u)
	case "plan":
		u, err := decode[sdk.SessionUpdatePlan](raw)
		if err != nil {
			return err
		}
		r.plan(u.Entries)
	case "current_mode_update":
		u, err := decode[sdk.SessionCurrentModeUpdate](raw)
		if err != nil {
			return err
		}
		r.s.endLine()
		r.s.line(r.s.paint(styleDim, "· mode: "+string(u.CurrentModeId)))
	case "session_info_update":
		u, err := decode[sdk.SessionSessionInfoUpdate](raw)
		if err != nil {
			return err
		}
		if u.Title != nil && *u.Title != "" {
			r.s.endLine()
			r.s.line(r.s.paint(styleDim, "· title: "+*u.Title))
		}
	}
	return nil
}

// decode decodes one session update variant.
func decode[T any](raw json.RawMessage) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	return v, nil
}

func (r renderer) toolCall(u *sdk.SessionUpdateToolCall) {
	title := u.Title
	if title == "" {
		title = string(u.ToolCallId)
	}
	s := r.s.paint(styleCyan, "•") + " " + r.s.paint(styleBold, title)
	if u.Kind != "" {
		s += " " + r.s.paint(styleDim, "["+string(u.Kind)+"]")
	}
	if u.Status != "" {
		s += " " + r.status("("+string(u.Status)+")", u.Status)
	}
	r.s.endLine()
	r.s.line(s)
	r.toolContent(u.Content)
}

func (r renderer) toolCallUpdate(u *sdk.SessionToolCallUpdate) {
	var s string
	switch {
	case u.Title != nil && u.Status != nil:
		s = *u.Title + " " + r.status("("+string(*u.Status)+")", *u.Status)
	case u.Title != nil:
		s = *u.Title
	case u.Status != nil:
		s = r.status(string(*u.Status), *u.Status)
	}
	if s != "" {
		r.s.endLine()
		r.s.line("  ↳ " + s)
	}
	r.toolContent(u.Content)
}

// status styles s by a tool call status.
func (r renderer) status(s string, st sdk.ToolCallStatus) string {
	switch st {
	case sdk.ToolCallStatusCompleted:
		return r.s.paint(styleGreen, s)
	case sdk.ToolCallStatusFailed:
		return r.s.paint(styleRed, s)
	case sdk.ToolCallStatusInProgress:
		return r.s.paint(styleYellow, s)
	}
	return r.s.paint(styleDim, s)
}

// toolContent renders a tool call's content, indented by four spaces.
func (r renderer) toolContent(content []sdk.ToolCallContent) {
	if len(content) == 0 {
		return
	}
	r.s.endLine()
	for _, c := range content {
		var s string
		switch {
		case c.Content != nil:
			s = ContentText(c.Content.Content)
		case c.Diff != nil:
			s = "[diff " + c.Diff.Path + "]"
		case c.Terminal != nil:
			s = "[terminal " + c.Terminal.TerminalId + "]"
		}
		for l := range strings.Lines(strings.TrimSuffix(s, "\n")) {
			l = strings.TrimSuffix(l, "\n")
			if l == "" {
				r.s.line("")
			} else {
				r.s.line("    " + l)
			}
		}
	}
}

func (r renderer) plan(entries []sdk.PlanEntry) {
	r.s.endLine()
	if len(entries) == 0 {
		r.s.line(r.s.paint(styleBold, "plan:") + " (empty)")
		return
	}
	r.s.line(r.s.paint(styleBold, "plan:"))
	for i, e := range entries {
		var mark, style string
		switch e.Status {
		case sdk.PlanEntryStatusPending:
			mark, style = "[ ]", ""
		case sdk.PlanEntryStatusInProgress:
			mark, style = "[~]", styleYellow
		case sdk.PlanEntryStatusCompleted:
			mark, style = "[x]", styleGreen
		default:
			mark, style = "[?]", ""
		}
		r.s.line(fmt.Sprintf("  %d. %s %s", i+1, r.s.paint(style, mark), e.Content))
	}
}

// ContentText returns the text of a content block, or a short description
// of a block that is not text.
func ContentText(c sdk.ContentBlock) string {
	switch {
	case c.Text != nil:
		return c.Text.Text
	case c.Image != nil:
		return "[image " + c.Image.MimeType + "]"
	case c.Audio != nil:
		return "[audio " + c.Audio.MimeType + "]"
	case c.ResourceLink != nil:
		return "[link " + c.ResourceLink.Uri + "]"
	case c.Resource != nil:
		switch r := c.Resource.Resource; {
		case r.TextResourceContents != nil:
			return "[resource " + r.TextResourceContents.Uri + "]"
		case r.BlobResourceContents != nil:
			return "[resource " + r.BlobResourceContents.Uri + "]"
		}
		return "[resource]"
	}
	return "[content]"
}
