package dashboard

import (
	"fmt"
	"strings"
	"testing"
)

// record is a transcript's line of a session update.
func record(seq int, update string) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"time":"2026-01-01T00:00:00Z","direction":"from_agent","kind":"notification","method":"session/update","message":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":%s}}}`+"\n", seq, update)
}

// TestFollowerDropsFinishedBlocks: a conversation that follows a session
// keeps, once pruned, what a later record may change (the open answer, the
// turn's tool cards, its plan) and the runs' lines, not the blocks before.
func TestFollowerDropsFinishedBlocks(t *testing.T) {
	f := newConversationFeeder("a")
	for i := range 100 {
		f.feed(record(i+2, fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"answer %d"}}`, i)))
		f.conv.EndTurn("end_turn")
	}
	f.feed(record(200, `{"sessionUpdate":"tool_call","toolCallId":"t1","title":"running","status":"in_progress"}`))
	f.feed(record(201, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"still going"}}`))
	f.add(nil)
	f.conv.prune()
	var kinds []string
	for _, b := range f.conv.blocks {
		kinds = append(kinds, b.Kind)
	}
	if got := strings.Join(kinds, " "); got != "tool agent" {
		t.Fatalf("kept %q, want the turn's tool card and its open answer", got)
	}
	f.feed(record(202, `{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`))
	if changed := f.add(nil); len(changed) != 1 || changed[0].Tool.Status != "completed" || changed[0].ID != f.conv.blocks[0].ID {
		t.Fatalf("the kept tool card did not take its update: %+v", changed)
	}
}

// TestLongTextBlockIsSplitAtItsCap: an answer that streams without end is
// shown in blocks of at most about maxText, each a block of its own id.
func TestLongTextBlockIsSplitAtItsCap(t *testing.T) {
	f := newConversationFeeder("a")
	words := strings.Repeat("w", 1000)
	for i := range 3 * maxText / 1000 {
		f.feed(record(i+2, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+words+`"}}`))
	}
	blocks := f.add(nil)
	if len(blocks) != 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	for _, b := range blocks {
		if b.Kind != "agent" || len(b.Text) > maxText+1000 {
			t.Fatalf("a block of %s, %d bytes", b.Kind, len(b.Text))
		}
	}
}

// TestOversizedRecordIsANoteNotABlock: a record longer than a conversation
// shows is a note that says its size, read in pieces and not held; the
// records after it are shown.
func TestOversizedRecordIsANoteNotABlock(t *testing.T) {
	f := newConversationFeeder("a")
	big := record(2, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+strings.Repeat("x", 2*maxRecord)+`"}}`)
	for len(big) > 0 {
		n := min(len(big), 32<<10)
		f.feed(big[:n])
		big = big[n:]
	}
	if cap(f.partial) > 2*maxRecord {
		t.Fatalf("the feeder holds %d bytes", cap(f.partial))
	}
	f.feed(record(3, `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"after it"}}`))
	blocks := f.add(nil)
	if len(blocks) != 2 || blocks[0].Kind != "note" || !strings.Contains(blocks[0].Note.Text, "a record of 2.1 MB") || blocks[1].Text != "after it" {
		t.Fatalf("blocks: %+v", blocks)
	}
}
