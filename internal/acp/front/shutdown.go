package front

// The end of the connection: what the client asked is answered, then
// every run stops as idle (L9).

import "github.com/blaiseagent/blaise-agent/internal/acp"

// shutdown begins the end of the connection: the client is gone. The
// requests it sent are still answered (a client that only closed its
// input reads the answers); the requests of the agents that it can no
// longer answer are answered for it: permission requests as cancelled, the
// others with an error. Each session stops as idle (L9) once nothing of
// the client's is left in it (settle).
func (c *conn) shutdown(why string) {
	c.closing, c.gone = true, why
	for key, fr := range c.frontReqs {
		delete(c.frontReqs, key)
		delete(fr.sess.agentReq, acp.IDKey(fr.agentID))
		if fr.sess.run == fr.run {
			c.answerForClient(fr.run, fr.agentID, fr.method)
		}
	}
	c.settle()
}

// forceStop stops every run now, whatever it is doing.
func (c *conn) forceStop() {
	c.force = true
	c.settle()
}

// settle stops the runs with nothing of the client's left in them, or all
// runs when forced.
func (c *conn) settle() {
	if c.broken {
		c.force = true
	}
	for _, sess := range c.allSessions() {
		if sess.run == nil || sess.phase == draining {
			continue
		}
		if c.force || (sess.phase == ready && len(sess.pending) == 0 && len(sess.queue) == 0) {
			if c.force {
				c.failQueue(sess, acp.InternalError, "Internal error", c.gone)
			}
			sess.phase = draining
			c.stopRun(sess)
		}
	}
}

// answerForClient answers an agent's request that the client cannot
// answer any more (c.gone says why).
func (c *conn) answerForClient(r Run, id []byte, method string) {
	var raw []byte
	if method == "session/request_permission" {
		raw = acp.NewResponse(id, []byte(`{"outcome":{"outcome":"cancelled"}}`))
	} else {
		raw = acp.NewErrorResponse(id, acp.RequestCancelled, "Request cancelled", []byte(`{"reason":`+string(quote(c.gone))+`}`))
	}
	m, err := acp.Parse(raw)
	if err == nil {
		err = r.Send(m)
	}
	if err != nil {
		c.log.Debug("answering for the client", "err", err)
	}
}
