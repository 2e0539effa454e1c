package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/blaiseagent/blaise-agent/internal/server/api"
)

// ErrOutcomeUnknown is the error of an action whose outcome the server
// could not tell: its runner went away, or the answer was cut.
var ErrOutcomeUnknown = errors.New("the action's outcome is unknown")

// unknownError is an error, said by the server, whose outcome is unknown.
type unknownError string

func (e unknownError) Error() string        { return string(e) }
func (e unknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Actions lists the actions a session offers.
func (c *Client) Actions(ctx context.Context, id string) ([]api.Action, error) {
	var out []api.Action
	err := c.call(ctx, "GET", api.PathSessions+"/"+url.PathEscape(id)+"/actions", nil, &out)
	return out, err
}

// Act does the action of a session on its runner, writing its output to
// out as it comes, and returns the value the action returned (JSON; nil
// for None). args are its arguments (nil: none).
func (c *Client) Act(ctx context.Context, id, action string, args map[string]any, out io.Writer) (json.RawMessage, error) {
	var in any
	if args != nil {
		in = args
	}
	resp, err := c.send(ctx, "POST", api.PathSessions+"/"+url.PathEscape(id)+"/actions/"+url.PathEscape(action), in)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var l api.ActionLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("server %s: a bad line in the answer to action %s: %w", c.URL, action, err)
		}
		if l.Output != "" {
			if _, err := io.WriteString(out, l.Output); err != nil {
				return nil, err
			}
		}
		if !l.Done {
			continue
		}
		switch {
		case l.Unknown:
			return nil, unknownError("server: " + l.Error)
		case l.Error != "":
			return nil, fmt.Errorf("server: %s", l.Error)
		}
		return l.Result, nil
	}
	cause := sc.Err()
	if cause == nil {
		cause = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("server %s: the answer to action %s ended before it said how the action went (%v): %w", c.URL, action, cause, ErrOutcomeUnknown)
}
