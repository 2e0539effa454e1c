package docs_test

import (
	"testing"
	"time"
)

func TestExploreReplaceErr(t *testing.T) {
	s := startFiles(t, map[string]string{
		"blaise.star": agentPlaceholder + "\nsetup(use(\"./p1.star\"))\n",
		"p1.star": `plug(name = "p1")
def on_message(ctx, message, next):
    if message.method == "session/prompt":
        r = next(message)
        if r.error != None:
            return {"stopReason": "refusal"}
        return r
    if message.method == "session/set_mode":
        m2 = message.replace(params = {"sessionId": "zz", "modeId": "q"})
        print("M2", m2.params, message.params)
        return next(m2)
    return next(message)
`,
	})
	sid := s.open()
	s.prompt(3, sid, "/fail x")
	_, resp := s.until(responseTo("3"))
	t.Logf("resp %s", resp.Raw)
	s.send(`{"jsonrpc":"2.0","id":9,"method":"session/set_mode","params":{"sessionId":"x","modeId":"y"}}`)
	_, resp = s.until(responseTo("9"))
	t.Logf("set_mode %s", resp.Raw)
	time.Sleep(100 * time.Millisecond)
	s.rec.Close()
	t.Logf("records:\n%s", s.records)
	t.Logf("logs:\n%s", s.logs)
}
